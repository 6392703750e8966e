"""The thread pool that ember's compiled loops share work over.

`parallel_for()` is the address of a C function ``ember_parallel_for(task, ctx, n, align)``
that runs ``task(ctx, lo, hi)`` over ``[0, n)`` split into a few contiguous chunks per thread
(boundaries are multiples of ``align``, so SIMD loops keep their alignment), which the calling
thread and the workers claim as they go: a worker that wakes late, its core busy with another
process, delays the call by a chunk at most, not by its whole share. Generated kernels
(kernels/cfuse.py) take it as an argument and call it when a loop has enough work; None means
"run on the calling thread".

Why not OpenMP. An OpenMP runtime's idle threads spin after a parallel region for as long as
the runtime likes (its only cure, ``OMP_WAIT_POLICY=PASSIVE``, is process-wide: it also slows
PyTorch, whose libgomp reads it). ember's own matmuls run on this pool too (kernels/cgemm.py),
with BLAS single-threaded, so no other library's threads wait for work between ember's kernels.
An idle thread here polls for the next job for a while and then blocks on a condition
variable. How long is measured, not set: wake-ups of a blocked worker are timed (from the
job's publication to the worker running it), and a thread polls for ``SPIN_RATIO`` (10) times
the least of the recent ones (`wake_ns`, `spin_ns`), so a gap between jobs that the pool does
not poll through pays at most a tenth of it for the wake-up, on any machine. The wake-up is
what differs: tens of microseconds on an idle bare-metal core, far more on a virtual machine
whose idle CPU has halted (there, in benchmarks/train_step.py, the MLP step, whose matmuls
come a few hundred microseconds apart, ran about twice as fast with polling that covered
those gaps, which a fixed time tuned on another machine would not). No polling before a few
wake-ups are measured, when the pool has more threads than the process has CPUs, or while
the machine's load average exceeds its CPUs (`machine_busy`: polling would take the cores
other threads wait for; read at the kernel's load-average period).

Invariants. One ``parallel_for`` runs at a time; a call made while one runs (another Python
thread, since ctypes releases the GIL) runs serially on its own thread rather than waiting. The
workers start at the first parallel call of a process; a forked child starts its own.
``EMBER_NUM_THREADS`` (default: the CPUs this process may run on) sets the thread count, read
when the pool library loads; `set_num_threads` changes it later.
"""

from __future__ import annotations

import ctypes
import os
import platform

__all__ = [
    "cpu_count",
    "cpu_model",
    "get_num_threads",
    "machine_busy",
    "parallel_for",
    "set_num_threads",
    "spin_ns",
    "wake_ns",
]

_SOURCE = r"""
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef void (*ember_task)(void *ctx, long lo, long hi);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;      /* the job and the counters */
static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER; /* one parallel_for at a time */
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER, done = PTHREAD_COND_INITIALIZER;
static int wanted = 1, workers = 0, ready = 0;
static pid_t owner = 0;  /* the process the workers belong to (a forked child has none) */
static volatile long generation = 0;
static ember_task job;
static void *job_ctx;
static long job_n, job_align, job_chunks;
/* the next chunk to claim, tagged with its job's generation (high 32 bits), so a worker that
   woke for an earlier job can never claim a chunk of a later one */
static unsigned long ticket = 0;
static long finished = 0; /* chunks of the current job run to the end */

static void chunk_range(long chunk, long chunks, long n, long align, long *lo, long *hi) {
  long size = (n + chunks - 1) / chunks;
  size = (size + align - 1) / align * align;
  *lo = chunk * size < n ? chunk * size : n;
  *hi = *lo + size < n ? *lo + size : n;
}

/* claim and run chunks of job `gen` until none is left; returns how many this thread ran */
static long run_chunks(unsigned long gen, ember_task task, void *ctx, long n, long align,
                       long chunks) {
  long ran = 0;
  for (;;) {
    unsigned long t = __atomic_load_n(&ticket, __ATOMIC_ACQUIRE);
    if ((t >> 32) != (gen & 0xffffffffUL) || (long)(t & 0xffffffffUL) >= chunks) return ran;
    if (!__atomic_compare_exchange_n(&ticket, &t, t + 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
      continue;
    long lo, hi;
    chunk_range((long)(t & 0xffffffffUL), chunks, n, align, &lo, &hi);
    if (lo < hi) task(ctx, lo, hi);
    ran++;
    if (__atomic_add_fetch(&finished, 1, __ATOMIC_ACQ_REL) == chunks) {
      pthread_mutex_lock(&lock);
      pthread_cond_signal(&done);
      pthread_mutex_unlock(&lock);
    }
  }
}

/* whether to poll at all: only while the pool's threads fit the CPUs (polling threads that
   outnumber them take the cores from the ones with work) */
static int spin = 1;

static long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* How long an idle thread polls for the next job (or a caller for its workers) before it
   blocks: SPIN_RATIO times the time a blocked worker takes to wake, measured on wake-ups
   (from the job's publication to the worker running it): the least of the last WAKE_SAMPLES,
   the wake-up's own cost (a longer one waited for a core, which polling would take from
   another thread, not save). So a gap the pool does not poll through pays its wake-up, at
   most 1/SPIN_RATIO of the gap, on any machine. No polling before WAKE_SAMPLES wake-ups are
   measured (the first idle periods block), nor while the machine's run queue (the load
   average, which counts this process's threads) outnumbers its CPUs: polling would then take
   cores that other threads wait for. */
#define SPIN_RATIO 10
#define WAKE_SAMPLES 5
#define LOAD_PERIOD_NS 5000000000L /* how often the kernel updates the load average */
static long spin_ns = 0;
static long wake_ns = 0;
static long wake_samples[WAKE_SAMPLES];
static long wake_count = 0;
static volatile long published_ns = 0; /* when the current job was published */
static long cpus_online = 1, load_checked_ns = 0;
static int machine_busy = 0;

static void update_spin(void) {
  long limit = wake_count >= WAKE_SAMPLES && !machine_busy ? SPIN_RATIO * wake_ns : 0;
  __atomic_store_n(&spin_ns, limit, __ATOMIC_RELAXED);
}

static void record_wake(long sample) { /* under lock */
  if (sample <= 0) return;
  wake_samples[wake_count % WAKE_SAMPLES] = sample;
  wake_count++;
  long k = wake_count < WAKE_SAMPLES ? wake_count : WAKE_SAMPLES, least = wake_samples[0];
  for (long i = 1; i < k; i++)
    if (wake_samples[i] < least) least = wake_samples[i];
  wake_ns = least;
  update_spin();
}

static void check_load(long now) { /* under lock */
  if (now - load_checked_ns < LOAD_PERIOD_NS && load_checked_ns) return;
  load_checked_ns = now;
  double load[1];
  machine_busy = getloadavg(load, 1) == 1 && load[0] > (double)cpus_online;
  update_spin();
}

long ember_pool_wake_ns(void) { return wake_ns; }
long ember_pool_machine_busy(void) { return machine_busy; }
long ember_pool_spin_ns(void) { return __atomic_load_n(&spin_ns, __ATOMIC_RELAXED); }

/* returns once *value differs from `unchanged` or spin_ns have passed */
static void spin_while_long(volatile long *value, long unchanged) {
  long limit = __atomic_load_n(&spin_ns, __ATOMIC_RELAXED);
  if (limit <= 0) return;
  long start = now_ns();
  for (int i = 0; __atomic_load_n(value, __ATOMIC_ACQUIRE) == unchanged; i++) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 63 && now_ns() - start > limit) return;
  }
}

static void *worker(void *arg) {
  long index = (long)arg; /* 0, 1, ...: the threads past `wanted - 1` sit jobs out */
  pthread_mutex_lock(&lock);
  long seen = generation; /* jobs from now on (the starter waits for this before publishing) */
  ready++;
  pthread_cond_signal(&done);
  for (;;) {
    if (generation == seen && index < wanted - 1 && spin) {
      pthread_mutex_unlock(&lock);
      spin_while_long(&generation, seen);
      pthread_mutex_lock(&lock);
    }
    int blocked = 0;
    while (generation == seen) {
      pthread_cond_wait(&wake, &lock);
      blocked = 1;
    }
    seen = generation;
    if (blocked && index < wanted - 1) record_wake(now_ns() - published_ns);
    if (index >= wanted - 1) continue; /* left over from a larger count set before */
    ember_task task = job;
    void *ctx = job_ctx;
    long n = job_n, align = job_align, chunks = job_chunks;
    pthread_mutex_unlock(&lock);
    run_chunks((unsigned long)seen, task, ctx, n, align, chunks);
    pthread_mutex_lock(&lock);
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
    if (pthread_create(&thread, &attr, worker, (void *)(long)workers) != 0) break;
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
}

void ember_pool_configure(long threads, long cpus) {
  static int registered = 0;
  pthread_mutex_lock(&lock);
  if (!registered) {
    pthread_atfork(0, 0, reset_in_child);
    registered = 1;
  }
  wanted = threads > 1 ? (int)threads : 1;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  cpus_online = online > 0 ? online : cpus;
  spin = wanted <= cpus;
  pthread_mutex_unlock(&lock);
}

void ember_parallel_for(ember_task task, void *ctx, long n, long align) {
  if (wanted <= 1 || n <= align || pthread_mutex_trylock(&call_lock) != 0) {
    task(ctx, 0, n);
    return;
  }
  if (align < 1) align = 1;
  pthread_mutex_lock(&lock);
  if (owner != getpid() || workers < wanted - 1) start_workers();
  published_ns = now_ns();
  check_load(published_ns);
  int threads = wanted < workers + 1 ? wanted : workers + 1;
  /* a few chunks per thread, claimed by whoever is running: a worker that wakes late (the
     cores busy elsewhere) costs a chunk's time, not its whole share */
  long chunks = 4L * threads, most = (n + align - 1) / align;
  if (chunks > most) chunks = most;
  job = task;
  job_ctx = ctx;
  job_n = n;
  job_align = align;
  job_chunks = chunks;
  finished = 0;
  generation++;
  __atomic_store_n(&ticket, ((unsigned long)generation & 0xffffffffUL) << 32, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&lock);
  run_chunks((unsigned long)generation, task, ctx, n, align, chunks);
  long start = now_ns(), limit = __atomic_load_n(&spin_ns, __ATOMIC_RELAXED);
  while (spin && __atomic_load_n(&finished, __ATOMIC_ACQUIRE) < chunks &&
         now_ns() - start < limit) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  pthread_mutex_lock(&lock);
  while (__atomic_load_n(&finished, __ATOMIC_ACQUIRE) < chunks) pthread_cond_wait(&done, &lock);
  pthread_mutex_unlock(&lock);
  pthread_mutex_unlock(&call_lock);
}
"""

_FLAGS = ("-O2", "-fPIC", "-shared", "-pthread")
_state: dict = {}
_UNSET = object()


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what `platform.processor` says."""
    try:
        with open("/proc/cpuinfo") as f:
            found = (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
            return next(found, platform.processor())
    except OSError:
        return platform.processor()


def cpu_count() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _default_threads() -> int:
    text = os.environ.get("EMBER_NUM_THREADS", "").strip()
    if text:
        try:
            return max(1, int(text))
        except ValueError:
            pass
    return cpu_count()


def _library():
    """(configure, parallel_for) ctypes functions, or None without a compiler."""
    if "functions" not in _state:
        from . import ccompile

        functions = None
        if ccompile.compiler_available():
            try:
                configure = ccompile.load(
                    _SOURCE, "ember_pool_configure", [ctypes.c_long] * 2, flags=_FLAGS
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
        functions[0](threads, cpu_count())


def get_num_threads() -> int:
    """The number of threads ember's compiled loops use."""
    return _state.get("threads") or _default_threads()


def wake_ns() -> int:
    """The median time a blocked worker of the pool took to wake up for a job, of the recent
    wake-ups (nanoseconds; 0 before the first, or without a compiler)."""
    return _measured("ember_pool_wake_ns")


def spin_ns() -> int:
    """How long an idle thread of the pool polls for the next job before it blocks (ns):
    ``SPIN_RATIO`` times `wake_ns` (0 before the first wake-up is measured)."""
    return _measured("ember_pool_spin_ns")


def machine_busy() -> bool:
    """Whether the pool's threads do not poll because the machine's load average exceeds its
    CPUs (as last read; False before the first parallel loop, or without a compiler)."""
    return bool(_measured("ember_pool_machine_busy"))


def _measured(symbol: str) -> int:
    from . import ccompile

    if _library() is None:
        return 0
    fn = ccompile.load(_SOURCE, symbol, [], flags=_FLAGS)
    fn.restype = ctypes.c_long
    return int(fn())


def parallel_for() -> int | None:
    """The address of ``ember_parallel_for`` to hand to a kernel, or None (no compiler: the
    kernels are not compiled either)."""
    address = _state.get("address", _UNSET)
    if address is _UNSET:
        # (asked once: ctypes.cast costs a microsecond, and every pooled kernel call asks)
        functions = _library()
        address = None if functions is None else ctypes.cast(functions[1], ctypes.c_void_p).value
        _state["address"] = address
    return address
