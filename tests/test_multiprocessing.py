"""``ember.multiprocessing`` (torch.multiprocessing's names): the sharing strategy as
PyTorch's, Python's multiprocessing names, and ``spawn`` running ``fn(i, *args)`` in processes
that pass tensors back through a queue, raising the failing process's error as PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.multiprocessing as mp

from ._spawned_workers import fail, square

torch = pytest.importorskip("torch")


def test_sharing_strategy_is_pytorchs():
    assert mp.get_all_sharing_strategies() == torch.multiprocessing.get_all_sharing_strategies()
    assert mp.get_sharing_strategy() == torch.multiprocessing.get_sharing_strategy()
    mp.set_sharing_strategy("file_system")
    try:
        assert mp.get_sharing_strategy() == "file_system"
    finally:
        mp.set_sharing_strategy("file_descriptor")
    with pytest.raises(ValueError):
        mp.set_sharing_strategy("shared_memory")


def test_pythons_names_are_there():
    import multiprocessing

    assert mp.Process is multiprocessing.Process and mp.cpu_count() >= 1
    assert ember.multiprocessing is mp


def test_spawn_runs_each_index_and_carries_tensors():
    queue = mp.get_context("spawn").SimpleQueue()
    base = ember.arange(3.0)
    assert mp.spawn(square, args=(queue, base), nprocs=2) is None
    got = dict(queue.get() for _ in range(2))
    for i in range(2):
        np.testing.assert_array_equal(got[i].numpy(), np.arange(3.0, dtype=np.float32) * (i + 1))


def test_spawn_raises_the_failing_processs_error():
    with pytest.raises(mp.ProcessRaisedException, match="ValueError: bad shard") as info:
        mp.spawn(fail, nprocs=2)
    assert info.value.error_index == 1
    context = mp.start_processes(fail, nprocs=1, join=False)  # (index 0 ends well)
    assert len(context.pids()) == 1
    while not context.join():
        pass
