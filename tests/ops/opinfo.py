"""An OpInfo-style database of ember's public functions against PyTorch (as PyTorch's own
OpInfo tests are built): each `OpInfo` names a public function, how PyTorch spells it, and
sample inputs (NumPy arrays and Python values) that cover broadcasting, non-contiguous and
zero-size inputs, negative dims, NaN and infinities. test_opinfo.py runs every sample through
every spelling ember exports the function under (``ember.f``, ``ember.nn.functional.f``,
``x.f(...)``, ``x.f_(...)``) and compares with PyTorch:

* values, shapes and dtypes in float64 (~1e-10 relative), and the gradients of every
  floating input;
* a dtype sweep (every ember dtype): both libraries accept or both refuse, and agree in
  result dtype and value;
* for binary elementwise functions, the promotion table (dimensioned and 0-d tensors, Python
  scalars) in result dtype and value.

The databases are the ``opinfo_*.py`` modules beside this one; test_opinfo.py checks that every
public function (``ops._registry.PUBLIC``, ``FUNCTIONAL``, ``METHODS``, ``INPLACE``) has an
entry or a reasoned place in ``NO_TORCH``, and that the samples reach every registered op.

This builds on harness.py (the registry's own conformance samples): the same PyTorch import,
random generator and recorder.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import ember
from ember.ops import _registry

from .harness import TORCH_MISSING, away_from, recording, rng, torch

__all__ = [
    "ALL_DTYPES",
    "COMPLEX",
    "DT",
    "FLOATS",
    "Fn",
    "OpInfo",
    "Sample",
    "TORCH_MISSING",
    "WITH_COMPLEX",
    "with_complex",
    "away_from",
    "recording",
    "rng",
    "torch",
]

ALL_DTYPES = (
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
)
FLOATS = ("float16", "bfloat16", "float32", "float64")
COMPLEX = ("complex64", "complex128")
# the sweep of an op PyTorch computes in complex too (opinfo entries' ``dtypes=WITH_COMPLEX``)
WITH_COMPLEX = ALL_DTYPES + COMPLEX
INTS = ("uint8", "int8", "int16", "int32", "int64")


class DT:
    """A dtype argument: ``DT("float32")`` becomes ``ember.float32`` / ``torch.float32``."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"DT({self.name})"


class Fn:
    """An argument built per library: ``Fn(lambda lib: ...)`` (a loop body written in the
    library's own ops, a dtype-dependent value)."""

    def __init__(self, make: Callable):
        self.make = make

    def __repr__(self) -> str:
        return "Fn(...)"


@dataclass
class Sample:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    desc: str = ""
    grad: bool = True  # compare gradients (the float64 run)
    strided: bool = False  # array arguments become non-contiguous views of the same values
    nondiff: tuple = ()  # positions of float arrays that are not differentiated
    only: tuple | None = None  # the spellings this call form exists in (x.permute(2, 0, 1))
    # compare gradients at NaN inputs too: PyTorch's are not stable there for the activations
    # (hardshrink's is 1 for up to 4 float64 values, 0 from 8 on: its vectorized loop and its
    # scalar one disagree), so their special-value samples leave NaN positions out
    grad_at_nan: bool = True

    def __repr__(self) -> str:
        return self.desc or f"Sample({len(self.args)} args)"


@dataclass
class OpInfo:
    """One public function. ``call(lib, *args, **kwargs)`` overrides how it is called (``lib``
    a `Lib`); by default ``name`` (``torch_name`` in PyTorch) under each spelling in
    ``spellings`` ("T": top level, "F": nn.functional, "M": method, "I": in-place method
    ``name_``), which default to every one ember exports it under."""

    name: str
    samples: Callable[[], list]
    torch_name: str | None = None
    call: Callable | None = None
    spellings: tuple | None = None
    torch_spellings: dict = field(default_factory=dict)  # {"T": "F"}: torch's spelling to compare
    dtypes: tuple = ALL_DTYPES  # the dtype sweep: ember's result compared where torch has one
    dtype_samples: Callable | None = None  # (dtype) -> samples; default: cast samples
    sweep: int = 2  # how many of the first samples the default dtype sweep casts
    grad: bool = True
    rtol: float = 1e-10
    atol: float = 1e-12
    promotion: bool = False  # run the binary promotion table
    binary: Callable | None = None  # (lib, x, y) for the table; default: the op on (x, y)
    scalars: bool = True  # the table includes Python scalar operands
    random: bool = False  # draws: compare shapes, dtypes and ``check`` of the values only
    check: Callable | None = None  # random: (ember values) -> None, asserting properties
    # dtype -> reason: ember and torch differ in accepting it (ember accepts more, or less)
    dtype_differences: dict = field(default_factory=dict)
    # deliberate differences from PyTorch (documented in the op's docstring too): sample
    # description (or "[I] description": one spelling's) -> reason; those samples are skipped
    differences: dict = field(default_factory=dict)
    half_tol: float = 2e-2  # float16/bfloat16 tolerance of the sweep (a few roundings)
    # why gradients at infinite inputs are left out (ember's is the limit, PyTorch's NaN)
    inf_grads: str | None = None
    grad_rtol: float | None = None  # the gradients' tolerance, where it differs (with reason)

    def __repr__(self) -> str:
        return self.name


# Public functions whose dtype sweep runs complex64 and complex128 against PyTorch, wherever
# their entry's sweep reaches float64 (`with_complex`; cast_array gives the samples imaginary
# parts): those PyTorch computes in complex, and those it refuses
# complex tensors for where ember must refuse too (sort, isin, nansum, interpolate, ...). Their
# gradients in complex are tests/ops/test_complex9.py's (the sweep compares values).
COMPLEX_SWEEP = frozenset(
    {
        # convolutions (complex products) and torch.convolution (which PyTorch refuses)
        *("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d"),
        *("conv_transpose3d", "conv_tbc", "convolution"),
        # elementwise and reductions
        *("lerp", "logsumexp", "exp2", "silu", "sinc", "logaddexp", "float_power", "softsign"),
        *("abs", "angle", "sgn", "pow", "reciprocal", "rsqrt", "sqrt", "log", "exp", "tanh"),
        *("sigmoid", "cumsum", "cumprod", "prod", "mean", "var", "std", "sum", "dist", "renorm"),
        *("isposinf", "isneginf", "nansum"),
        # statistics, products and their scaled sums
        *("cov", "corrcoef", "vander", "addr", "addmv", "bmm", "baddbmm", "einsum", "tensordot"),
        # selection, indexing and layout
        *("nonzero", "argwhere", "nonzero_static", "where", "masked_fill", "index_put"),
        *("scatter", "scatter_reduce", "index_reduce", "pad", "roll", "flip", "cat", "stack"),
        *("sort", "argsort", "msort", "topk", "isin"),
        # nn.functional
        *("embedding", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout"),
        *("feature_alpha_dropout", "l1_loss", "soft_margin_loss", "poisson_nll_loss"),
        *("triplet_margin_loss", "normalize", "rms_norm", "interpolate"),
    }
)


def with_complex(op: OpInfo) -> OpInfo:
    """``op`` with complex64 and complex128 in its dtype sweep if COMPLEX_SWEEP names it (run by
    test_opinfo.py once every database module has set its entries' dtypes)."""
    if op.name in COMPLEX_SWEEP and "float64" in op.dtypes:
        op.dtypes = tuple(op.dtypes) + tuple(c for c in COMPLEX if c not in op.dtypes)
    return op


# ------------------------------------------------------------------------------ libraries


class Lib:
    """ember or torch, behind the few calls the tests need."""

    def __init__(self, name: str):
        self.name = name
        self.mod = ember if name == "ember" else torch
        self.F = self.mod.nn.functional

    def dtype(self, name: str):
        return getattr(self.mod, name)

    def tensor(self, array: np.ndarray, strided: bool):
        dtype_name = _dtype_name(array.dtype)
        if self.name == "ember":
            if strided and array.ndim and array.size:
                return ember.from_numpy(_strided_copy(array))
            return ember.tensor(array)
        if dtype_name == "bfloat16":
            t = torch.tensor(array.astype(np.float32)).to(torch.bfloat16)
        else:
            t = torch.tensor(array)
        if strided and array.ndim and array.size:
            big = torch.zeros((*t.shape[:-1], 2 * t.shape[-1]), dtype=t.dtype)
            big[..., ::2] = t
            t = big[..., ::2]
        return t

    def numpy(self, t) -> np.ndarray:
        if self.name == "ember":
            return t.detach().numpy()
        t = t.detach()
        if t.is_complex():  # (a lazily conjugated or negated view: its values)
            t = t.resolve_conj().resolve_neg()
        if t.dtype == torch.bfloat16:
            return t.float().numpy().astype(ember.bfloat16.np)
        return t.numpy()

    def is_tensor(self, x) -> bool:
        return isinstance(x, ember.Tensor if self.name == "ember" else torch.Tensor)

    def dtype_of(self, t) -> str:
        return str(t.dtype).replace("torch.", "").replace("ember.", "")

    def grad(self, objective, leaves):
        if self.name == "ember":
            return ember.autograd.grad(objective, leaves, allow_unused=True)
        return torch.autograd.grad(objective, leaves, allow_unused=True)


EMBER = Lib("ember")
TORCH = Lib("torch") if torch is not None else None


def _dtype_name(np_dtype) -> str:
    return ember.dtypes.from_numpy_dtype(np_dtype).name


def _strided_copy(array: np.ndarray) -> np.ndarray:
    """The same values as a view whose last dimension has stride 2."""
    big = np.zeros((*array.shape[:-1], 2 * array.shape[-1]), dtype=array.dtype)
    big[..., ::2] = array
    return big[..., ::2]


def convert(lib: Lib, sample: Sample, requires_grad: bool, sources: list | None = None):
    """The sample's arguments as ``lib``'s values, and the leaves to differentiate (their
    arrays appended to ``sources``)."""
    leaves = []

    def one(x, position):
        if isinstance(x, np.ndarray):
            t = lib.tensor(x, sample.strided)
            floating = _dtype_name(x.dtype) in FLOATS
            if requires_grad and floating and position not in sample.nondiff:
                t.requires_grad_(True)
                leaves.append(t)
                if sources is not None:
                    sources.append(x)
            return t
        if isinstance(x, DT):
            return lib.dtype(x.name)
        if isinstance(x, Fn):
            return x.make(lib)
        if isinstance(x, list):
            return [one(v, position) for v in x]
        if isinstance(x, tuple) and any(isinstance(v, (np.ndarray, DT, Fn)) for v in x):
            return tuple(one(v, position) for v in x)
        return x

    args = [one(a, i) for i, a in enumerate(sample.args)]
    kwargs = {k: one(v, k) for k, v in sample.kwargs.items()}
    return args, kwargs, leaves


# -------------------------------------------------------------------------------- calling


def spellings_of(op: OpInfo) -> tuple:
    if op.spellings is not None:
        return op.spellings
    kinds = []
    if op.name in _registry.PUBLIC:
        kinds.append("T")
    if op.name in _registry.FUNCTIONAL:
        kinds.append("F")
    if op.name in _registry.METHODS:
        kinds.append("M")
    # (an in-place method of its own, masked_scatter_, is a method named with the underscore)
    if op.name + "_" in _registry.INPLACE or op.name + "_" in _registry.METHODS:
        kinds.append("I")
    return tuple(kinds)


def keys_of(op: OpInfo) -> set:
    """The public entry points ``op`` covers, as ``kind:name`` (I: the in-place method)."""
    return {f"{k}:{op.name}_" if k == "I" else f"{k}:{op.name}" for k in spellings_of(op)}


def run(op: OpInfo, lib: Lib, spelling: str, args, kwargs):
    """Call ``op`` in ``lib`` under ``spelling``."""
    if op.call is not None:
        return op.call(lib, *args, **kwargs)
    name = op.name if lib.name == "ember" else (op.torch_name or op.name)
    if lib.name == "torch":  # PyTorch's one spelling of what ember exports twice (F.pad)
        spelling = op.torch_spellings.get(spelling, spelling)
        if spelling == "T" and not hasattr(lib.mod, name):
            spelling = "F"
        elif spelling == "F" and not hasattr(lib.F, name):
            spelling = "T"
    if spelling == "T":
        return getattr(lib.mod, name)(*args, **kwargs)
    if spelling == "F":
        return getattr(lib.F, name)(*args, **kwargs)
    if spelling == "M":
        return getattr(args[0], name)(*args[1:], **kwargs)
    if spelling == "I":  # on a non-leaf copy, so gradients flow through the write
        target = args[0].clone() if lib.is_tensor(args[0]) else args[0]
        out = getattr(target, name + "_")(*args[1:], **kwargs)
        assert out is target, f"{lib.name}: {name}_ returned another tensor"
        return target
    raise ValueError(spelling)


def flatten(lib: Lib, out) -> list:
    """Tensors and Python values of a result, in order (tuples, lists, named tuples)."""
    if isinstance(out, (tuple, list)):
        return [v for item in out for v in flatten(lib, item)]
    return [out]


# ----------------------------------------------------------------------------- comparing


def tolerance(dtype: str, op: OpInfo) -> tuple[float, float]:
    if dtype in ("float64", "complex128"):
        return op.rtol, op.atol
    if dtype in ("float32", "complex64"):
        return 2e-5, 2e-5
    if dtype in ("float16", "bfloat16"):
        return op.half_tol * (3 if dtype == "bfloat16" else 1), op.half_tol * (
            3 if dtype == "bfloat16" else 1
        )
    return 0.0, 0.0


def compare(op: OpInfo, e_out, t_out, where: str, values: bool = True) -> None:
    """ember's result against torch's: structure, shapes, dtypes and values."""
    e_items, t_items = flatten(EMBER, e_out), flatten(TORCH, t_out)
    assert len(e_items) == len(t_items), f"{where}: {len(e_items)} outputs, torch {len(t_items)}"
    for k, (e, t) in enumerate(zip(e_items, t_items)):
        at = f"{where}: output {k}"
        if not TORCH.is_tensor(t):
            assert not EMBER.is_tensor(e), f"{at}: a tensor where torch gives {t!r}"
            if isinstance(t, float) and math.isnan(t):
                assert math.isnan(e), f"{at}: {e} vs {t}"
            else:
                assert e == t, f"{at}: {e!r} vs torch {t!r}"
            continue
        assert EMBER.is_tensor(e), f"{at}: {e!r} where torch gives a tensor"
        assert tuple(e.shape) == tuple(t.shape), f"{at}: shape {tuple(e.shape)} vs {t.shape}"
        e_dtype, t_dtype = EMBER.dtype_of(e), TORCH.dtype_of(t)
        assert e_dtype == t_dtype, f"{at}: dtype {e_dtype} vs torch {t_dtype}"
        if not values:
            continue
        got, want = EMBER.numpy(e), TORCH.numpy(t)
        assert_values(got, want, e_dtype, op, at)


def assert_values(got, want, dtype: str, op: OpInfo, at: str) -> None:
    if dtype in ("bool",) or dtype in INTS:
        np.testing.assert_array_equal(got, want, err_msg=at)
        return
    if dtype in COMPLEX:  # the real and imaginary parts, each as a float of its precision
        parts = ("float64" if dtype == "complex128" else "float32", np.real, np.imag)
        for part in parts[1:]:
            assert_values(part(got), part(want), parts[0], op, f"{at} ({part.__name__})")
        return
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    rtol, atol = tolerance(dtype, op)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{at}: NaN positions")
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf], err_msg=f"{at}: infinities")
    scale = np.abs(want[np.isfinite(want)]).max() if np.isfinite(want).any() else 1.0
    np.testing.assert_allclose(
        got, want, rtol=rtol, atol=atol * max(scale, 1.0), equal_nan=True, err_msg=at
    )


def cast_array(a: np.ndarray, dtype: str) -> np.ndarray:
    """A float sample array in another dtype, keeping values the dtype can hold (integers:
    rounded and small; uint8: non-negative; bool: the positive ones)."""
    if _dtype_name(a.dtype) not in FLOATS:
        return a  # indices and masks keep their dtype
    if dtype in COMPLEX:  # the values as real parts, imaginary parts of the same size beside
        finite = np.nan_to_num(a.astype(np.float64), nan=0.3, posinf=2.0, neginf=-2.0)
        imag = 0.7 * np.roll(finite.ravel(), 1).reshape(a.shape)
        return np.asarray(a.astype(np.complex128) + 1j * imag).astype(getattr(ember, dtype).np)
    if dtype == "bool":
        return np.asarray(a > 0)
    if dtype in INTS:
        finite = np.nan_to_num(a, nan=0.0, posinf=3.0, neginf=-3.0)
        values = np.round(np.clip(finite, -3.0, 3.0) * 2)
        if dtype == "uint8":
            values = np.abs(values)
        return np.asarray(values).astype(getattr(ember, dtype).np)
    return np.asarray(a.astype(getattr(ember, dtype).np))


def cast_sample(sample: Sample, dtype: str) -> Sample:
    def one(x):
        if isinstance(x, np.ndarray):
            return cast_array(x, dtype)
        if isinstance(x, list):
            return [one(v) for v in x]
        if isinstance(x, tuple) and any(isinstance(v, np.ndarray) for v in x):
            return tuple(one(v) for v in x)
        return x

    return Sample(
        tuple(one(a) for a in sample.args),
        {k: one(v) for k, v in sample.kwargs.items()},
        f"{sample.desc} as {dtype}",
        grad=False,
        strided=sample.strided,
    )


def attempt(fn):
    """``(result, None)`` or ``(None, exception)``."""
    try:
        return fn(), None
    except Exception as exc:  # noqa: BLE001 - both libraries' refusals are compared
        return None, exc
