"""A Tensor's repr is PyTorch's, character for character (with ``ember.`` for ``torch.``): the
element format chosen from the values, alignment, line wrapping, summarization, suffixes and
their wrapping, under every print option; compared with torch 2.13 on generated tensors."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

_DTYPES = {
    "float32": (np.float32, ember.float32, torch.float32),
    "float64": (np.float64, ember.float64, torch.float64),
    "float16": (np.float16, ember.float16, torch.float16),
    "bfloat16": (np.float32, ember.bfloat16, torch.bfloat16),
    "int64": (np.int64, ember.int64, torch.int64),
    "int32": (np.int32, ember.int32, torch.int32),
    "uint8": (np.uint8, ember.uint8, torch.uint8),
    "bool": (np.bool_, ember.bool, torch.bool),
}


def _values(rng, shape, kind):
    """Values that exercise each branch of the format choice."""
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "integral":
        return rng.integers(-50, 50, shape).astype(np.float64)
    if kind == "wide":  # max/min above 1000: scientific notation
        return rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 9, shape)
    if kind == "tiny":
        return rng.standard_normal(shape) * 1e-6
    if kind == "huge_integral":
        return rng.integers(1, 9, shape) * 1e9
    if kind == "special":
        x = rng.standard_normal(shape)
        flat = x.reshape(-1)
        picks = rng.integers(0, 4, flat.size)
        flat[picks == 0] = np.nan
        flat[picks == 1] = np.inf
        flat[picks == 2] = 0.0
        return x
    if kind == "zeros":
        return np.zeros(shape)
    raise AssertionError(kind)


def _pair(values, name):
    np_dtype, e_dtype, t_dtype = _DTYPES[name]
    if name == "bool":
        values = values > 0
    elif np.dtype(np_dtype).kind in "iu":
        values = np.nan_to_num(values, nan=0.0, posinf=7.0, neginf=-7.0)
        values = np.clip(np.round(values), -100 if np_dtype != np.uint8 else 0, 100)
    with np.errstate(over="ignore"):  # (float16 overflows to inf: printed as torch prints it)
        data = values.astype(np_dtype) if name != "bfloat16" else values
    t = torch.tensor(data, dtype=t_dtype)
    e = ember.tensor(t.to(torch.float32).numpy() if name == "bfloat16" else t.numpy())
    return e.to(e_dtype), t


def _same(e, t):
    assert repr(e) == repr(t).replace("torch.", "ember."), f"\n{e!r}\n{t!r}"


@pytest.fixture
def options():
    yield
    ember.set_printoptions(profile="default", sci_mode=None)
    torch.set_printoptions(profile="default", sci_mode=None)


@pytest.mark.parametrize("seed", range(21))
def test_generated_tensors_print_as_in_pytorch(seed, options):
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in rng.integers(1, 6, rng.integers(0, 4)))
    kind = ["normal", "integral", "wide", "tiny", "huge_integral", "special", "zeros"][seed % 7]
    for name in _DTYPES:
        _same(*_pair(_values(rng, shape, kind), name))


@pytest.mark.parametrize(
    "settings",
    [
        {"precision": 2},
        {"precision": 7},
        {"sci_mode": True},
        {"sci_mode": False},
        {"threshold": 10, "edgeitems": 2},
        {"threshold": 10, "edgeitems": 1},
        {"threshold": 10, "edgeitems": 0},
        {"linewidth": 30},
        {"linewidth": 200},
        {"profile": "short"},
        {"profile": "full"},
    ],
)
def test_print_options_as_in_pytorch(settings, options):
    ember.set_printoptions(**settings)
    torch.set_printoptions(**settings)
    rng = np.random.default_rng(len(str(settings)))
    for shape in [(), (7,), (40,), (3, 17), (4, 5, 6), (2, 3, 4, 5)]:
        for kind in ("normal", "integral", "wide", "special"):
            for name in ("float32", "float64", "int64", "bool"):
                _same(*_pair(_values(rng, shape, kind), name))


def test_summarized_printouts_as_in_pytorch(options):
    rng = np.random.default_rng(0)
    for shape in [(2000,), (50, 50), (11, 12, 13), (3000, 2), (2, 3000)]:
        for name in ("float32", "int64", "bool"):
            _same(*_pair(_values(rng, shape, "normal"), name))
    _same(ember.arange(2000), torch.arange(2000))


def test_empty_tensors_and_suffixes_as_in_pytorch():
    for shape in [(0,), (0, 3), (2, 0, 4)]:
        for name in ("float32", "float64", "int64", "bool"):
            _same(
                ember.zeros(shape, dtype=_DTYPES[name][1]),
                torch.zeros(shape, dtype=_DTYPES[name][2]),
            )
    _same(ember.ones(3, requires_grad=True), torch.ones(3, requires_grad=True))
    e = ember.ones(3, dtype=ember.float64, requires_grad=True) * 2
    t = torch.ones(3, dtype=torch.float64, requires_grad=True) * 2
    _same(e, t)  # dtype, then grad_fn
    # suffixes that would pass the line width go on a line of their own
    e = ember.arange(10, dtype=ember.float64).reshape(2, 5) / 3
    t = torch.arange(10, dtype=torch.float64).reshape(2, 5) / 3
    _same(e.requires_grad_(), t.requires_grad_())
    long_row = ember.tensor(np.linspace(-1, 1, 10), dtype=ember.float16)
    _same(long_row, torch.tensor(np.linspace(-1, 1, 10), dtype=torch.float16))


def test_shapes_print_as_in_pytorch():
    assert str(ember.zeros(2, 3).shape) == "ember.Size([2, 3])"
    assert repr(ember.zeros(()).shape) == "ember.Size([])"
    assert str(ember.zeros(4).size()) == str(torch.zeros(4).size()).replace("torch.", "ember.")


def test_named_results_print_as_in_pytorch():
    rng = np.random.default_rng(3)
    values = rng.standard_normal((3, 4)).astype(np.float32)
    e, t = ember.tensor(values), torch.tensor(values)
    for call in (
        lambda m, x: x.max(1),
        lambda m, x: x.min(dim=0, keepdim=True),
        lambda m, x: x.sort(descending=True),
        lambda m, x: x.topk(2),
        lambda m, x: m.aminmax(x),
        lambda m, x: m.cummax(x, 1),
        lambda m, x: x.median(1),
        lambda m, x: m.mode(x.round(), 0),
    ):
        result = call(ember, e)
        assert repr(result) == repr(call(torch, t)).replace("torch.", "ember.")
        assert type(result).__module__ == "ember.return_types"
