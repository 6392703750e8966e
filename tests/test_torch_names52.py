"""PyTorch top-level names programs use around their models, checked against torch: the
out-of-memory error (a RuntimeError, also ``torch.cuda``'s), ``torch.layout``, the
deterministic debug mode and the autocast cache switches."""

import pytest

import ember

torch = pytest.importorskip("torch")


def test_an_allocation_the_machine_refuses_is_pytorchs_out_of_memory_error():
    with pytest.raises(RuntimeError) as caught:  # (PyTorch's CPU allocator: a RuntimeError)
        torch.empty(10**13)
    with pytest.raises(ember.OutOfMemoryError, match="out of memory") as ours:
        ember.empty(10**13)
    assert isinstance(ours.value, RuntimeError) and isinstance(ours.value, MemoryError)
    assert isinstance(caught.value, RuntimeError)
    with pytest.raises(ember.cuda.OutOfMemoryError, match=r"add.*\(1000000,\)"):
        ember.ones(10**6) + ember.ones(10**7, 1)
    assert torch.cuda.OutOfMemoryError is torch.OutOfMemoryError
    assert ember.cuda.OutOfMemoryError is ember.OutOfMemoryError


def test_layout_is_the_type_of_strided_and_sparse_coo():
    for lib in (torch, ember):
        assert isinstance(lib.strided, lib.layout) and isinstance(lib.sparse_coo, lib.layout)


@pytest.mark.parametrize("mode", [0, 1, 2, "default", "warn", "error"])
def test_deterministic_debug_mode_as_pytorch(mode):
    answers = []
    for lib in (torch, ember):
        before = lib.get_deterministic_debug_mode()
        try:
            lib.set_deterministic_debug_mode(mode)
            answers.append(
                (
                    lib.get_deterministic_debug_mode(),
                    lib.are_deterministic_algorithms_enabled(),
                    lib.is_deterministic_algorithms_warn_only_enabled(),
                )
            )
        finally:
            lib.set_deterministic_debug_mode(before)
    assert answers[0] == answers[1]


def test_autocast_cache_switch_as_pytorch():
    for lib in (torch, ember):
        assert lib.is_autocast_cache_enabled()
        lib.set_autocast_cache_enabled(False)
        try:
            assert not lib.is_autocast_cache_enabled()
        finally:
            lib.set_autocast_cache_enabled(True)
        lib.clear_autocast_cache()
