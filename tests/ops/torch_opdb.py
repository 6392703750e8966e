"""PyTorch's own OpInfo database (``common_methods_invocations.op_db``) run through ember.

Each OpInfo's samples (broadcasting, keywords, scalars, 0-d and empty tensors) are converted to
ember tensors and given to ember's function of the same name (``ember.linalg.solve`` for
``linalg.solve``; an OpInfo whose ``op`` is a lambda of torch's test suite runs with ``torch``
and ``F`` bound to ember), and the results compared with PyTorch's: values, shapes and dtypes,
and with ``grad=True`` the inputs' gradients of a random projection of the outputs.

``run_op`` gives one OpInfo's outcome: ``"ok"`` or the first difference. tests/ops/
test_torch_opinfo.py holds ember to it; ``python tests/ops/torch_opdb.py f32|f64 [--grad]
[names]`` prints every op's outcome, for finding what to fix."""

from __future__ import annotations

import types
import warnings

import numpy as np

import ember

# Ops whose comparison says nothing about ember (the reason is printed by the CLI): PyTorch's
# internal entry points and prototypes, and ops whose results are random draws.
NOT_COMPARED = {
    "hash_tensor": "a PyTorch-internal hash of the bytes",
    "chalf": "complex32, which ember has no tensors for",
    "to_sparse": "sparse layouts are compared by tests/ops/test_sparse*",
    "resize_as_": "storage resizing, which ember's tensors do not expose",
    "as_strided.partial_views": "strides over storage beyond the view the sample gives, which "
    "its copy into ember does not hold",
}
NOT_COMPARED_PREFIXES = {
    "masked.": "torch.masked, PyTorch's prototype namespace",
    "jiterator_": "CUDA's jiterator",
    "torch.ops.aten.": "ATen's internal operators",
    "max_pool2d_with_indices_backward": "ATen's internal operator (torch.ops.aten)",
    "slice": "ATen's internal operator (torch.ops.aten)",
    "native_dropout_backward": "ATen's internal operator",
    "grid_sampler_2d": "ATen's internal operator (F.grid_sample is compared)",
    "grid_sampler_3d": "ATen's internal operator (F.grid_sample is compared)",
    "_": "PyTorch-private functions (torch._*)",
}
# random draws: only their shapes and dtypes are compared
RANDOM = {
    "bernoulli", "cauchy", "empty", "empty_like", "empty_permuted", "empty_strided",
    "exponential", "geometric", "log_normal", "multinomial", "new_empty", "new_empty_strided",
    "normal", "rand", "rand_like", "randint", "randint_like", "randn", "randn_like", "uniform",
    "nn.functional.alpha_dropout", "nn.functional.dropout", "nn.functional.dropout1d",
    "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.feature_alpha_dropout.with_train",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
    "nn.functional.rrelu", "pca_lowrank", "svd_lowrank",
}  # fmt: skip
# ops whose samples with dropout draw at random: those samples' shapes and dtypes only
DROPOUT = {
    "nn.functional.scaled_dot_product_attention": lambda s: s.kwargs.get("dropout_p", 0) > 0,
    "nn.functional.multi_head_attention_forward": lambda s: (
        s.kwargs.get("training") and s.args[9] > 0
    ),
}
# eigenvectors are defined up to a phase per column: compared after normalizing each column
# by the phase of its largest element (results' positions of eigenvector matrices)
EIGENVECTORS = {"linalg.eig": (1,), "linalg.eigh": (1,)}

TOLERANCE = {np.float32: 1e-4, np.float64: 1e-7, np.complex64: 1e-4, np.complex128: 1e-7}


class NotCompared(Exception):
    """A sample whose arguments ember cannot be given (a generator, a sparse layout)."""


def key(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def not_compared(name: str) -> str | None:
    if name in NOT_COMPARED:
        return NOT_COMPARED[name]
    return next((why for p, why in NOT_COMPARED_PREFIXES.items() if name.startswith(p)), None)


def to_ember(v, torch):
    """A sample's argument as ember's: tensors copied (requires_grad kept), torch's dtypes,
    sizes and memory formats by name."""
    if isinstance(v, torch.Tensor):
        if v.layout != torch.strided:
            raise NotCompared("layout")
        name = str(v.dtype).split(".")[-1]
        if v.dtype in (torch.bfloat16, torch.float16):
            t = ember.tensor(v.detach().float().numpy()).to(getattr(ember, name))
        else:
            t = ember.tensor(v.detach().resolve_conj().resolve_neg().numpy().copy())
        return t.requires_grad_(True) if v.requires_grad else t
    if isinstance(v, (torch.dtype, torch.memory_format, torch.layout)):
        return getattr(ember, str(v).split(".")[-1])
    if isinstance(v, torch.device):
        return "cpu"
    if isinstance(v, torch.Size):
        return tuple(v)
    if isinstance(v, torch.Generator):
        raise NotCompared("generator")
    if isinstance(v, (list, tuple)):
        items = [to_ember(x, torch) for x in v]
        return type(v)(items) if type(v) in (list, tuple) else tuple(items)
    if isinstance(v, dict):
        return {k: to_ember(x, torch) for k, x in v.items()}
    if callable(v) and getattr(v, "__module__", "").startswith("torch"):
        raise NotCompared("a torch callable as an argument")
    return v


def arrays(v, torch) -> list:
    """Every tensor and number of a result, flattened, as NumPy arrays."""
    if isinstance(v, torch.Tensor):
        v = v.detach().resolve_conj().resolve_neg()
        return [v.float().numpy() if v.dtype in (torch.bfloat16, torch.float16) else v.numpy()]
    if isinstance(v, ember.Tensor):
        a = v.detach().numpy()
        return [a.astype(np.float32) if a.dtype.name in ("bfloat16", "float16") else a]
    if isinstance(v, (list, tuple)):
        return [a for e in v for a in arrays(e, torch)]
    if isinstance(v, (bool, int, float, complex, np.number)):
        return [np.asarray(v)]
    if v is None:
        return []
    return [("?", type(v).__name__)]


def resolve(op, torch):
    """ember's function for an OpInfo, or None."""
    fn = op.op
    own = getattr(fn, "__module__", "") or ""
    if isinstance(fn, types.FunctionType) and (
        own.startswith("torch.testing") or fn.__name__ == "<lambda>"
    ):
        return _rebound(fn)
    obj = ember
    for part in op.name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            break
    if obj is not None and callable(obj):
        return obj
    if op.method_variant is not None and getattr(op.method_variant, "__name__", None):
        name = op.method_variant.__name__
        return lambda x, *a, **k: getattr(x, name)(*a, **k)
    return None


def _rebound(fn):
    """A function of torch's test suite with ``torch`` and ``F`` meaning ember's."""
    names = dict(fn.__globals__, torch=ember, F=ember.nn.functional)
    return types.FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__, fn.__closure__)


# Matrix functions are accurate normwise, not entry by entry: scaling and squaring sums terms as
# large as the result's largest entries, so each entry carries a few ulps of those (two float32
# algorithms, SciPy's expm and PyTorch's Taylor one, each about 1e-6 of the largest entry from the
# float64 exponential, differ by 1e-4 of a small entry of a large exponential, how much depending
# on the CPU's GEMM kernels): their results are compared against each matrix's largest entry
NORMWISE = frozenset({"matrix_exp", "linalg.matrix_exp"})


def differs(want: np.ndarray, got, normwise: bool = False) -> str | None:
    """How ember's array differs from PyTorch's, or None; ``normwise``: each entry within the
    tolerance of its matrix's largest entry (the last two axes)."""
    if isinstance(want, tuple) or isinstance(got, tuple):
        return None if want == got else f"results {want} vs {got}"
    if want.shape != got.shape:
        return f"shape {want.shape} vs {got.shape}"
    if want.dtype != got.dtype:
        return f"dtype {want.dtype} vs {got.dtype}"
    if want.dtype.kind in "biu":
        return None if np.array_equal(want, got) else "values"
    tol = TOLERANCE.get(want.dtype.type, 1e-2)
    if normwise and want.ndim >= 2 and want.size and np.array_equal(
        np.isnan(want), np.isnan(got)
    ):
        with np.errstate(invalid="ignore"):
            largest = np.abs(want).max(axis=(-2, -1), keepdims=True)
            error = np.abs(want.astype(np.complex128) - got.astype(np.complex128))
            if np.all((error <= tol * (largest + 1)) | np.isnan(want)):
                return None
    if np.allclose(want, got, rtol=tol, atol=tol, equal_nan=True):
        return None
    d = np.abs(want.astype(np.complex128) - got.astype(np.complex128))
    d = d[np.isfinite(d)]
    return f"values differ by {d.max() if d.size else 'non-finite'}"


def _phase_normalized(v, lib):
    """Eigenvector columns ``v`` (..., n, k) each divided by the phase of its largest element
    (differentiably, in ``lib``: torch or ember)."""
    if v.shape[-2] == 0:
        return v
    big = lib.argmax(v.abs(), dim=-2, keepdim=True)
    p = lib.gather(v, -2, big)
    return v * (p.conj() / p.abs())


def _normalized(name, out, lib):
    positions = EIGENVECTORS.get(name)
    if not positions:
        return out
    return tuple(_phase_normalized(o, lib) if i in positions else o for i, o in enumerate(out))


def _random(op, s) -> bool:
    drops = DROPOUT.get(op.name)
    return op.name in RANDOM or key(op) in RANDOM or bool(drops and drops(s))


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def run_sample(name, op, fn, s, i, grad, torch) -> str | None:
    """One sample's difference (None: agrees or not comparable)."""
    try:
        ein = to_ember(s.input, torch)
        eargs = to_ember(list(s.args), torch)
        ekw = to_ember(dict(s.kwargs), torch)
    except NotCompared:
        return None
    try:
        torch.manual_seed(0)
        want = op(s.input, *s.args, **s.kwargs)
    except Exception:
        return None  # (PyTorch refuses the sample: nothing to compare)
    try:
        ember.manual_seed(0)
        got = fn(ein, *eargs, **ekw)
    except Exception as e:
        return f"ember {type(e).__name__}: {str(e).splitlines()[0][:160]}"
    want, got = _normalized(name, want, torch), _normalized(name, got, ember)
    fw, fg = arrays(want, torch), arrays(got, torch)
    if len(fw) != len(fg):
        return f"{len(fw)} results vs {len(fg)}"
    for a, b in zip(fw, fg):
        if _random(op, s):
            bad = None if a.shape == b.shape and a.dtype == b.dtype else f"{a.shape} vs {b.shape}"
        else:
            bad = differs(a, b, normwise=name in NORMWISE)
        if bad:
            return bad
    if grad and not _random(op, s):
        return _gradient_difference(want, got, s, ein, eargs, i, torch)
    return None


def _gradient_difference(want, got, s, ein, eargs, i, torch) -> str | None:
    """How the inputs' gradients of a random projection of the outputs differ, or None."""
    outs_t, outs_e = _outputs(want), _outputs(got)
    if len(outs_t) != len(outs_e):
        return None  # (told apart by the values' comparison)
    pairs = [
        (t, e)
        for t, e in zip(outs_t, outs_e)
        if isinstance(t, torch.Tensor) and t.requires_grad and isinstance(e, ember.Tensor)
    ]
    leaves_t = [t for t in [s.input, *s.args] if isinstance(t, torch.Tensor) and t.requires_grad]
    leaves_e = [t for t in [ein, *eargs] if isinstance(t, ember.Tensor) and t.requires_grad]
    if not pairs or not leaves_t or len(leaves_t) != len(leaves_e):
        return None
    rng = np.random.default_rng(i)
    cots = [rng.standard_normal(tuple(t.shape)) for t, _ in pairs]
    try:
        loss = sum((t * torch.tensor(c).to(t.dtype)).real.sum() for (t, _), c in zip(pairs, cots))
        want_g = torch.autograd.grad(loss, leaves_t, allow_unused=True)
    except Exception:
        return None  # (PyTorch has no derivative here)
    # an ember result that does not require grad is a constant: its term adds nothing
    terms = [(e * ember.tensor(c).to(e.dtype)).real.sum() for (_, e), c in zip(pairs, cots)]
    terms = [t for t in terms if t.requires_grad]
    if not terms:
        got_g = [None] * len(leaves_e)
    else:
        try:
            got_g = ember.autograd.grad(sum(terms), leaves_e, allow_unused=True)
        except Exception as e:
            return f"gradient: ember {type(e).__name__}: {str(e).splitlines()[0][:140]}"
    for t, a, b in zip(leaves_t, want_g, got_g):
        # (no gradient and a zero one are the same derivative)
        a = (
            np.zeros(tuple(t.shape), arrays(t, torch)[0].dtype)
            if a is None
            else _torch_array(a, torch)
        )
        b = np.zeros_like(a) if b is None else arrays(b, torch)[0]
        bad = differs(a, b)
        if bad:
            return "gradient " + bad
    return None


def _torch_array(t, torch) -> np.ndarray:
    if t._is_zerotensor():  # (PyTorch's symbolic zeros have no data)
        return np.zeros(tuple(t.shape), arrays(torch.empty((), dtype=t.dtype), torch)[0].dtype)
    return arrays(t, torch)[0]


def run_op(op, dtype, grad: bool, torch, max_samples: int) -> str:
    """``"ok"``, or the first difference of one OpInfo's first ``max_samples`` samples."""
    name = key(op)
    fn = resolve(op, torch)
    if fn is None:
        return "missing in ember"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = op.sample_inputs("cpu", dtype, requires_grad=grad)
        for i, s in enumerate(samples):
            if i >= max_samples:
                break
            bad = run_sample(name, op, fn, s, i, grad, torch)
            if bad:
                return f"sample {i}: {bad}"
    return "ok"


def load_op_db(monkeypatch):
    """PyTorch's op_db, its samples made without looking for the unittest test calling them
    (``extract_test_fn``, an ``inspect.stack()`` per sample generator: a tenth of a second
    under pytest's deep stacks and many modules, for a unittest test that is not there)."""
    import torch
    from torch.testing._internal import common_utils
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.opinfo import core

    # importing PyTorch's testing package freezes torch.backends' flags (disable_global_flags),
    # which a later test's PyTorch program in this process sets (cudnn.benchmark): unfreeze
    torch.backends.flags_frozen.__globals__["__allow_nonbracketed_mutation_flag"] = True

    for module in (common_utils, core):
        monkeypatch.setattr(module, "extract_test_fn", lambda: None)
    return op_db


def selected(op_db, dtype, names=None):
    """The OpInfos compared for ``dtype``: those PyTorch supports it for, less NOT_COMPARED."""
    return [
        op
        for op in op_db
        if dtype in op.supported_dtypes("cpu")
        and not not_compared(key(op))
        and (names is None or key(op) in names or op.name in names)
    ]


def main(argv) -> None:
    import collections
    import signal

    import pytest
    import torch

    dtype = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64,
             "c64": torch.complex64, "bool": torch.bool}[argv[0]]  # fmt: skip
    grad = "--grad" in argv
    rest = [a for a in argv[1:] if a != "--grad"]
    names = set(rest[0].split(",")) if rest else None
    limit = 12

    def alarm(*_):
        raise TimeoutError

    signal.signal(signal.SIGALRM, alarm)
    counts = collections.Counter()
    with pytest.MonkeyPatch.context() as monkeypatch:
        report(load_op_db(monkeypatch), dtype, grad, names, limit, counts)
    print(dict(counts))


def report(op_db, dtype, grad, names, limit, counts) -> None:
    """Prints each compared OpInfo's difference (a minute at most each), counting outcomes."""
    import signal

    import torch

    for op in selected(op_db, dtype, names):
        signal.alarm(60)
        try:
            outcome = run_op(op, dtype, grad, torch, limit)
        except TimeoutError:
            outcome = "timeout"
        except Exception as e:
            outcome = f"harness {type(e).__name__}: {e}"
        finally:
            signal.alarm(0)
        counts["ok" if outcome == "ok" else "bad"] += 1
        if outcome != "ok":
            print(f"{key(op)}: {outcome}", flush=True)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
