"""DataLoader worker processes: same batches as in-process loading, seeds, worker info, errors
with the worker's traceback, persistent workers, cleanup (processes and /dev/shm) and Ctrl-C."""

import mmap
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import ember
from ember.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    TensorDataset,
    WorkerError,
    get_worker_info,
    transforms,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="uses fork and /proc")


def _children():
    """Process ids whose parent is this process (read from /proc: no cached bookkeeping)."""
    me, found = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z" and not _is_resource_tracker(entry):
            found.add(int(entry))
    return found


def _is_resource_tracker(pid):
    """multiprocessing's own helper (started once by spawn contexts), not a worker."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"resource_tracker" in f.read()
    except OSError:
        return False


def _segments(pid=None):
    prefix = f"ember-dl-{os.getpid() if pid is None else pid}-"
    return [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


@pytest.fixture(autouse=True)
def _no_leaks():
    before = _children()
    yield
    assert _wait_until(lambda: _children() <= before), "worker processes were left behind"
    assert not _segments(), "shared-memory segments were left behind"


class Images(Dataset):
    """Sample i: a random crop + flip of a 32x32 image (large enough for shared memory)."""

    def __init__(self, n=22):
        self.images = np.arange(n * 32 * 32, dtype=np.float32).reshape(n, 1, 32, 32)
        self.t = transforms.Compose(
            [transforms.RandomCrop(30, padding=2), transforms.RandomHorizontalFlip()]
        )

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return {"image": self.t(ember.tensor(self.images[i])), "label": i}


class Probe(Dataset):
    """Sample i reports who built it: worker id, pid, seeds and the worker's random draws."""

    def __init__(self, n=8, fail_at=None, exc=ValueError):
        self.n, self.fail_at, self.exc = n, fail_at, exc
        self.offset = 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise self.exc(f"sample {i} is unreadable")
        info = get_worker_info()
        return np.array(
            [
                i,
                -1 if info is None else info.id,
                os.getpid(),
                -1 if info is None else info.seed % 2**40,
                np.random.randint(0, 2**30),
                random.randrange(2**30),
                int(ember.randint(0, 2**30, (1,)).item()),
                self.offset,
            ],
            dtype=np.int64,
        )


def _collect(loader, epochs=1):
    out = []
    for _ in range(epochs):
        for batch in loader:
            leaves = batch.values() if isinstance(batch, dict) else batch
            out.append([np.array(t.numpy()) for t in leaves])
    return out


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for tx, ty in zip(x, y, strict=True):
            np.testing.assert_array_equal(tx, ty)


# ------------------------------------------------------------------------------ same batches
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_workers_give_the_batches_of_in_process_loading(workers):
    def run(num_workers, dataset):
        loader = DataLoader(
            dataset,
            batch_size=4,
            shuffle=True,
            generator=ember.Generator(8),
            num_workers=num_workers,
        )
        return _collect(loader, 2)

    _assert_same(run(0, Images()), run(workers, Images()))
    ds = TensorDataset(ember.arange(4000.0).reshape(1000, 4), ember.arange(1000))
    _assert_same(run(0, ds), run(workers, ds))


def test_large_batches_arrive_through_shared_memory_without_a_copy():
    ds = TensorDataset(ember.ones(64, 1024))
    (batch,) = next(iter(DataLoader(ds, batch_size=32, num_workers=1)))
    base = batch.numpy()
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    assert isinstance(base, mmap.mmap)  # the worker's segment, mapped: no pickled copy
    assert batch.numpy().flags.writeable and batch.shape == (32, 1024)
    batch.numpy()[0, 0] = 5.0  # the mapping is private to this process now
    assert not _segments()  # unlinked as soon as it was mapped


def test_batch_sampler_drop_last_and_in_order_false():
    ds = TensorDataset(ember.arange(10))
    sampler = [[9, 0], [3], [5, 6, 7]]
    for workers in (0, 2):
        got = [
            b[0].numpy().tolist()
            for b in DataLoader(ds, batch_sampler=sampler, num_workers=workers)
        ]
        assert got == sampler
    batch_sampler = BatchSampler(RandomSampler(ds, generator=ember.Generator(4)), 3, False)
    a = [b[0].numpy().tolist() for b in DataLoader(ds, batch_sampler=batch_sampler)]
    b = [b[0].numpy().tolist() for b in DataLoader(ds, batch_sampler=batch_sampler, num_workers=2)]
    assert sorted(sum(a, [])) == list(range(10)) and [len(x) for x in b] == [3, 3, 3, 1]
    loader = DataLoader(ds, batch_size=3, drop_last=True, num_workers=2)
    assert [b[0].numpy().tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    loader = DataLoader(ds, batch_size=3, num_workers=2, in_order=False)
    got = sorted(b[0].numpy().tolist() for b in loader)
    assert got == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]


def test_resuming_mid_epoch_with_workers():
    def make(seed):
        return DataLoader(
            Images(12), batch_size=3, shuffle=True, generator=ember.Generator(seed), num_workers=2
        )

    uninterrupted = _collect(make(7), 2)
    first = make(7)
    seen = []
    for i, batch in enumerate(first):
        seen.append([np.array(t.numpy()) for t in batch.values()])
        if i == 1:
            break
    state = first.state_dict()
    resumed = make(1)
    resumed.load_state_dict(state)
    seen += _collect(resumed, 1) + _collect(resumed, 1)
    _assert_same(uninterrupted, seen)


# ------------------------------------------------------------------------------------- seeds
def test_worker_seeds_differ_per_worker_and_repeat_with_a_seeded_generator():
    def run(seed):
        loader = DataLoader(Probe(8), batch_size=2, num_workers=2, generator=ember.Generator(seed))
        return np.concatenate([b.numpy() for b in loader])

    a, b, c = run(1), run(1), run(2)
    keep = [0, 1, 3, 4, 5, 6]  # all but the pid
    np.testing.assert_array_equal(a[:, keep], b[:, keep])  # reproducible: seeds and draws
    by_worker = {w: a[a[:, 1] == w] for w in (0, 1)}
    assert by_worker[0][0, 3] + 1 == by_worker[1][0, 3]  # seed = base seed + worker id
    for col in (4, 5, 6):  # NumPy's, Python's and ember's global generators differ per worker
        assert by_worker[0][0, col] != by_worker[1][0, col]
    assert not np.array_equal(a[:, 3:7], c[:, 3:7])  # another generator, other seeds


def test_get_worker_info_and_worker_init_fn():
    assert get_worker_info() is None

    class Info(Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            info = get_worker_info()
            assert isinstance(info.dataset, Info) and info.dataset is self
            return np.array([info.id, info.num_workers, self.offset])

    def init(worker_id):
        get_worker_info().dataset.offset = 100 + worker_id

    rows = np.concatenate(
        [b.numpy() for b in DataLoader(Info(), batch_size=2, num_workers=3, worker_init_fn=init)]
    )
    assert rows[:, 0].tolist() == [0, 0, 1, 1, 2, 2]  # batches go round-robin
    assert rows[:, 1].tolist() == [3] * 6
    assert rows[:, 2].tolist() == [100, 100, 101, 101, 102, 102]


# ------------------------------------------------------------------------------------ errors
def test_a_workers_exception_is_raised_with_its_traceback():
    got = []
    loader = DataLoader(Probe(10, fail_at=5), batch_size=2, num_workers=2)
    with pytest.raises(ValueError) as info:
        for batch in loader:
            got.append(batch[:, 0].numpy().tolist())
    assert got == [[0, 1], [2, 3]]  # the batches before the failing one arrive, in order
    text = str(info.value)
    assert text.startswith("Caught ValueError in DataLoader worker process 0.")
    assert "Original Traceback (most recent call last):" in text
    assert "in __getitem__" in text and "sample 5 is unreadable" in text


def test_exceptions_that_cannot_be_rebuilt_raise_worker_error():
    class Local(Exception):  # not importable in the main process by name: cannot be pickled
        pass

    loader = DataLoader(Probe(4, fail_at=1, exc=Local), batch_size=2, num_workers=1)
    with pytest.raises(WorkerError, match="Caught Local in DataLoader worker process 0"):
        list(loader)
    loader = DataLoader(Probe(4, fail_at=0, exc=ember.ShapeError), batch_size=2, num_workers=1)
    with pytest.raises(ember.ShapeError, match="Caught ShapeError"):
        list(loader)


def test_a_batch_that_cannot_be_sent_is_an_error_not_a_hang():
    loader = DataLoader(Probe(4), batch_size=2, num_workers=1, collate_fn=lambda b: lambda: b)
    with pytest.raises(AttributeError, match="(?s)Caught AttributeError in DataLoader.*pickle"):
        list(loader)


def test_a_dead_worker_and_a_timeout_raise_instead_of_hanging():
    class Dies(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            os._exit(3)

    with pytest.raises(WorkerError, match="exited unexpectedly"):
        list(DataLoader(Dies(), num_workers=1))

    class Slow(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            time.sleep(5)
            return i

    start = time.monotonic()
    with pytest.raises(WorkerError, match="timed out after 0.3 seconds"):
        list(DataLoader(Slow(), num_workers=1, timeout=0.3))
    assert time.monotonic() - start < 4.5


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"prefetch_factor": 2}, "prefetch_factor"),
        ({"persistent_workers": True}, "persistent_workers"),
        ({"num_workers": -1}, "num_workers"),
        ({"num_workers": 1, "prefetch": 2}, "exclude"),
        ({"num_workers": 1, "timeout": -1}, "timeout"),
        ({"batch_sampler": [[0]], "batch_size": 2}, "mutually exclusive"),
    ],
)
def test_bad_worker_arguments_are_refused(kwargs, match):
    with pytest.raises(ember.EmberError, match=match):
        DataLoader(Probe(), **kwargs)


# ----------------------------------------------------------------------- lifetime and cleanup
def test_persistent_workers_serve_every_epoch():
    loader = DataLoader(Probe(8), batch_size=2, num_workers=2, persistent_workers=True)
    first = np.concatenate([b.numpy() for b in loader])
    pids = loader.worker_pids
    assert set(first[:, 2]) == set(pids) and len(pids) == 2
    for i, _ in enumerate(loader):  # abandon an epoch: the next one starts cleanly
        if i == 0:
            break
    second = np.concatenate([b.numpy() for b in loader])
    assert loader.worker_pids == pids and set(second[:, 2]) == set(pids)
    assert second[:, 0].tolist() == list(range(8))
    assert not _segments()
    old, new = iter(loader), iter(loader)  # a second pass supersedes the first
    assert next(new)[:, 0].numpy().tolist() == [0, 1]
    with pytest.raises(WorkerError, match="epoch is over"):
        list(old)
    del old, new
    del loader  # the workers go with the loader
    assert _wait_until(lambda: not any(_alive(p) for p in pids))


def test_a_receive_interrupted_mid_read_stops_the_workers_without_reading_the_pipe_again():
    """Ctrl-C inside the result pipe's read leaves it mid-message; reading it again (to drain
    it while the workers finish) could wait forever on a length taken from the middle of a
    batch: the pool is stopped without draining, promptly, and a persistent loader starts
    new workers for its next epoch."""
    loader = DataLoader(Probe(8), batch_size=2, num_workers=2, persistent_workers=True)
    batches = iter(loader)
    next(batches)
    pool = loader._pool
    pids = loader.worker_pids

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    pool.result_queue.get = interrupted
    pool._drain = lambda: pytest.fail("the torn pipe was read again")
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        for _ in batches:
            pass
    assert pool.torn
    epoch = np.concatenate([b.numpy() for b in loader])  # a new pool serves the next epoch
    assert time.monotonic() - start < 10
    assert epoch[:, 0].tolist() == list(range(8))
    assert loader.worker_pids != pids and set(epoch[:, 2]) == set(loader.worker_pids)
    assert _wait_until(lambda: not any(_alive(p) for p in pids))
    del batches, loader


def test_persistent_workers_of_a_loader_only_its_iteration_holds():
    # ``for b in DataLoader(...)``: the loader's finalizer stopped its persistent workers under
    # the running epoch ("Queue is closed") until the epoch held the loader
    batches = [
        b[:, 0].tolist()
        for b in DataLoader(Probe(6), batch_size=2, num_workers=2, persistent_workers=True)
    ]
    assert batches == [[0, 1], [2, 3], [4, 5]]


def test_breaking_out_mid_epoch_leaves_no_process_and_no_segment():
    before = _children()
    ds = TensorDataset(ember.ones(400, 2048))  # 256 KiB batches through /dev/shm
    loader = DataLoader(ds, batch_size=32, num_workers=3, prefetch_factor=4)
    for i, _ in enumerate(loader):
        if i == 0:
            assert len(_children() - before) == 3
            time.sleep(0.2)  # let the workers fill the pipeline with segments
            break
    assert _children() <= before
    assert not _segments()
    it = iter(loader)  # an iterator dropped without being finished
    next(it)
    del it
    assert _children() <= before and not _segments()
    it = iter(loader)  # the workers start at iter(), as in torch; dropped before any batch
    assert len(_children() - before) == 3
    del it
    assert _children() <= before


def test_spawn_context_with_a_picklable_dataset():
    ds = TensorDataset(ember.arange(12))
    loader = DataLoader(ds, batch_size=5, num_workers=2, multiprocessing_context="spawn")
    assert [b[0].numpy().tolist() for b in loader] == [
        list(range(5)),
        list(range(5, 10)),
        [10, 11],
    ]


def test_spawn_with_an_unpicklable_collate_fn_says_why():
    loader = DataLoader(
        TensorDataset(ember.arange(4)),
        num_workers=1,
        collate_fn=lambda batch: batch,
        multiprocessing_context="spawn",
    )
    with pytest.raises(WorkerError, match="'spawn' start method: the dataset, collate_fn"):
        list(loader)


_LOOP = """
import os, signal, sys, time
import numpy as np
from ember.data import DataLoader, Dataset

# Ctrl-C reaches a foreground process; one started from a shell's background job inherits
# SIGINT ignored (POSIX), which Python then leaves so: handle it as a foreground one does
signal.signal(signal.SIGINT, signal.default_int_handler)

class Slow(Dataset):
    def __len__(self):
        return 10_000
    def __getitem__(self, i):
        time.sleep(0.01)
        return np.array([os.getpid()])

for batch in DataLoader(Slow(), batch_size=1, num_workers=2):
    print(int(batch[0, 0]), flush=True)
"""


def _start_loop():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(_LOOP)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    pids = set()
    while len(pids) < 2:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        pids.add(int(line))
    return proc, pids


def _sigint_disposition(pid) -> str:
    """How process ``pid`` treats SIGINT (Linux's /proc; '' elsewhere)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return ""
    bit = 1 << (signal.SIGINT - 1)
    return " ".join(
        f"{name}={bool(int(fields[name].strip(), 16) & bit)}"
        for name in ("SigBlk", "SigIgn", "SigCgt")
        if name in fields
    )


def test_ctrl_c_in_the_main_process_stops_promptly_and_leaves_no_orphans():
    proc, pids = _start_loop()
    disposition = _sigint_disposition(proc.pid)
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:  # where it hangs: faulthandler's dump of every thread
        now = _sigint_disposition(proc.pid)
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate()
        pytest.fail(
            f"the loop did not stop on SIGINT (its SIGINT before: {disposition}; now: {now}); "
            f"its threads:\n{err[-6000:]}"
        )
    assert time.monotonic() - start < 10
    assert proc.returncode != 0
    assert _wait_until(lambda: not any(_alive(p) for p in pids))
    assert not _segments(proc.pid)


def test_workers_exit_when_the_main_process_is_killed():
    proc, pids = _start_loop()
    proc.kill()
    proc.communicate(timeout=20)
    assert _wait_until(lambda: not any(_alive(p) for p in pids), timeout=10)
    assert _wait_until(lambda: not _segments(proc.pid))


# --------------------------------------------------------------------------- iterable datasets
class Stream(IterableDataset):
    def __init__(self, n, shard):
        self.n, self.shard = n, shard

    def __iter__(self):
        info = get_worker_info()
        if not self.shard or info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


def test_iterable_dataset_in_process():
    loader = DataLoader(Stream(7, False), batch_size=3)
    assert [b.numpy().tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6]]
    loader = DataLoader(Stream(7, False), batch_size=3, drop_last=True)
    assert [b.numpy().tolist() for b in loader] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ember.EmberError, match="IterableDataset"):
        DataLoader(Stream(3, False), shuffle=True)


def test_iterable_dataset_with_workers_shards_by_worker_info():
    loader = DataLoader(Stream(10, True), batch_size=2, num_workers=2)
    batches = [b.numpy().tolist() for b in loader]
    # worker 0 streams 0,2,4,..., worker 1 streams 1,3,5,...; batches alternate between them
    assert batches == [[0, 2], [1, 3], [4, 6], [5, 7], [8], [9]]
    loader = DataLoader(Stream(5, False), batch_size=5, num_workers=3, persistent_workers=True)
    for _ in range(2):  # unsharded: every worker streams everything, every epoch
        assert [b.numpy().tolist() for b in loader] == [list(range(5))] * 3
