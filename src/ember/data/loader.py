"""`DataLoader`: batches of a map-style dataset, shuffled reproducibly, optionally prefetched.

One pass over the loader is an *epoch*. At its start the loader draws, from its generator (ember's
default generator when none is given):

1. the epoch's order: a permutation of the dataset when ``shuffle``, else ``0..n-1`` (or the
   indices a ``sampler`` yields);
2. one base seed for the data randomness of the epoch: random transforms draw from a per-batch
   generator derived from it (see `ember.data.rng`).

Nothing else touches the generator during the epoch, so its state before an epoch determines the
epoch completely. `state_dict()` records that state plus how many batches were consumed, and
`load_state_dict()` makes the next pass replay the epoch from that batch on: a run interrupted
and resumed from a checkpoint sees exactly the batches an uninterrupted run sees (saving the
generator state between epochs is enough too).

With ``prefetch=k > 0`` one background thread builds up to k batches ahead while the caller
computes (NumPy gathers release the GIL). Batches come out in the same order and with the same
contents as without prefetching. An exception in the dataset is re-raised in the caller's thread
with its original traceback; leaving the loop early (break, an exception, dropping the iterator)
stops the thread, and the thread is a daemon that never holds up interpreter exit.
"""

from __future__ import annotations

import atexit
import math
import queue
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from ..errors import ShapeError, StateDictError
from ..random import Generator, resolve
from .rng import batch_scope

_POLL_S = 0.05  # how often a blocked prefetch thread checks whether it should stop


class DataLoader:
    """Iterate over ``dataset`` in batches (PyTorch's DataLoader, single process).

    Args:
        dataset: a map-style dataset (``__getitem__`` and ``__len__``).
        batch_size: samples per batch.
        shuffle: visit the samples in a new random order every epoch.
        sampler: an iterable of indices giving the order instead (excludes ``shuffle``).
        drop_last: drop the last batch when it is smaller than ``batch_size``.
        collate_fn: merges a list of samples into a batch (default: `default_collate`, or the
            dataset's ``fetch_batch`` which gathers whole batches at once).
        generator: the `ember.Generator` for the order and for data randomness; give a
            dedicated one for resumable runs (default: ember's default generator).
        prefetch: batches built ahead on one background thread (0: build on demand).
    """

    def __init__(
        self,
        dataset,
        batch_size: int = 1,
        shuffle: bool = False,
        sampler: Iterable[int] | None = None,
        drop_last: bool = False,
        collate_fn: Callable | None = None,
        generator: Generator | None = None,
        prefetch: int = 0,
    ):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ShapeError(
                f"batch_size must be a positive int, got {batch_size!r}", op="DataLoader"
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
        if generator is not None:
            resolve(generator)  # validates the type now rather than at the first epoch
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.sampler = sampler
        self.drop_last = bool(drop_last)
        self.collate_fn = collate_fn
        self.generator = generator
        self.prefetch = prefetch
        self._next_epoch = 0  # the epoch the next pass runs
        self._skip = 0  # batches the next pass skips (set by load_state_dict)
        self._current: _EpochRecord | None = None

    # ---------------------------------------------------------------------------- iteration
    def __len__(self) -> int:
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    @property
    def epoch(self) -> int:
        """The number of passes started (the index of the epoch the next pass runs)."""
        return self._next_epoch

    def __iter__(self) -> Iterator:
        gen = resolve(self.generator)
        start_state = gen.get_state()
        order = self._epoch_order(gen)
        base_seed = int(gen.numpy.integers(0, 2**63))
        size, bs = len(order), self.batch_size
        count = size // bs if self.drop_last else math.ceil(size / bs)
        batches = [order[i * bs : (i + 1) * bs] for i in range(count)]
        skip, self._skip = min(self._skip, count), 0
        record = _EpochRecord(self._next_epoch, start_state, skip)
        self._current = record
        self._next_epoch += 1
        fetch = self._fetcher(base_seed, batches)
        if self.prefetch:
            return _prefetched(fetch, range(skip, count), self.prefetch, record)
        return _synchronous(fetch, range(skip, count), record)

    def _epoch_order(self, gen: Generator) -> np.ndarray:
        if self.sampler is not None:
            return np.fromiter((int(i) for i in self.sampler), dtype=np.int64)
        n = len(self.dataset)
        if self.shuffle:
            return gen.numpy.permutation(n).astype(np.int64, copy=False)
        return np.arange(n, dtype=np.int64)

    def _fetcher(self, base_seed: int, batches: list) -> Callable[[int], object]:
        dataset, collate = self.dataset, self.collate_fn
        gather = getattr(dataset, "fetch_batch", None) if collate is None else None
        if collate is None and gather is None:
            from .collate import default_collate

            collate = default_collate

        def fetch(b: int):
            with batch_scope(base_seed, b):
                if gather is not None:
                    return gather(batches[b])
                return collate([dataset[int(i)] for i in batches[b]])

        return fetch

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
            epoch, batch, state = self._next_epoch, 0, resolve(self.generator).get_state()
        return {
            "epoch": epoch,
            "batch": batch,
            "generator": state,
            "num_samples": self._num_samples(),
            "batch_size": self.batch_size,
        }

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
        self._next_epoch = int(state["epoch"])
        self._skip = int(state["batch"])
        self._current = None

    def _num_samples(self) -> int:
        return len(self.sampler) if self.sampler is not None else len(self.dataset)

    def __repr__(self) -> str:
        return (
            f"DataLoader({type(self.dataset).__name__} of {self._num_samples()}, "
            f"batch_size={self.batch_size}, shuffle={self.shuffle}, drop_last={self.drop_last}, "
            f"prefetch={self.prefetch})"
        )


class _EpochRecord:
    """One pass: its epoch index, the generator state before it, and batches handed out."""

    __slots__ = ("epoch", "start_state", "position", "finished")

    def __init__(self, epoch: int, start_state: dict, position: int):
        self.epoch = epoch
        self.start_state = start_state
        self.position = position
        self.finished = False


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
