"""Worker processes for `DataLoader(num_workers=N)`: the pool, the worker loop, the transport.

Each worker is a process with its own copy of the dataset (inherited through ``fork``, or pickled
for ``spawn``/``forkserver``). The main process sends it tasks (the indices of one batch, or "the
next batch" for an `IterableDataset`) on the worker's own index queue; the worker builds and
collates the batch and puts it on the one result queue the workers share.

Transport. A batch's large arrays do not travel through the pipe: the worker writes each array of
at least `SHM_MIN_BYTES` into a fresh file under ``/dev/shm`` (memory, not disk) and sends its
name, shape and dtype; the main process maps the file, unlinks it at once and wraps the mapping
as the tensor's array, so the data is copied once (into shared memory) and never pickled. Every
segment is named ``ember-dl-<main pid>-<pool token>-...``: when a pool closes, after its
workers are gone, whatever segment of its token is left (a batch built but never received) is
unlinked; a worker that finds its parent dead removes its pool's segments and exits. Where
``/dev/shm`` does not exist arrays are pickled instead.

Protocol. Tasks carry the epoch number and results come back with it, so results of an epoch the
caller abandoned (a ``break``) are recognised and dropped (their segments unlinked). A persistent
pool starts each epoch with a reset that every worker acknowledges: its iterable dataset's
iterator restarts and nothing older is still on its way.

Failures. A worker's exception travels as its type and formatted traceback and is raised in the
main process as ``<type>("Caught <type> in DataLoader worker process <id>. Original
Traceback ...")`` (a `WorkerError` where that type cannot be rebuilt), when its batch's turn comes.
A worker that dies, or a ``timeout`` that passes, raises `WorkerError`. Workers ignore SIGINT: a
Ctrl-C interrupts the main process, whose cleanup stops them.
"""

from __future__ import annotations

import atexit
import glob
import itertools
import mmap
import os
import pickle  # only messages between ember and its own worker processes (see pack)
import queue
import random
import secrets
import signal
import sys
import time
import traceback
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..errors import EmberError
from ..tensor import Tensor
from .dataset import fetch_samples
from .worker_info import WorkerInfo, set_worker_info

SHM_DIR = "/dev/shm"
SHM_MIN_BYTES = 1 << 14  # smaller arrays are cheaper to pickle than to map
_POLL_S = 0.1  # how often a blocked worker or main process checks the other side is alive
_JOIN_GRACE_S = 2.0  # how long a closing pool lets busy workers finish before terminating them
_PREFIX = "ember-dl-"

# result kinds
_OK, _ERR, _EXHAUSTED, _ACK = 0, 1, 2, 3


class WorkerError(EmberError, RuntimeError):
    """A DataLoader worker died, timed out, or raised an exception whose type cannot be rebuilt."""


# ---------------------------------------------------------------------------------- transport
class _Shared:
    """An array placed in a /dev/shm segment: what travels through the pipe instead of it."""

    __slots__ = ("name", "shape", "dtype", "tensor")

    def __init__(self, name: str, shape: tuple, dtype: np.dtype, tensor: bool):
        self.name, self.shape, self.dtype, self.tensor = name, shape, dtype, tensor

    def __getstate__(self):
        return (self.name, self.shape, self.dtype, self.tensor)

    def __setstate__(self, state):
        self.name, self.shape, self.dtype, self.tensor = state


def _shm_available() -> bool:
    return os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK)


def _to_shared(arr: np.ndarray, name: str, tensor: bool) -> _Shared:
    path = os.path.join(SHM_DIR, name)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, arr.nbytes)
        with mmap.mmap(fd, arr.nbytes) as mm:
            dst = np.ndarray(arr.shape, arr.dtype, buffer=mm)
            dst[...] = arr
            del dst
    except BaseException:
        os.unlink(path)
        raise
    finally:
        os.close(fd)
    return _Shared(name, arr.shape, arr.dtype, tensor)


def _from_shared(ref: _Shared):
    path = os.path.join(SHM_DIR, ref.name)
    fd = os.open(path, os.O_RDWR)
    try:
        os.unlink(path)  # the mapping outlives the name: memory is freed when the array dies
        nbytes = int(np.prod(ref.shape, dtype=np.int64)) * ref.dtype.itemsize
        mm = mmap.mmap(fd, nbytes)
    finally:
        os.close(fd)
    arr = np.ndarray(ref.shape, ref.dtype, buffer=mm)  # holds the mapping: no copy
    return Tensor(arr) if ref.tensor else arr


class _Encoder:
    """Replaces a batch's large arrays by `_Shared` references (worker side)."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.counter = itertools.count()
        self.enabled = _shm_available()

    def __call__(self, obj):
        if isinstance(obj, Tensor) or isinstance(obj, np.ndarray):
            arr = obj._data if isinstance(obj, Tensor) else obj
            if not self.enabled or arr.nbytes < SHM_MIN_BYTES or arr.dtype.hasobject:
                return obj
            name = f"{self.prefix}{next(self.counter)}"
            return _to_shared(np.ascontiguousarray(arr), name, isinstance(obj, Tensor))
        return _map_tree(obj, self)


def _map_tree(obj, fn):
    """``obj`` with ``fn`` applied to the items of its tuples, lists and dicts."""
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(fn(x) for x in obj))
    if type(obj) in (tuple, list):
        return type(obj)(fn(x) for x in obj)
    if type(obj) in (dict, OrderedDict):
        return type(obj)((k, fn(v)) for k, v in obj.items())
    return obj


def pack(batch, encode: _Encoder) -> bytes:
    """The batch's message (worker side): large arrays to shared memory, the rest pickled here,
    not in the queue's feeder thread, so that a batch that cannot be pickled is an error the
    main process hears about rather than a message lost."""
    encoded = encode(batch)
    try:
        return pickle.dumps(encoded, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:
        _discard_tree(encoded)
        raise


def decode(message: bytes):
    """A received batch with its shared arrays mapped in (main side). The message comes over a
    pipe from a worker this process started (as multiprocessing.Queue's do); nothing read from
    a file is unpickled, and a shared segment holds raw array bytes only."""
    return _decode_tree(pickle.loads(message))


def _decode_tree(obj):
    if isinstance(obj, _Shared):
        return _from_shared(obj)
    return _map_tree(obj, _decode_tree)


def discard(message: bytes) -> None:
    """Unlink the segments of a batch that will not be used."""
    try:
        _discard_tree(pickle.loads(message))
    except Exception:  # noqa: BLE001 - nothing to free then; the pool's cleanup sweeps anyway
        pass


def _discard_tree(obj) -> None:
    if isinstance(obj, _Shared):
        try:
            os.unlink(os.path.join(SHM_DIR, obj.name))
        except FileNotFoundError:
            pass
    elif isinstance(obj, (tuple, list)):
        for x in obj:
            _discard_tree(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            _discard_tree(x)


def _unlink_prefix(prefix: str) -> None:
    for path in glob.glob(os.path.join(SHM_DIR, glob.escape(prefix) + "*")):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


# ---------------------------------------------------------------------------------- failures
class _RemoteError:
    """A worker's exception: its type (when it pickles) and the torch-style message."""

    def __init__(self, exc: BaseException, where: str):
        self.exc_type = type(exc)
        try:
            pickle.loads(pickle.dumps(self.exc_type))
        except Exception:
            self.exc_type = None
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.message = (
            f"Caught {type(exc).__name__} {where}.\nOriginal Traceback (most recent call last):\n"
            + text.split("Traceback (most recent call last):\n", 1)[-1]
        )
        self.type_name = type(exc).__name__

    def reraise(self):
        exc_type = self.exc_type
        if exc_type is KeyError:  # KeyError's str() would repr the message and escape newlines
            raise KeyError(_KeyErrorMessage(self.message))
        if exc_type is not None:
            try:  # an EmberError given a location adds no "at <file:line>" of its own
                ember = issubclass(exc_type, EmberError)
                exc = exc_type(self.message, location="") if ember else exc_type(self.message)
            except Exception:
                exc = None
            if exc is not None and str(exc) == self.message:
                raise exc
        raise WorkerError(self.message, op="DataLoader")


class _KeyErrorMessage(str):
    def __repr__(self):
        return self


# ----------------------------------------------------------------------------- worker process
@dataclass
class WorkerSpec:
    """What a worker needs to build batches (pickled for spawn/forkserver)."""

    dataset: object
    iterable: bool
    collate_fn: object  # None: the dataset's fetch_batch gathers map-style batches
    batch_size: int
    drop_last: bool
    worker_init_fn: object
    num_workers: int
    auto_collation: bool = True  # False (batch_size=None): a task is one index, one sample


def _seed_worker(base_seed: int, worker_id: int) -> int:
    """Seed ember's default generator, Python's and NumPy's global generators as torch seeds a
    worker's torch, random and numpy; returns the worker's seed."""
    from .. import random as ember_random

    seed = base_seed + worker_id
    random.seed(seed)
    ember_random.manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed]).generate_state(4))
    return seed


def worker_loop(spec: WorkerSpec, worker_id, index_queue, result_queue, base_seed, prefix):
    """The body of one worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process handles Ctrl-C and stops us
    parent = os.getppid()
    from ..kernels import cpool

    cpool.set_num_threads(1)  # N workers share the cores; torch sets 1 thread as well
    from .rng import batch_scope

    seed = _seed_worker(base_seed, worker_id)
    set_worker_info(WorkerInfo(worker_id, spec.num_workers, seed, spec.dataset))
    where = f"in DataLoader worker process {worker_id}"
    init_error = None
    if spec.worker_init_fn is not None:
        try:
            spec.worker_init_fn(worker_id)
        except Exception as exc:
            init_error = _RemoteError(exc, where)
    encode = _Encoder(f"{prefix}{worker_id}-")
    collate = spec.collate_fn
    if collate is None and spec.iterable:
        from .collate import default_collate

        collate = default_collate
    iterator, exhausted = None, False
    while True:
        try:
            task = index_queue.get(timeout=_POLL_S)
        except queue.Empty:
            if os.getppid() != parent:  # the main process died: nobody will read our batches
                _unlink_prefix(prefix)
                break
            continue
        if task is None:
            break
        if task[0] == "reset":
            iterator, exhausted = None, False
            result_queue.put((None, task[1], worker_id, _ACK, None))
            continue
        _, task_id, epoch, epoch_seed, indices = task
        if init_error is not None:
            result_queue.put((task_id, epoch, worker_id, _ERR, init_error))
            continue
        if spec.iterable and exhausted:
            result_queue.put((task_id, epoch, worker_id, _EXHAUSTED, None))
            continue
        batch = None
        try:
            with batch_scope(epoch_seed, task_id):
                if spec.iterable:
                    if iterator is None:
                        iterator = iter(spec.dataset)
                    size = spec.batch_size if spec.auto_collation else 1
                    items = list(itertools.islice(iterator, size))
                    if not items or (spec.drop_last and len(items) < size):
                        exhausted = True
                        result_queue.put((task_id, epoch, worker_id, _EXHAUSTED, None))
                        continue
                    batch = collate(items) if spec.auto_collation else collate(items[0])
                elif not spec.auto_collation:  # batch_size=None: the task is one index
                    batch = collate(spec.dataset[int(indices)])
                elif collate is None:
                    batch = spec.dataset.fetch_batch(indices)
                else:
                    batch = collate(fetch_samples(spec.dataset, indices))
            result_queue.put((task_id, epoch, worker_id, _OK, pack(batch, encode)))
        except Exception as exc:
            result_queue.put((task_id, epoch, worker_id, _ERR, _RemoteError(exc, where)))
        del batch
    # leaving: do not wait for the main process to read what is still in the pipe
    result_queue.cancel_join_thread()
    result_queue.close()


# ---------------------------------------------------------------------------------- the pool
_live_pools: weakref.WeakSet = weakref.WeakSet()


class WorkerPool:
    """N worker processes with their queues; lives for one epoch or, persistent, many."""

    def __init__(self, spec: WorkerSpec, context, base_seed: int, timeout: float):
        self.token = secrets.token_hex(4)
        self.base_seed = base_seed
        self.prefix = f"{_PREFIX}{os.getpid()}-{self.token}-"
        self.num_workers = spec.num_workers
        self.iterable = spec.iterable
        self.timeout = timeout
        self.epoch = 0
        self.closed = False
        # a receive interrupted part-way (Ctrl-C inside the pipe's read) leaves the result
        # pipe mid-message: reading it again could wait forever on a length read from the
        # middle of a batch, so close() then stops the workers without draining it
        self.torn = False
        self.result_queue = context.Queue()
        self.index_queues, self.workers = [], []
        _live_pools.add(self)
        try:
            for wid in range(spec.num_workers):
                index_queue = context.Queue()
                index_queue.cancel_join_thread()  # never block exit on tasks nobody will read
                proc = context.Process(
                    target=worker_loop,
                    args=(spec, wid, index_queue, self.result_queue, base_seed, self.prefix),
                    name=f"ember-data-worker-{wid}",
                    daemon=True,
                )
                self.index_queues.append(index_queue)
                self._start(proc, context)
                self.workers.append(proc)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _start(proc, context) -> None:
        try:
            proc.start()
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            method = context.get_start_method()
            if method == "fork":
                raise
            raise WorkerError(
                f"cannot start a DataLoader worker with the {method!r} start method: the dataset, "
                f"collate_fn and worker_init_fn must pickle ({type(exc).__name__}: {exc}); define "
                "them at module level, or use multiprocessing_context='fork'",
                op="DataLoader",
            ) from exc

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.workers]

    def send(self, worker_id: int, task) -> None:
        self.index_queues[worker_id].put(task)

    def receive(self):
        """The next result, waiting at most the pool's timeout; raises if a worker died."""
        start = time.monotonic()
        while True:
            try:
                return self.result_queue.get(timeout=_POLL_S)
            except queue.Empty:
                pass
            except BaseException:
                self.torn = True
                raise
            dead = [p for p in self.workers if not p.is_alive()]
            if dead:
                pids = ", ".join(f"{p.pid} (exit code {p.exitcode})" for p in dead)
                raise WorkerError(
                    f"DataLoader worker (pid {pids}) exited unexpectedly; a worker killed by "
                    "the system (e.g. out of memory) or calling os._exit ends this way",
                    op="DataLoader",
                )
            if self.timeout and time.monotonic() - start > self.timeout:
                raise WorkerError(
                    f"DataLoader timed out after {self.timeout} seconds waiting for a batch",
                    op="DataLoader",
                )

    def begin_epoch(self) -> int:
        """A new epoch number; on a reused pool, every worker resets and older results are
        dropped."""
        self.epoch += 1
        if self.epoch > 1:
            for wid in range(self.num_workers):
                self.send(wid, ("reset", self.epoch))
            acks = 0
            while acks < self.num_workers:
                task_id, epoch, _, kind, payload = self.receive()
                if kind == _ACK and epoch == self.epoch:
                    acks += 1
                elif kind == _OK:
                    discard(payload)
        return self.epoch

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        _live_pools.discard(self)
        for q in self.index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + (0.0 if self.torn else _JOIN_GRACE_S)
        while any(p.is_alive() for p in self.workers) and time.monotonic() < deadline:
            self._drain()
            for p in self.workers:
                p.join(timeout=0.01)
        for p in self.workers:
            if p.is_alive():
                p.terminate()
        for p in self.workers:
            p.join(timeout=_JOIN_GRACE_S)
            if p.is_alive():
                p.kill()
                p.join()
        for q in [*self.index_queues, self.result_queue]:
            q.cancel_join_thread()
            q.close()
        _unlink_prefix(self.prefix)  # batches built but never received

    def _drain(self) -> None:
        while True:
            try:
                item = self.result_queue.get_nowait()
            except (queue.Empty, OSError, EOFError, ValueError):
                return
            if item[3] == _OK:
                discard(item[4])


@atexit.register
def _close_pools() -> None:
    for pool in list(_live_pools):
        pool.close()


def run_epoch(pool: WorkerPool, epoch: int, tasks, record, prefetch: int, in_order: bool):
    """Yield the batches of epoch ``epoch`` (from ``pool.begin_epoch()``): ``tasks`` is an
    iterator of (task id, epoch seed, indices), ids counting up from the epoch's first; map-style
    tasks go round-robin to the workers, iterable ones to the workers whose iterator is not
    exhausted."""
    n = pool.num_workers
    active = [True] * n
    cycle = itertools.cycle(range(n))
    ready: dict[int, tuple] = {}  # task id -> (kind, payload), received ahead of its turn
    owner: dict[int, int] = {}  # outstanding task id -> worker
    order: list[int] = []  # task ids sent, in order
    tasks = iter(tasks)
    source_done = False

    def dispatch() -> bool:
        nonlocal source_done
        if source_done or not any(active):
            return False
        try:
            task_id, seed, indices = next(tasks)
        except StopIteration:
            source_done = True
            return False
        wid = next(cycle)
        while not active[wid]:
            wid = next(cycle)
        pool.send(wid, ("task", task_id, epoch, seed, indices))
        owner[task_id] = wid
        order.append(task_id)
        return True

    try:
        for _ in range(prefetch * n):
            if not dispatch():
                break
        position = 0  # index into `order` of the next batch to hand out (in order)
        while True:
            if in_order:
                if position >= len(order):
                    break
                want = order[position]
                position += 1
                while want not in ready:
                    _receive_into(pool, epoch, ready, owner, active)
            else:
                while not ready and owner:
                    _receive_into(pool, epoch, ready, owner, active)
                if not ready:
                    break
                want = next(iter(ready))
            kind, payload = ready.pop(want)
            dispatch()
            if kind == _EXHAUSTED:
                continue
            if kind == _ERR:
                payload.reraise()
            batch = decode(payload)
            record.position = want + 1
            yield batch
        record.finished = True
    finally:
        for item in ready.values():
            if item[0] == _OK:
                discard(item[1])
        ready.clear()


def _receive_into(pool, epoch, ready, owner, active) -> None:
    if pool.epoch != epoch or pool.closed:
        raise WorkerError(
            "this iterator's epoch is over: a newer pass over the DataLoader took its persistent "
            "workers (iterate one pass at a time)",
            op="DataLoader",
        )
    task_id, result_epoch, wid, kind, payload = pool.receive()
    if result_epoch != epoch or kind == _ACK:
        if kind == _OK:
            discard(payload)
        return
    owner.pop(task_id, None)
    if kind == _EXHAUSTED:
        active[wid] = False
    ready[task_id] = (kind, payload)


def default_context():
    """``fork`` where the platform has it (torch's default on Linux), else the platform's."""
    import multiprocessing

    if sys.platform != "win32" and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()
