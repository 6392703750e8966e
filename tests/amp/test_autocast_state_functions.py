"""PyTorch's functions that set the autocast state without a region (torch.set_autocast_enabled,
set_autocast_dtype, their older CPU spellings, the nesting count), against PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _run(lib, a_np):
    a = lib.tensor(a_np)
    seen = []

    def note(label):
        seen.append((label, str((a @ a).dtype).split(".")[-1], lib.is_autocast_enabled("cpu")))

    note("off")
    lib.set_autocast_enabled("cpu", True)
    try:
        note("on")
        lib.set_autocast_dtype("cpu", lib.float16)
        note("float16")
        lib.set_autocast_dtype("cpu", lib.float32)
        note("float32")
        lib.set_autocast_dtype("cpu", lib.bfloat16)
        with lib.autocast("cpu", enabled=False):
            note("region off")
        note("after the region")
        counts = [lib.autocast_increment_nesting(), lib.autocast_increment_nesting()]
        counts += [lib.autocast_decrement_nesting(), lib.autocast_decrement_nesting()]
        seen.append(("nesting", tuple(counts), None))
    finally:
        lib.set_autocast_enabled("cpu", False)
        lib.set_autocast_dtype("cpu", lib.bfloat16)
    note("off again")
    lib.set_autocast_cpu_enabled(True)
    try:
        lib.set_autocast_cpu_dtype(lib.float16)
        seen.append(("cpu spelling", str(lib.get_autocast_cpu_dtype()).split(".")[-1], None))
        note("cpu spelling")
    finally:
        lib.set_autocast_cpu_enabled(False)
        lib.set_autocast_cpu_dtype(lib.bfloat16)
    lib.set_autocast_enabled("cuda", False)  # (a device it does not drive: accepted)
    note("end")
    return seen


def test_state_functions_as_pytorch():
    a = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    assert _run(ember, a) == _run(torch, a)


def test_a_captured_function_follows_the_state_set_without_a_region():
    a = ember.randn(4, 4)
    f = ember.function(lambda x: x @ x)
    assert f(a).dtype == ember.float32
    ember.set_autocast_enabled("cpu", True)
    try:
        assert f(a).dtype == ember.bfloat16  # (another graph: the state is in the cache key)
        np.testing.assert_array_equal(f(a).float().numpy(), (a @ a).float().numpy())
    finally:
        ember.set_autocast_enabled("cpu", False)
    assert f(a).dtype == ember.float32
