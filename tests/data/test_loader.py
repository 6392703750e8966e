"""DataLoader: batching, shuffling from a seed, exact resumption, and the prefetch thread."""

import subprocess
import sys
import textwrap
import threading
import time
import traceback

import numpy as np
import pytest

import ember
from ember.data import DataLoader, Dataset, TensorDataset, transforms


def _values(batches, i=0):
    return [b[i].numpy().tolist() for b in batches]


def _prefetch_threads():
    return [t for t in threading.enumerate() if t.name == "ember-data-prefetch" and t.is_alive()]


def _wait_for_no_prefetch_threads(timeout=2.0):
    deadline = time.monotonic() + timeout
    while _prefetch_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    return _prefetch_threads()


class Squares(Dataset):
    """Sample i is (i as a float32 array of shape (2,), i*i); records what was read."""

    def __init__(self, n, delay=0.0, fail_at=None):
        self.n, self.delay, self.fail_at = n, delay, fail_at
        self.reads = []

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)
        if i == self.fail_at:
            raise ValueError(f"sample {i} is unreadable")
        self.reads.append(i)
        return np.full(2, i, np.float32), i * i


class Augmented(Dataset):
    """A random crop + flip of a fixed image: exercises data randomness inside the loader."""

    def __init__(self, n=12):
        self.images = np.arange(n * 36, dtype=np.float32).reshape(n, 1, 6, 6)
        self.t = transforms.Compose(
            [transforms.RandomCrop(4, padding=1), transforms.RandomHorizontalFlip()]
        )

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.t(ember.tensor(self.images[i])), i


# ------------------------------------------------------------------------------------ batching
def test_batches_in_order_with_last_partial_batch():
    ds = TensorDataset(ember.arange(10), ember.arange(10) * 2)
    loader = DataLoader(ds, batch_size=3)
    batches = list(loader)
    assert len(loader) == 4 == len(batches)
    assert _values(batches) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert _values(batches, 1) == [[0, 2, 4], [6, 8, 10], [12, 14, 16], [18]]
    assert batches[0][0].dtype == ember.int64


def test_drop_last_drops_the_partial_batch():
    loader = DataLoader(TensorDataset(ember.arange(10)), batch_size=3, drop_last=True)
    assert len(loader) == 3
    assert _values(list(loader)) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert len(DataLoader(TensorDataset(ember.arange(9)), batch_size=3, drop_last=True)) == 3


def test_collates_tuples_of_arrays_and_numbers():
    batch = next(iter(DataLoader(Squares(5), batch_size=4)))
    x, y = batch
    assert type(batch) is list  # (PyTorch's default_collate makes a tuple sample a list)
    assert x.shape == (4, 2) and x.dtype == ember.float32
    np.testing.assert_array_equal(x.numpy(), np.repeat(np.arange(4.0), 2).reshape(4, 2))
    assert y.dtype == ember.int64 and y.numpy().tolist() == [0, 1, 4, 9]


def test_collates_dicts_and_keeps_strings_as_lists():
    class Records(Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return {"image": np.ones((2, 2), np.uint8) * i, "label": float(i), "name": f"n{i}"}

    batch = next(iter(DataLoader(Records(), batch_size=3)))
    assert set(batch) == {"image", "label", "name"}
    assert batch["image"].shape == (3, 2, 2) and batch["image"].dtype == ember.uint8
    assert batch["label"].dtype == ember.float64  # (Python floats: float64, as PyTorch)
    assert batch["label"].numpy().tolist() == [0.0, 1.0, 2.0]
    assert batch["name"] == ["n0", "n1", "n2"]


def test_tensor_dataset_gathers_whole_batches_like_per_sample_collation():
    rng = np.random.default_rng(0)
    ds = TensorDataset(ember.tensor(rng.normal(size=(20, 3)).astype(np.float32)), ember.arange(20))
    fast = DataLoader(ds, batch_size=6, shuffle=True, generator=ember.Generator(5))
    slow = DataLoader(
        ds,
        batch_size=6,
        shuffle=True,
        generator=ember.Generator(5),
        collate_fn=ember.data.default_collate,
    )
    for a, b in zip(fast, slow, strict=True):
        for ta, tb in zip(a, b):
            assert ta.dtype == tb.dtype
            np.testing.assert_array_equal(ta.numpy(), tb.numpy())


def test_custom_collate_fn_and_sampler():
    loader = DataLoader(Squares(6), batch_size=2, sampler=[5, 0, 3], collate_fn=lambda s: s)
    batches = list(loader)
    assert len(loader) == 2
    assert [[y for _, y in b] for b in batches] == [[25, 0], [9]]
    with pytest.raises(ember.EmberError, match="sampler"):
        DataLoader(Squares(6), sampler=[0], shuffle=True)


@pytest.mark.parametrize("bad", [0, -1, 2.5, "4"])  # (None: see test_loader_unbatched.py)
def test_bad_batch_size_is_refused(bad):
    with pytest.raises(ember.EmberError, match="batch_size"):
        DataLoader(Squares(3), batch_size=bad)


# ------------------------------------------------------------------------------------ shuffling
def test_shuffle_is_a_permutation_drawn_from_the_generator():
    ds = TensorDataset(ember.arange(10))
    loader = DataLoader(ds, batch_size=4, shuffle=True, generator=ember.Generator(42))
    epoch1 = np.concatenate(_values(list(loader)))
    epoch2 = np.concatenate(_values(list(loader)))
    # PyTorch's draw order: a 63-bit base seed, then the sampler's permutation, then the
    # permutation of its empty remainder (RandomSampler draws it)
    reference = ember.Generator(42)
    for epoch in (epoch1, epoch2):
        reference.words64(1)
        np.testing.assert_array_equal(epoch, ember.randperm(10, generator=reference).numpy())
        ember.randperm(10, generator=reference)
    assert sorted(epoch1) == list(range(10)) and not np.array_equal(epoch1, epoch2)


def test_shuffled_batches_are_pytorchs_for_the_same_seed():
    torch = pytest.importorskip("torch")
    for seed, generator in ((3, False), (4, True)):
        torch.manual_seed(seed)
        ember.manual_seed(seed)
        kw = {}
        if generator:
            kw = {"generator": torch.Generator().manual_seed(seed + 1)}
        torch_loader = torch.utils.data.DataLoader(range(23), batch_size=5, shuffle=True, **kw)
        if generator:
            kw = {"generator": ember.Generator().manual_seed(seed + 1)}
        ember_loader = DataLoader(list(range(23)), batch_size=5, shuffle=True, **kw)
        for _ in range(2):
            want = [b.tolist() for b in torch_loader]
            assert [b.tolist() for b in ember_loader] == want
        assert torch.rand(3).tolist() == ember.rand(3).tolist()  # the default stream in step


def test_same_seed_gives_the_same_run():
    def run(seed):
        loader = DataLoader(
            Augmented(), batch_size=5, shuffle=True, generator=ember.Generator(seed)
        )
        return [[t.numpy().copy() for t in b] for _ in range(2) for b in loader]

    a, b, c = run(3), run(3), run(4)
    for x, y in zip(a, b, strict=True):
        for tx, ty in zip(x, y):
            np.testing.assert_array_equal(tx, ty)
    assert any(not np.array_equal(x[0], y[0]) for x, y in zip(a, c))


def test_shuffle_without_generator_follows_manual_seed():
    ds = TensorDataset(ember.arange(8))
    ember.manual_seed(11)
    a = _values(list(DataLoader(ds, batch_size=8, shuffle=True)))
    ember.manual_seed(11)
    b = _values(list(DataLoader(ds, batch_size=8, shuffle=True)))
    assert a == b


# ----------------------------------------------------------------------------------- resumption
def _collect(loader, epochs):
    return [[t.numpy().copy() for t in b] for _ in range(epochs) for b in loader]


def _assert_same_batches(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for tx, ty in zip(x, y):
            np.testing.assert_array_equal(tx, ty)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_resuming_mid_epoch_from_a_checkpoint_sees_the_same_batches(tmp_path, prefetch):
    def make(seed):
        return DataLoader(
            Augmented(),
            batch_size=3,
            shuffle=True,
            generator=ember.Generator(seed),
            prefetch=prefetch,
        )

    uninterrupted = _collect(make(7), 3)  # 3 epochs of 4 batches

    first = make(7)
    seen = _collect(first, 1)  # epoch 0
    for i, batch in enumerate(first):  # epoch 1, interrupted after two batches
        seen.append([t.numpy().copy() for t in batch])
        if i == 1:
            break
    ember.io.save({"loader": first.state_dict()}, tmp_path / "ckpt")
    del first

    resumed = make(123)  # a different seed: everything must come from the checkpoint
    resumed.load_state_dict(ember.io.load(tmp_path / "ckpt")["loader"])
    assert resumed.epoch == 1
    seen += _collect(resumed, 2)  # the rest of epoch 1, then epoch 2
    _assert_same_batches(uninterrupted, seen)


def test_resuming_between_epochs_from_the_generator_state():
    def make(seed):
        return DataLoader(Augmented(), batch_size=4, shuffle=True, generator=ember.Generator(seed))

    uninterrupted = _collect(make(1), 3)
    first = make(1)
    seen = _collect(first, 2)
    state = first.state_dict()
    assert state["epoch"] == 2 and state["batch"] == 0
    second = make(99)
    second.generator.set_state(first.generator.get_state())  # what `ember train` saves
    seen += _collect(second, 1)
    _assert_same_batches(uninterrupted, seen)


def test_load_state_dict_refuses_another_dataset_size():
    state = DataLoader(Squares(10), batch_size=2, generator=ember.Generator(0)).state_dict()
    with pytest.raises(ember.StateDictError, match="num_samples=10"):
        DataLoader(Squares(12), batch_size=2, generator=ember.Generator(0)).load_state_dict(state)


def test_data_randomness_is_independent_of_the_training_loops_draws():
    def run(draw_in_loop):
        ember.manual_seed(0)
        loader = DataLoader(Augmented(), batch_size=4, shuffle=True, generator=ember.Generator(2))
        out = []
        for batch in loader:
            out.append([t.numpy().copy() for t in batch])
            if draw_in_loop:
                ember.randn(5)  # e.g. dropout drawing from the default generator
        return out

    _assert_same_batches(run(False), run(True))


# ------------------------------------------------------------------------------------- prefetch
@pytest.mark.parametrize("dataset", [Augmented(), TensorDataset(ember.arange(23))])
def test_prefetch_gives_the_same_batches_as_synchronous_loading(dataset):
    def run(prefetch):
        loader = DataLoader(
            dataset, batch_size=4, shuffle=True, generator=ember.Generator(8), prefetch=prefetch
        )
        return _collect(loader, 2)

    _assert_same_batches(run(0), run(3))
    assert not _wait_for_no_prefetch_threads()


def test_prefetch_overlaps_loading_with_compute():
    load_s = compute_s = 0.02
    n = 12
    loader = DataLoader(Squares(n, delay=load_s), batch_size=1, prefetch=2)
    start = time.perf_counter()
    for _ in loader:
        time.sleep(compute_s)  # the training step
    overlapped = time.perf_counter() - start
    serial = n * (load_s + compute_s)
    # perfect overlap takes ~ (n + 1) * 0.02 = 0.26 s; serial work takes 0.48 s
    assert overlapped < 0.8 * serial, (overlapped, serial)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_dataset_exceptions_reach_the_caller_with_their_traceback(prefetch):
    loader = DataLoader(Squares(10, fail_at=5), batch_size=2, prefetch=prefetch)
    got = []
    with pytest.raises(ValueError, match="sample 5 is unreadable") as info:
        for batch in loader:
            got.append(batch[1].numpy().tolist())
    assert got == [[0, 1], [4, 9]]  # the batches before the failing one were delivered
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "__getitem__" in frames
    if prefetch:
        assert any("prefetch thread" in note for note in info.value.__notes__)
    assert not _wait_for_no_prefetch_threads()


def test_breaking_out_early_stops_the_worker():
    ds = Squares(200, delay=0.002)
    loader = DataLoader(ds, batch_size=1, prefetch=2)
    for i, _ in enumerate(loader):
        if i == 2:
            break
    assert not _wait_for_no_prefetch_threads()
    assert len(ds.reads) <= 3 + 2 + 2  # consumed + queue depth + the batch being built
    assert loader.state_dict()["batch"] == 3


def test_an_abandoned_prefetching_loop_does_not_hold_up_interpreter_exit():
    script = textwrap.dedent(
        """
        import time
        import numpy as np
        import ember
        from ember.data import DataLoader, Dataset

        class Slow(Dataset):
            def __len__(self):
                return 10_000
            def __getitem__(self, i):
                time.sleep(0.01)
                return np.zeros(3, np.float32)

        it = iter(DataLoader(Slow(), batch_size=1, prefetch=4))
        next(it)
        print("consumed one batch")
        """
    )
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "consumed one batch" in result.stdout
    assert time.monotonic() - start < 30
