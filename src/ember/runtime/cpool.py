"""The thread pool that ember's compiled loops share work over.

`parallel_for()` is the address of a C function ``ember_parallel_for(task, ctx, n, align)``
that runs ``task(ctx, lo, hi)`` over ``[0, n)`` split into one contiguous part per thread
(part boundaries are multiples of ``align``, so SIMD loops keep their alignment), the calling
thread taking the first part. Generated kernels (runtime/cfuse.py) take it as an argument and
call it when a loop has enough work; None means "run on the calling thread".

Why not OpenMP. An OpenMP runtime's idle threads spin after a parallel region, which takes the
cores from NumPy's BLAS threads between ember's loops (matmuls ran 5x slower), and its only cure,
``OMP_WAIT_POLICY=PASSIVE``, is process-wide: it also slows PyTorch, whose libgomp reads it. The
pool's idle threads block on a condition variable instead, so they cost nothing between loops,
and no other library's settings change.

Invariants. One ``parallel_for`` runs at a time; a call made while one runs (another Python
thread, since ctypes releases the GIL) runs serially on its own thread rather than waiting. The
workers start at the first parallel call of a process; a forked child starts its own.
``EMBER_NUM_THREADS`` (default: the CPUs this process may run on) sets the thread count, read
when the pool library loads; `set_num_threads` changes it later.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["get_num_threads", "parallel_for", "set_num_threads"]

_SOURCE = r"""
#include <pthread.h>
#include <unistd.h>

typedef void (*ember_task)(void *ctx, long lo, long hi);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;      /* the job and the counters */
static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER; /* one parallel_for at a time */
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER, done = PTHREAD_COND_INITIALIZER;
static int wanted = 1, workers = 0, ready = 0;
static pid_t owner = 0;  /* the process the workers belong to (a forked child has none) */
static long generation = 0, pending = 0;
static ember_task job;
static void *job_ctx;
static long job_n, job_align;
static int job_parts;

static void part_range(int part, int parts, long n, long align, long *lo, long *hi) {
  long chunk = (n + parts - 1) / parts;
  chunk = (chunk + align - 1) / align * align;
  *lo = part * chunk < n ? part * chunk : n;
  *hi = *lo + chunk < n ? *lo + chunk : n;
}

static void *worker(void *arg) {
  int part = (int)(long)arg;
  pthread_mutex_lock(&lock);
  long seen = generation; /* jobs from now on (the starter waits for this before publishing) */
  ready++;
  pthread_cond_signal(&done);
  for (;;) {
    while (generation == seen) pthread_cond_wait(&wake, &lock);
    seen = generation;
    ember_task task = job;
    void *ctx = job_ctx;
    long n = job_n, align = job_align;
    int parts = job_parts;
    pthread_mutex_unlock(&lock);
    long lo, hi;
    if (part < parts) {
      part_range(part, parts, n, align, &lo, &hi);
      if (lo < hi) task(ctx, lo, hi);
    }
    pthread_mutex_lock(&lock);
    if (--pending == 0) pthread_cond_signal(&done);
  }
  return 0;
}

static void start_workers(void) { /* under lock */
  if (owner != getpid()) { /* a forked child: its parent's workers do not exist here */
    owner = getpid();
    workers = ready = 0;
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1 << 20);
  while (workers < wanted - 1) {
    pthread_t thread;
    if (pthread_create(&thread, &attr, worker, (void *)(long)(workers + 1)) != 0) break;
    pthread_detach(thread);
    workers++;
  }
  pthread_attr_destroy(&attr);
  while (ready < workers) pthread_cond_wait(&done, &lock);
}

static void reset_in_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t fresh_cond = PTHREAD_COND_INITIALIZER;
  lock = fresh;
  call_lock = fresh;
  wake = fresh_cond;
  done = fresh_cond;
  pending = 0;
}

void ember_pool_configure(long threads) {
  static int registered = 0;
  pthread_mutex_lock(&lock);
  if (!registered) {
    pthread_atfork(0, 0, reset_in_child);
    registered = 1;
  }
  wanted = threads > 1 ? (int)threads : 1;
  pthread_mutex_unlock(&lock);
}

void ember_parallel_for(ember_task task, void *ctx, long n, long align) {
  if (wanted <= 1 || n <= align || pthread_mutex_trylock(&call_lock) != 0) {
    task(ctx, 0, n);
    return;
  }
  pthread_mutex_lock(&lock);
  if (owner != getpid() || workers < wanted - 1) start_workers();
  int parts = wanted < workers + 1 ? wanted : workers + 1;
  job = task;
  job_ctx = ctx;
  job_n = n;
  job_align = align < 1 ? 1 : align;
  job_parts = parts;
  pending = workers;
  generation++;
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&lock);
  long lo, hi;
  part_range(0, parts, n, job_align, &lo, &hi);
  if (lo < hi) task(ctx, lo, hi);
  pthread_mutex_lock(&lock);
  while (pending > 0) pthread_cond_wait(&done, &lock);
  pthread_mutex_unlock(&lock);
  pthread_mutex_unlock(&call_lock);
}
"""

_FLAGS = ("-O2", "-fPIC", "-shared", "-pthread")
_state: dict = {}


def _default_threads() -> int:
    text = os.environ.get("EMBER_NUM_THREADS", "").strip()
    if text:
        try:
            return max(1, int(text))
        except ValueError:
            pass
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _library():
    """(configure, parallel_for) ctypes functions, or None without a compiler."""
    if "functions" not in _state:
        from . import ccompile

        functions = None
        if ccompile.compiler_available():
            try:
                configure = ccompile.load(
                    _SOURCE, "ember_pool_configure", [ctypes.c_long], flags=_FLAGS
                )
                run = ccompile.load(
                    _SOURCE,
                    "ember_parallel_for",
                    [ctypes.c_void_p] * 2 + [ctypes.c_long] * 2,
                    flags=_FLAGS,
                )
                functions = (configure, run)
            except ccompile.CompileError:
                functions = None
        _state["functions"] = functions
        if functions is not None:
            set_num_threads(_state.get("threads") or _default_threads())
    return _state["functions"]


def set_num_threads(threads: int) -> None:
    """Use ``threads`` threads (the caller's included) for ember's compiled loops; 1 turns the
    pool off. Does not touch NumPy's BLAS threads or any other library's."""
    threads = int(threads)
    if threads < 1:
        raise ValueError(f"set_num_threads needs a positive count, got {threads}")
    _state["threads"] = threads
    functions = _state.get("functions")
    if functions is not None:
        functions[0](threads)


def get_num_threads() -> int:
    """The number of threads ember's compiled loops use."""
    return _state.get("threads") or _default_threads()


def parallel_for() -> int | None:
    """The address of ``ember_parallel_for`` to hand to a kernel, or None (no compiler: the
    kernels are not compiled either)."""
    functions = _library()
    if functions is None:
        return None
    return ctypes.cast(functions[1], ctypes.c_void_p).value
