"""`DataLoader`: batches of a map-style dataset, shuffled reproducibly, optionally prefetched.

One pass over the loader is an *epoch*. At its start the loader draws, from its generator (ember's
default generator when none is given), in PyTorch's order and with PyTorch's draws:

1. one base seed for the data randomness of the epoch (a 64-bit draw modulo 2**63): random
   transforms draw from a per-batch generator derived from it (see `ember.data.rng`); with
   ``persistent_workers`` only the epoch that starts the workers draws it, as PyTorch resets
   the iterator it keeps for the later ones (their batch generators hash it with the epoch,
   and `state_dict()` keeps it as ``persistent_seed``);
2. the epoch's order: with ``shuffle``, PyTorch's RandomSampler's (a ``randperm`` of the dataset
   from the loader's generator, or without one from a fresh generator seeded by the default
   one, then the permutation it draws for the empty remainder), else ``0..n-1`` (or the indices
   a ``sampler`` yields). The same seed gives PyTorch's batches.

Nothing else touches the generator during the epoch, so its state before an epoch determines the
epoch completely. `state_dict()` records that state plus how many batches were consumed, and
`load_state_dict()` makes the next pass replay the epoch from that batch on: a run interrupted
and resumed from a checkpoint sees exactly the batches an uninterrupted run sees (saving the
generator state between epochs is enough too).

With ``num_workers=N > 0`` N worker processes build the batches (see ``_workers.py``: each has
its own dataset copy and seed, batches travel through shared memory and come out in order). The
data randomness stays per batch, so random transforms give the very batches of ``num_workers=0``
whatever the number of workers; what a worker draws from ember's default generator, NumPy's or
Python's global one follows the worker's own seed instead, as in PyTorch. Leaving the loop early
stops the workers (unless ``persistent_workers``: then they live as long as the loader) and
removes their shared memory; a Ctrl-C in the main process stops them too.

With ``prefetch=k > 0`` one background thread builds up to k batches ahead while the caller
computes (NumPy gathers release the GIL). Batches come out in the same order and with the same
contents as without prefetching. An exception in the dataset is re-raised in the caller's thread
with its original traceback; leaving the loop early (break, an exception, dropping the iterator)
stops the thread, and the thread is a daemon that never holds up interpreter exit.
"""

from __future__ import annotations

import atexit
import itertools
import math
import queue
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from .. import random_streams as streams
from ..errors import ArgumentTypeError, ShapeError, StateDictError
from ..random import Generator, resolve
from .dataset import fetch_samples
from .iterable import IterableDataset
from .rng import batch_scope
from .sampler import own_generator

_POLL_S = 0.05  # how often a blocked prefetch thread checks whether it should stop


class DataLoader:
    """Iterate over ``dataset`` in batches (PyTorch's DataLoader).

    Args:
        dataset: a map-style dataset (``__getitem__`` and ``__len__``) or an `IterableDataset`.
        batch_size: samples per batch; None disables automatic batching (PyTorch's mode for
            datasets that return whole batches): each sample is yielded on its own, converted by
            `default_convert` (NumPy arrays become tensors) or by ``collate_fn`` when given, and
            ``len()`` is the number of samples. Excludes ``batch_sampler`` and ``drop_last``.
        shuffle: visit the samples in a new random order every epoch.
        sampler: an iterable of indices giving the order instead (excludes ``shuffle``).
        batch_sampler: an iterable of lists of indices, one per batch (excludes ``batch_size``,
            ``shuffle``, ``sampler`` and ``drop_last``).
        num_workers: worker processes building batches (0: the calling process builds them).
            Each worker has its own copy of the dataset and its own seed (`get_worker_info`);
            batches come back through shared memory, in order (see ``in_order``).
        collate_fn: merges a list of samples into a batch (default: `default_collate`, or the
            dataset's ``fetch_batch`` which gathers whole batches at once); with
            ``batch_size=None`` it is called on each sample instead (default:
            `default_convert`). Runs in the worker.
        pin_memory: accepted for PyTorch compatibility; ember's tensors live in ordinary CPU
            memory, so it does nothing.
        drop_last: drop the last batch when it is smaller than ``batch_size`` (with workers and
            an `IterableDataset`: each worker's last partial batch, as in PyTorch).
        timeout: seconds to wait for a worker's batch before raising (0: forever).
        worker_init_fn: called with the worker id in each worker after seeding, before loading.
        multiprocessing_context: ``"fork"`` (the default on Linux), ``"spawn"`` or
            ``"forkserver"`` (the dataset, collate_fn and worker_init_fn must pickle), or a
            context from `multiprocessing.get_context`.
        generator: the `ember.Generator` for the order, data randomness and the workers' seeds;
            give a dedicated one for resumable runs (default: ember's default generator).
        prefetch_factor: batches each worker builds ahead (default 2; only with workers).
        persistent_workers: keep the workers (and their dataset copies) between epochs.
        pin_memory_device: accepted and ignored, like ``pin_memory``.
        in_order: hand batches out in order (False: as they are ready; resumption from
            `state_dict` is then not exact).
        prefetch: batches built ahead on one background *thread* of the calling process (0:
            build on demand); ember's own lighter alternative to workers, excludes them.
    """

    def __init__(
        self,
        dataset,
        batch_size: int | None = 1,
        shuffle: bool = False,
        sampler: Iterable[int] | None = None,
        batch_sampler: Iterable[list] | None = None,
        num_workers: int = 0,
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context=None,
        generator: Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
        prefetch: int = 0,
    ):
        if batch_size is None:
            if batch_sampler is not None:  # torch: batch_sampler needs batch_size left at 1
                raise ShapeError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, "
                    "sampler, and drop_last (batch_size=None disables automatic batching, which "
                    "a batch_sampler needs)",
                    op="DataLoader",
                )
            if drop_last:
                raise ShapeError(
                    "batch_size=None option disables auto-batching and is mutually exclusive "
                    "with drop_last",
                    op="DataLoader",
                )
        elif isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ShapeError(
                f"batch_size must be a positive int or None, got {batch_size!r}", op="DataLoader"
            )
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise ShapeError(
                f"prefetch must be a non-negative int, got {prefetch!r}", op="DataLoader"
            )
        if sampler is not None and shuffle:
            raise ShapeError(
                "sampler and shuffle=True exclude each other: the sampler decides the order",
                op="DataLoader",
            )
        if batch_sampler is not None and (
            batch_size != 1 or shuffle or sampler is not None or drop_last
        ):
            raise ShapeError(
                "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                "and drop_last",
                op="DataLoader",
            )
        iterable = isinstance(dataset, IterableDataset)
        if iterable and (shuffle or sampler is not None or batch_sampler is not None):
            raise ShapeError(
                "an IterableDataset decides its own order: shuffle, sampler and batch_sampler "
                "do not apply",
                op="DataLoader",
            )
        _check_workers(num_workers, prefetch_factor, persistent_workers, timeout, prefetch)
        if generator is not None:
            resolve(generator)  # validates the type now rather than at the first epoch
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.drop_last = bool(drop_last)
        self.collate_fn = collate_fn
        self.generator = generator
        self.prefetch = prefetch
        self.num_workers = num_workers
        self.pin_memory = bool(pin_memory)
        self.pin_memory_device = pin_memory_device
        self.timeout = float(timeout)
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.prefetch_factor = (
            (2 if num_workers else None) if prefetch_factor is None else (prefetch_factor)
        )
        self.persistent_workers = bool(persistent_workers)
        self.in_order = bool(in_order)
        self._iterable = iterable
        self._auto_collation = batch_size is not None  # False: each sample is its own "batch"
        self._pool = None  # the persistent workers, started by the first epoch
        self._kept_seed: int | None = None  # their first epoch's base seed
        self._pool_finalizer = None
        self._next_epoch = 0  # the epoch the next pass runs
        self._skip = 0  # batches the next pass skips (set by load_state_dict)
        self._current: _EpochRecord | None = None

    # ---------------------------------------------------------------------------- iteration
    def __len__(self) -> int:
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        n = self._num_samples()
        if not self._auto_collation:
            return n
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    @property
    def epoch(self) -> int:
        """The number of passes started (the index of the epoch the next pass runs)."""
        return self._next_epoch

    def __iter__(self) -> Iterator:
        gen = resolve(self.generator)
        start_state = gen.json_state()
        # PyTorch's draw order: the base seed (a 64-bit draw modulo 2**63) as the iterator is
        # made, then the sampler's order; persistent workers keep their iterator, which a later
        # epoch resets without a draw (`_persistent_seed`)
        base_seed = self._persistent_seed()
        drew = base_seed is None
        if drew:
            base_seed = int(gen.words64(1)[0]) % 2**63
            if self.num_workers and self.persistent_workers:
                self._kept_seed = base_seed
        else:  # (the batches' data generators still differ by epoch: data/rng.py)
            base_seed = _epoch_seed(base_seed, self._next_epoch)
        if self._iterable:
            batches = None
        elif self.batch_sampler is not None:
            batches = [np.asarray([int(i) for i in b], dtype=np.int64) for b in self.batch_sampler]
        elif not self._auto_collation:
            batches = self._epoch_order(gen)  # one index per step
        else:
            order = self._epoch_order(gen)
            size, bs = len(order), self.batch_size
            count = size // bs if self.drop_last else math.ceil(size / bs)
            batches = [order[i * bs : (i + 1) * bs] for i in range(count)]
        skip, self._skip = self._skip, 0
        if batches is not None:
            skip = min(skip, len(batches))
        record = _EpochRecord(self._next_epoch, start_state, skip)
        record.drew_seed = drew
        self._current = record
        self._next_epoch += 1
        if self.num_workers:
            return self._from_workers(base_seed, batches, skip, record)
        if self._iterable:
            return _skipping(_iterate(self._iterable_fetcher(base_seed), record), skip)
        fetch = self._fetcher(base_seed, batches)
        count = len(batches)
        if self.prefetch:
            return _prefetched(fetch, range(skip, count), self.prefetch, record)
        return _synchronous(fetch, range(skip, count), record)

    def _persistent_seed(self) -> int | None:
        """The base seed of the persistent workers' first epoch where a later epoch reuses
        them (PyTorch resets the iterator it keeps, drawing no new base seed), else None."""
        if not (self.num_workers and self.persistent_workers):
            return None
        pool = self._pool
        if pool is not None and pool.torn:
            return None  # (an interrupted epoch: PyTorch's loader makes a new iterator too)
        return self._kept_seed

    def _epoch_order(self, gen: Generator) -> np.ndarray:
        if self.sampler is not None:
            return np.fromiter((int(i) for i in self.sampler), dtype=np.int64)
        n = len(self.dataset)
        if self.shuffle:  # PyTorch's RandomSampler(dataset, generator=self.generator)
            gen = own_generator(self.generator)
            order = streams.permutation(gen, n)
            streams.permutation(gen, n)  # (its empty remainder's permutation, drawn as PyTorch)
            return order
        return np.arange(n, dtype=np.int64)

    def _fetcher(self, base_seed: int, batches: list) -> Callable[[int], object]:
        dataset, collate = self.dataset, self.collate_fn
        if not self._auto_collation:
            convert = collate or _default_convert()

            def fetch_one(b: int):
                with batch_scope(base_seed, b):
                    return convert(dataset[int(batches[b])])

            return fetch_one
        gather = getattr(dataset, "fetch_batch", None) if collate is None else None
        if collate is None and gather is None:
            from .collate import default_collate

            collate = default_collate

        def fetch(b: int):
            with batch_scope(base_seed, b):
                if gather is not None:
                    return gather(batches[b])
                return collate(fetch_samples(dataset, batches[b]))

        return fetch

    def _iterable_fetcher(self, base_seed: int) -> Callable[[int], object]:
        """Batch b of an IterableDataset's pass (None after its last)."""
        from .collate import default_collate

        auto = self._auto_collation
        collate = self.collate_fn or (default_collate if auto else _default_convert())
        bs, drop_last = self.batch_size, self.drop_last
        iterator = None

        def fetch(b: int):
            nonlocal iterator
            with batch_scope(base_seed, b):
                if iterator is None:
                    iterator = iter(self.dataset)
                if not auto:
                    item = next(iterator, _END)
                    return item if item is _END else collate(item)
                items = list(itertools.islice(iterator, bs))
                if not items or (drop_last and len(items) < bs):
                    return _END
                return collate(items)

        return fetch

    def _from_workers(self, base_seed: int, batches, skip: int, record) -> Iterator:
        from . import _workers

        if self.persistent_workers and self._pool is not None and self._pool.torn:
            self._pool.close()  # an epoch interrupted mid-read (Ctrl-C caught): start anew
            self._pool = None
        if self.persistent_workers and self._pool is not None:
            pool = self._pool
        else:
            pool = self._start_pool(self._kept_seed if self.persistent_workers else base_seed)
        if self._iterable:
            tasks = ((b, base_seed, None) for b in itertools.count())
        else:
            tasks = ((b, base_seed, batches[b]) for b in range(skip, len(batches)))
        number = pool.begin_epoch()  # now, as torch does: a later pass supersedes this one
        epoch = _workers.run_epoch(pool, number, tasks, record, self.prefetch_factor, self.in_order)
        if self._iterable:
            epoch = _skipping(epoch, skip)
        if self.persistent_workers:  # (the loader held: its finalizer stops the workers)
            return _holding(epoch, self)
        closing = _closing(epoch, pool)
        weakref.finalize(closing, pool.close)  # also when dropped before its first batch
        return closing

    def _start_pool(self, base_seed: int):
        import multiprocessing

        from . import _workers

        context = self.multiprocessing_context
        if context is None:
            context = _workers.default_context()
        elif isinstance(context, str):
            context = multiprocessing.get_context(context)
        collate = self.collate_fn
        if collate is None and not self._auto_collation:
            collate = _default_convert()
        elif collate is None and not self._iterable and not hasattr(self.dataset, "fetch_batch"):
            from .collate import default_collate

            collate = default_collate
        spec = _workers.WorkerSpec(
            dataset=self.dataset,
            iterable=self._iterable,
            collate_fn=collate,
            batch_size=self.batch_size,
            drop_last=self.drop_last,
            worker_init_fn=self.worker_init_fn,
            num_workers=self.num_workers,
            auto_collation=self._auto_collation,
        )
        # PyTorch's worker seeds, base_seed + worker id (what get_worker_info().seed and
        # torch.initial_seed() in worker_init_fn read); the batches' data generators are
        # seeded through a hash (data/rng.py), so none shares a worker's stream
        pool = _workers.WorkerPool(spec, context, base_seed, self.timeout)
        if self.persistent_workers:
            self._pool = pool
            self._pool_finalizer = weakref.finalize(self, _workers.WorkerPool.close, pool)
        return pool

    @property
    def worker_pids(self) -> list[int]:
        """The process ids of the persistent workers (empty before the first epoch)."""
        return [] if self._pool is None else self._pool.pids

    # -------------------------------------------------------------------------- resumption
    def state_dict(self) -> dict:
        """Where the loader stands: JSON-able, for checkpoints (`ember.save`).

        Mid-epoch it holds the generator state from before the epoch and the number of batches
        consumed; between epochs, the generator's current state and batch 0.
        """
        record = self._current
        if record is not None and not record.finished:
            epoch, batch, state = record.epoch, record.position, record.start_state
        else:
            epoch, batch, state = self._next_epoch, 0, resolve(self.generator).json_state()
        out = {
            "epoch": epoch,
            "batch": batch,
            "generator": state,
            "num_samples": self._num_samples(),
            "batch_size": self.batch_size,
        }
        if self._persistent_seed() is not None:  # (the epochs after the first draw none)
            out["persistent_seed"] = self._kept_seed
            if record is not None and not record.finished and record.drew_seed:
                del out["persistent_seed"]  # (resumed, that epoch draws it again)
        return out

    def load_state_dict(self, state: dict) -> None:
        """Make the next pass continue exactly where the saved loader stood (this sets the
        generator's state, so the default generator's if the loader has none of its own)."""
        missing = {"epoch", "batch", "generator"} - set(state)
        if missing:
            raise StateDictError(f"missing keys {sorted(missing)}", op="DataLoader.load_state_dict")
        for key, mine in (("num_samples", self._num_samples()), ("batch_size", self.batch_size)):
            if key in state and state[key] != mine:
                raise StateDictError(
                    f"the state was saved with {key}={state[key]} but this loader has "
                    f"{key}={mine}; resume with the same dataset and batch size",
                    op="DataLoader.load_state_dict",
                )
        resolve(self.generator).set_state(state["generator"])
        seed = state.get("persistent_seed")
        if seed is not None and not (isinstance(seed, int) and 0 <= seed < 2**63):
            raise StateDictError(
                f"persistent_seed must be an int in [0, 2**63), got {seed!r}",
                op="DataLoader.load_state_dict",
            )
        self._kept_seed = seed if self.num_workers and self.persistent_workers else None
        self._next_epoch = int(state["epoch"])
        self._skip = int(state["batch"])
        self._current = None

    def _num_samples(self) -> int:
        if self.sampler is not None:
            return len(self.sampler)
        if self._iterable:
            try:
                return len(self.dataset)
            except (TypeError, NotImplementedError):
                raise ArgumentTypeError(
                    f"{type(self.dataset).__name__} is an IterableDataset without __len__"
                ) from None
        return len(self.dataset)

    def __repr__(self) -> str:
        return (
            f"DataLoader({type(self.dataset).__name__} of {self._num_samples()}, "
            f"batch_size={self.batch_size}, shuffle={self.shuffle}, drop_last={self.drop_last}, "
            f"num_workers={self.num_workers}, prefetch={self.prefetch})"
        )


class _EpochRecord:
    """One pass: its epoch index, the generator state before it, and batches handed out."""

    __slots__ = ("epoch", "start_state", "position", "finished", "drew_seed")

    def __init__(self, epoch: int, start_state: dict, position: int):
        self.epoch = epoch
        self.start_state = start_state
        self.position = position
        self.finished = False
        self.drew_seed = True  # (False: an epoch of persistent workers, which draws none)


def _epoch_seed(base_seed: int, epoch: int) -> int:
    """The seed of a later epoch's batch generators (data/rng.py) on persistent workers: the
    first epoch's base seed hashed with the epoch, drawing nothing from the loader's
    generator, as PyTorch's reset iterator draws nothing."""
    words = np.random.SeedSequence([base_seed, 3, epoch]).generate_state(1, np.uint64)
    return int(words[0]) % 2**63


_END = object()  # what an iterable dataset's fetch returns after its last batch


def _default_convert():
    from .collate import default_convert

    return default_convert


def _check_workers(num_workers, prefetch_factor, persistent_workers, timeout, prefetch) -> None:
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise ShapeError(
            f"num_workers must be a non-negative int, got {num_workers!r}", op="DataLoader"
        )
    if timeout < 0:
        raise ShapeError(f"timeout must be non-negative, got {timeout!r}", op="DataLoader")
    if num_workers == 0:
        if prefetch_factor is not None:
            raise ShapeError(
                "prefetch_factor option could only be specified in multiprocessing; let "
                "num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None",
                op="DataLoader",
            )
        if persistent_workers:
            raise ShapeError("persistent_workers option needs num_workers > 0", op="DataLoader")
        return
    if prefetch_factor is not None and (
        isinstance(prefetch_factor, bool)
        or not isinstance(prefetch_factor, int)
        or prefetch_factor < 1
    ):
        raise ShapeError(
            f"prefetch_factor must be a positive int, got {prefetch_factor!r}", op="DataLoader"
        )
    if prefetch:
        raise ShapeError(
            "prefetch (one background thread) and num_workers (processes) exclude each other; "
            "with workers, prefetch_factor says how far each works ahead",
            op="DataLoader",
        )


def _iterate(fetch, record: _EpochRecord) -> Iterator:
    for b in itertools.count():
        batch = fetch(b)
        if batch is _END:
            break
        record.position = b + 1
        yield batch
    record.finished = True


def _skipping(batches: Iterator, skip: int) -> Iterator:
    """``batches`` after the first ``skip`` (an iterable dataset resumes by re-reading them)."""
    try:
        for i, batch in enumerate(batches):
            if i >= skip:
                yield batch
    finally:
        batches.close()


def _closing(batches: Iterator, pool) -> Iterator:
    """``batches``, then (or when abandoned) the pool's workers stop."""
    try:
        yield from batches
    finally:
        batches.close()
        pool.close()


def _holding(batches: Iterator, loader) -> Iterator:
    """``batches``, holding ``loader`` while they last: ``for b in DataLoader(...,
    persistent_workers=True)`` keeps no other reference to it, and its finalizer would stop
    the persistent workers under the running epoch."""
    try:
        yield from batches
    finally:
        batches.close()
        del loader


def _synchronous(fetch, numbers: range, record: _EpochRecord) -> Iterator:
    for b in numbers:
        batch = fetch(b)
        record.position = b + 1
        yield batch
    record.finished = True


# -------------------------------------------------------------------------------- prefetching
_DONE, _BATCH, _ERROR = 0, 1, 2
_live_workers: weakref.WeakSet = weakref.WeakSet()


class _Worker(threading.Thread):
    """Builds batches in order and hands them over through a bounded queue."""

    def __init__(self, fetch, numbers: range, depth: int):
        super().__init__(name="ember-data-prefetch", daemon=True)
        self.fetch, self.numbers = fetch, numbers
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.stop = threading.Event()

    def run(self) -> None:
        b = None
        try:
            for b in self.numbers:
                if self.stop.is_set():
                    return
                self._put((_BATCH, b, self.fetch(b)))
            self._put((_DONE, None, None))
        except BaseException as exc:  # handed to the consumer, which re-raises it
            exc.add_note(f"(raised in ember's DataLoader prefetch thread while building batch {b})")
            self._put((_ERROR, None, exc))
        finally:
            self.fetch = None  # drop the dataset and batches promptly

    def _put(self, item) -> None:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=_POLL_S)
                return
            except queue.Full:
                continue

    def shutdown(self) -> None:
        self.stop.set()
        try:  # free batches already built; the thread sees the stop flag within _POLL_S
            while True:
                self.queue.get_nowait()
        except queue.Empty:
            pass
        if self is not threading.current_thread():
            self.join(timeout=1.0)


def _prefetched(fetch, numbers: range, depth: int, record: _EpochRecord) -> Iterator:
    worker = _Worker(fetch, numbers, depth)
    _live_workers.add(worker)
    worker.start()
    try:
        while True:
            try:
                kind, b, payload = worker.queue.get(timeout=_POLL_S)
            except queue.Empty:
                if not worker.is_alive() and worker.queue.empty():
                    raise RuntimeError("ember's DataLoader prefetch thread died") from None
                continue
            if kind == _DONE:
                break
            if kind == _ERROR:
                raise payload
            record.position = b + 1
            yield payload
        record.finished = True
    finally:
        worker.shutdown()
        _live_workers.discard(worker)


@atexit.register
def _stop_workers() -> None:
    for worker in list(_live_workers):
        worker.stop.set()
