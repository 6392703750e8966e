"""The op vocabulary of tests/torch_diff_fuzzing.py: each entry draws one call (its parameters
from the PyTorch operands' shapes and dtypes) that runs the same way on ``torch`` and ``ember``
through the module passed as ``T``."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class Call:
    text: str
    args: list
    fn: Callable

    def run(self, T, xs):
        return self.fn(T, *xs)


class Ctx:
    class Skip(Exception):
        pass

    def __init__(self, rng: random.Random, pool: list, wide: bool = False):
        self.rng = rng
        self.pool = pool
        # the widened profile: every dtype of WIDE_DTYPES, complex operands, 0-d tensors
        # and out-of-range integers as second operands
        self.wide = wide

    def pick(self, kinds: str | None = None, min_rank: int = 0, nonempty: bool = False):
        """A pool entry whose dtype kind is in kinds (f float, i integer, b bool, c complex;
        by default all but complex, and complex too in the wide profile)."""
        if kinds is None:
            kinds = "fibc" if self.wide else "fib"
        ok = [
            p
            for p in self.pool
            if _kind(p[0]) in kinds
            and p[0].dim() >= min_rank
            and (not nonempty or p[0].numel() > 0)
        ]
        if not ok:
            raise Ctx.Skip
        return self.rng.choice(ok)

    def dim(self, t, bad: float = 0.03) -> int:
        n = max(t.dim(), 1)
        if self.rng.random() < bad:
            return self.rng.choice([n, -n - 1])
        return self.rng.randrange(-n, n) if t.dim() else self.rng.choice([0, -1])

    def other(self, p, kinds: str | None = None):
        """A second operand for p: a scalar, a broadcastable fresh tensor or a pool entry."""
        r = self.rng.random()
        t = p[0]
        if r < 0.3:
            if self.wide and self.rng.random() < 0.5:
                return self._wide_scalar()
            return self.rng.choice([2, -3, 0.5, -1.5, True, False, 3])
        if r < 0.75:
            shape = list(t.shape)
            shape = shape[self.rng.randrange(len(shape) + 1) :] if shape else shape
            shape = [1 if self.rng.random() < 0.3 else s for s in shape]
            if self.wide:
                dtype = self.rng.choice(WIDE_DTYPES)
            else:
                dtype = self.rng.choice(["float32", "float64", "int64", "bool"])
            arr = _array(self.rng, tuple(shape), dtype)
            return Fresh(arr, dtype)
        return self.pick(kinds)

    def _wide_scalar(self):
        """A 0-d tensor of any dtype (which promotes as a scalar of its kind does), or a
        Python number that overflows the small integer types or is complex."""
        if self.rng.random() < 0.5:
            dtype = self.rng.choice(WIDE_DTYPES)
            return Fresh(_array(self.rng, (), dtype), dtype)
        return self.rng.choice([200, -129, 2**31, 1e10, 1j, -2.5 + 0.5j, 0, -1, 7])


BASE_DTYPES = ("float32", "float64", "int64", "bool")
WIDE_DTYPES = BASE_DTYPES + ("int32", "int16", "int8", "uint8", "float16", "bfloat16", "complex64")
INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8")


@dataclass
class Fresh:
    """A tensor made anew in the call on each side: its NumPy data and dtype name (bfloat16
    data is float32, rounded on each side by the same cast)."""

    arr: np.ndarray
    dtype: str

    def make(self, T, grad: bool = False):
        t = T.tensor(self.arr.copy())
        if self.dtype == "bfloat16":
            t = t.to(T.bfloat16)
        return t.requires_grad_() if grad else t


def _kind(t) -> str:
    if t.dtype.is_floating_point:
        return "f"
    if t.dtype.is_complex:
        return "c"
    return "b" if str(t.dtype).endswith("bool") else "i"


def _array(rng, shape, dtype):
    g = np.random.default_rng(rng.randrange(2**31))
    if dtype == "bool":
        return g.random(shape) < 0.5
    if dtype == "int64":
        return g.integers(-4, 5, size=shape).astype(np.int64)
    if dtype in INT_DTYPES:
        # mostly small values; a fifth anywhere in the type's range, so sums, products and
        # casts wrap around
        info = np.iinfo(dtype)
        small = g.integers(max(info.min, -4), 5, size=shape)
        big = g.integers(info.min, int(info.max) + 1, size=shape, dtype=np.int64)
        return np.where(g.random(shape) < 0.2, big, small).astype(dtype)
    if dtype == "complex64":
        return (g.standard_normal(shape) + 1j * g.standard_normal(shape)).astype(np.complex64)
    if dtype == "bfloat16":
        return g.standard_normal(shape).astype(np.float32)
    return g.standard_normal(shape).astype(dtype)


def _operand(o):
    """(text, value-maker(T) or None for a pool entry, pool entry or None)."""
    if isinstance(o, Fresh):
        arr = o.arr
        return f"tensor({o.dtype}{arr.shape})", o.make, None
    if isinstance(o, tuple):
        return o[2], None, o
    return repr(o), (lambda T: o), None


OPS: list = []
WIDE_OPS: list = []  # drawn from too in the wide profile only (OPS's seeds stay as pinned)


def op(weight: int = 1, wide: bool = False):
    def deco(fn):
        (WIDE_OPS if wide else OPS).extend([fn] * weight)
        return fn

    return deco


# --- elementwise -----------------------------------------------------------------------------

UNARY = {
    "abs": lambda T, x: x.abs(),
    "neg": lambda T, x: -x,
    "exp": lambda T, x: T.exp(x),
    "log": lambda T, x: x.log(),
    "sqrt": lambda T, x: T.sqrt(x),
    "sin": lambda T, x: x.sin(),
    "tanh": lambda T, x: T.tanh(x),
    "sigmoid": lambda T, x: x.sigmoid(),
    "relu": lambda T, x: T.relu(x),
    "floor": lambda T, x: x.floor(),
    "ceil": lambda T, x: T.ceil(x),
    "round": lambda T, x: x.round(),
    "trunc": lambda T, x: T.trunc(x),
    "sign": lambda T, x: x.sign(),
    "reciprocal": lambda T, x: x.reciprocal(),
    "rsqrt": lambda T, x: T.rsqrt(x),
    "expm1": lambda T, x: x.expm1(),
    "log1p": lambda T, x: T.log1p(x),
    "erf": lambda T, x: x.erf(),
    "square": lambda T, x: T.square(x),
    "frac": lambda T, x: x.frac(),
    "logical_not": lambda T, x: T.logical_not(x),
    "bitwise_not": lambda T, x: ~x,
    "isnan": lambda T, x: T.isnan(x),
    "float": lambda T, x: x.float(),
    "double": lambda T, x: x.double(),
    "long": lambda T, x: x.long(),
    "bool": lambda T, x: x.bool(),
    "to_f64": lambda T, x: x.to(T.float64),
    "clone": lambda T, x: x.clone(),
    "detach": lambda T, x: x.detach(),
    "nan_to_num": lambda T, x: T.nan_to_num(x, nan=0.5, posinf=2.0),
    "round2": lambda T, x: x.round(decimals=1),
    "clamp_s": lambda T, x: x.clamp(-0.5, 1),
    "clamp_min": lambda T, x: T.clamp(x, min=0.25),
    "clamp_max_i": lambda T, x: x.clamp(max=1),
    "pow_s": lambda T, x: x**2,
    "rpow": lambda T, x: 2**x,
    "pow_half": lambda T, x: x.pow(0.5),
    "rsub": lambda T, x: 1 - x,
    "rdiv": lambda T, x: 2 / x,
    "floordiv_s": lambda T, x: x // 2,
    "mod_s": lambda T, x: x % -1.5,
    "fmod_s": lambda T, x: T.fmod(x, 2),
    "softplus": lambda T, x: T.nn.functional.softplus(x),
    "gelu": lambda T, x: T.nn.functional.gelu(x),
    "leaky_relu": lambda T, x: T.nn.functional.leaky_relu(x, 0.1),
    "hardtanh": lambda T, x: T.nn.functional.hardtanh(x),
    "silu": lambda T, x: T.nn.functional.silu(x),
    "positive": lambda T, x: +x,
}


# entries only the wide profile draws (tests/torch_diff_ops_dtypes.py fills them)
WIDE_UNARY: dict = {}
WIDE_BINARY: dict = {}


@op(weight=6)
def unary(c: Ctx):
    table = {**UNARY, **WIDE_UNARY} if c.wide else UNARY
    name = c.rng.choice(sorted(table))
    p = c.pick()
    return Call(f"{name}({p[2]})", [p], table[name])


BINARY = {
    "add": lambda T, a, b: a + b,
    "sub": lambda T, a, b: T.sub(a, b),
    "mul": lambda T, a, b: a * b,
    "div": lambda T, a, b: a / b,
    "div_floor": lambda T, a, b: T.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda T, a, b: T.div(a, b, rounding_mode="trunc"),
    "floordiv": lambda T, a, b: a // b,
    "pow": lambda T, a, b: a**b,
    "pow_fn": lambda T, a, b: T.pow(a, b),
    "remainder": lambda T, a, b: T.remainder(a, b),
    "mod": lambda T, a, b: a % b,
    "fmod": lambda T, a, b: T.fmod(a, b),
    "atan2": lambda T, a, b: T.atan2(a, b),
    "maximum": lambda T, a, b: T.maximum(a, b),
    "minimum": lambda T, a, b: T.minimum(a, b),
    "eq": lambda T, a, b: a == b,
    "lt": lambda T, a, b: a < b,
    "ge": lambda T, a, b: T.ge(a, b),
    "ne": lambda T, a, b: a != b,
    "logical_and": lambda T, a, b: T.logical_and(a, b),
    "logical_xor": lambda T, a, b: T.logical_xor(a, b),
    "bitwise_and": lambda T, a, b: a & b,
    "bitwise_or": lambda T, a, b: a | b,
    "xor": lambda T, a, b: a ^ b,
    "hypot": lambda T, a, b: T.hypot(a, b),
    "copysign": lambda T, a, b: T.copysign(a, b),
    "sub_alpha": lambda T, a, b: T.sub(a, b, alpha=2),
    "add_alpha": lambda T, a, b: T.add(a, b, alpha=0.5),
    "xlogy": lambda T, a, b: T.xlogy(a, b),
    "fmax": lambda T, a, b: T.fmax(a, b),
    "lerp": lambda T, a, b: T.lerp(a, b, 0.3),
    "true_divide": lambda T, a, b: T.true_divide(a, b),
}


def _binary_call(c: Ctx, name: str, fn):
    p = c.pick()
    o = c.other(p)
    if c.rng.random() < 0.5:
        text, make, entry = _operand(o)
        if entry is not None:
            return Call(f"{name}({p[2]}, {text})", [p, entry], fn)
        return Call(f"{name}({p[2]}, {text})", [p], lambda T, a: fn(T, a, make(T)))
    # the fresh or scalar operand first
    text, make, entry = _operand(o)
    if entry is not None:
        return Call(f"{name}({text}, {p[2]})", [entry, p], fn)
    if not isinstance(o, Fresh):
        # a Python scalar first works only where the op is an operator or takes it
        if name not in {"add", "sub", "mul", "div", "pow", "floordiv", "mod", "eq", "lt", "ne"}:
            return Call(f"{name}({p[2]}, {text})", [p], lambda T, a: fn(T, a, make(T)))
    return Call(f"{name}({text}, {p[2]})", [p], lambda T, a: fn(T, make(T), a))


@op(weight=8)
def binary(c: Ctx):
    table = {**BINARY, **WIDE_BINARY} if c.wide else BINARY
    name = c.rng.choice(sorted(table))
    return _binary_call(c, name, table[name])


@op(weight=2)
def where(c: Ctx):
    p = c.pick()
    q = c.other(p)
    r = c.other(p)
    t1, m1, e1 = _operand(q)
    t2, m2, e2 = _operand(r)
    args = [p] + [e for e in (e1, e2) if e is not None]

    def fn(T, a, *rest):
        rest = list(rest)
        x = rest.pop(0) if e1 is not None else m1(T)
        y = rest.pop(0) if e2 is not None else m2(T)
        return T.where(a > 0, x, y)

    return Call(f"where({p[2]} > 0, {t1}, {t2})", args, fn)


@op(weight=2)
def clamp_tensors(c: Ctx):
    p = c.pick("fi")
    q = c.pick("fi")
    which = c.rng.choice(["min", "max", "both"])

    def fn(T, a, b):
        if which == "min":
            return T.clamp(a, min=b)
        if which == "max":
            return a.clamp(max=b)
        return T.clamp(a, min=b - 1, max=b)

    return Call(f"clamp({p[2]}, {which}={q[2]})", [p, q], fn)


# --- reductions ------------------------------------------------------------------------------

REDUCTIONS = {
    "sum": lambda T, x, d, k: x.sum(d, keepdim=k),
    "mean": lambda T, x, d, k: T.mean(x, d, keepdim=k),
    "prod": lambda T, x, d, k: x.prod(d, keepdim=k),
    "amax": lambda T, x, d, k: T.amax(x, d, keepdim=k),
    "amin": lambda T, x, d, k: x.amin(d, keepdim=k),
    "max": lambda T, x, d, k: x.max(d, keepdim=k),
    "min": lambda T, x, d, k: T.min(x, d, keepdim=k),
    "argmax": lambda T, x, d, k: x.argmax(d, keepdim=k),
    "argmin": lambda T, x, d, k: T.argmin(x, d, keepdim=k),
    "std": lambda T, x, d, k: x.std(d, keepdim=k),
    "var0": lambda T, x, d, k: T.var(x, d, keepdim=k, correction=0),
    "logsumexp": lambda T, x, d, k: T.logsumexp(x, d, keepdim=k),
    "norm": lambda T, x, d, k: x.norm(dim=d, keepdim=k),
    "all": lambda T, x, d, k: x.all(d, keepdim=k),
    "any": lambda T, x, d, k: T.any(x, d, keepdim=k),
    "count_nonzero": lambda T, x, d, k: T.count_nonzero(x, d),
    "nansum": lambda T, x, d, k: T.nansum(x, d, keepdim=k),
    "median": lambda T, x, d, k: x.median(d, keepdim=k),
    "cumsum": lambda T, x, d, k: x.cumsum(d),
    "cumprod": lambda T, x, d, k: T.cumprod(x, d),
    "cummax": lambda T, x, d, k: T.cummax(x, d),
    "logcumsumexp": lambda T, x, d, k: T.logcumsumexp(x, d),
    "sum_dtype": lambda T, x, d, k: x.sum(d, dtype=T.float64),
}
TUPLE_DIMS = {"sum", "mean", "amax", "amin", "std", "var0", "logsumexp", "norm", "nansum"}


@op(weight=6)
def reduction(c: Ctx):
    name = c.rng.choice(sorted(REDUCTIONS))
    p = c.pick()
    fn = REDUCTIONS[name]
    keep = c.rng.random() < 0.4
    r = c.rng.random()
    if r < 0.2 and name in TUPLE_DIMS | {"all", "any", "prod", "max", "min", "argmax"}:
        # the whole tensor
        whole = {
            "max": lambda T, x: x.max(),
            "min": lambda T, x: T.min(x),
            "argmax": lambda T, x: x.argmax(),
            "all": lambda T, x: x.all(),
            "any": lambda T, x: T.any(x),
            "prod": lambda T, x: x.prod(),
            "std": lambda T, x: x.std(),
            "norm": lambda T, x: x.norm(),
            "logsumexp": lambda T, x: T.logsumexp(x, tuple(range(x.dim()))),
            "sum": lambda T, x: x.sum(),
            "mean": lambda T, x: x.mean(),
            "amax": lambda T, x: x.amax(),
            "amin": lambda T, x: x.amin(),
            "var0": lambda T, x: x.var(correction=0),
            "nansum": lambda T, x: x.nansum(),
        }
        return Call(f"{name}({p[2]})", [p], whole[name])
    if r < 0.4 and name in TUPLE_DIMS and p[0].dim() >= 2:
        dims = tuple(sorted(c.rng.sample(range(p[0].dim()), 2)))
        if c.rng.random() < 0.5:
            dims = (dims[0] - p[0].dim(), dims[1])
        return Call(
            f"{name}({p[2]}, {dims}, keepdim={keep})", [p], lambda T, x: fn(T, x, dims, keep)
        )
    d = c.dim(p[0])
    return Call(f"{name}({p[2]}, {d}, keepdim={keep})", [p], lambda T, x: fn(T, x, d, keep))


def _near_ties(flat) -> bool:
    """Whether two distinct floating values lie within the fuzz comparison's tolerance."""
    if not flat.dtype.is_floating_point or flat.numel() < 2:
        return False
    v = flat.double().sort().values
    v = v[~v.isnan()]
    gaps = v[1:] - v[:-1]
    return bool(((gaps > 0) & (gaps <= 2e-4 * (1 + v[1:].abs()))).any())


@op(weight=3)
def sorting(c: Ctx):
    p = c.pick("fi")
    d = c.dim(p[0])
    kind = c.rng.choice(["sort", "argsort", "topk", "kthvalue", "msort", "sort_stable"])
    desc = c.rng.random() < 0.5
    n = p[0].shape[d] if p[0].dim() and -p[0].dim() <= d < p[0].dim() else 1
    k = c.rng.randint(1, max(n, 1)) if c.rng.random() < 0.95 else n + 1
    fns = {
        "sort": lambda T, x: x.sort(d, descending=desc),
        "argsort": lambda T, x: T.argsort(x, d, descending=desc),
        "topk": lambda T, x: x.topk(k, d, largest=not desc),
        "kthvalue": lambda T, x: T.kthvalue(x, k, d),
        "msort": lambda T, x: T.msort(x),
        "sort_stable": lambda T, x: T.sort(x, dim=d, stable=True, descending=desc),
        "sort_values": lambda T, x: x.sort(d, descending=desc).values,
    }
    # ties (integers, clamped or repeated floats): the positions PyTorch picks among equal
    # values are unspecified except for the stable sort. Ties on either side: a value PyTorch
    # rounds differently in its last bit (group_norm's x * scale + shift) may tie in ember only
    if kind in ("sort", "topk", "kthvalue", "argsort"):
        flat = p[0].detach().reshape(-1)
        # (NaNs are ties too: unique keeps each NaN apart)
        if flat.unique().numel() != flat.numel() or int(flat.isnan().sum()) > 1:
            kind = "sort_stable"
    # values closer than the comparison's tolerance (PyTorch's group_norm leaves last-bit
    # differences where ember's values are equal): their order is rounding, only the sorted
    # values compare
    if kind != "msort" and _near_ties(p[0].detach().reshape(-1)):
        kind = "sort_values"
    return Call(f"{kind}({p[2]}, d={d}, k={k}, desc={desc})", [p], fns[kind])


# --- indexing --------------------------------------------------------------------------------


@op(weight=5)
def index(c: Ctx):
    p = c.pick(min_rank=1)
    t = p[0]
    n = t.shape[0]
    rng = c.rng
    kind = rng.choice(["int", "slice", "ellipsis", "none", "list", "mask", "tensor", "neg"])
    if kind == "int":
        i = rng.randint(-n, n - 1) if n and rng.random() < 0.95 else n
        key = i
    elif kind == "slice":
        a, b = rng.randint(-n - 1, n), rng.randint(-n - 1, n + 1)
        key = slice(a, b, rng.choice([1, 1, 2, 3]))
    elif kind == "ellipsis":
        m = t.shape[-1]
        key = (Ellipsis, rng.randint(-m, m - 1) if m else slice(None))
    elif kind == "none":
        key = (None, slice(None), None)
    elif kind == "list":
        key = [rng.randint(-n, n - 1) for _ in range(rng.randint(1, 3))] if n else [0]
    elif kind == "neg":
        key = (slice(None), slice(None, None, 2)) if t.dim() >= 2 else slice(1, None, 2)
    elif kind == "mask":
        m = np.random.default_rng(rng.randrange(99)).random(tuple(t.shape[:1])) < 0.5
        return Call(f"{p[2]}[mask{m.tolist()}]", [p], lambda T, x: x[T.tensor(m)])
    else:
        idx = np.random.default_rng(rng.randrange(99)).integers(-n, max(n, 1), size=(2, 2))
        if t.dim() >= 2 and rng.random() < 0.5:
            m = t.shape[1]
            j = np.random.default_rng(1).integers(0, max(m, 1), size=(2,))
            return Call(f"{p[2]}[:, {j.tolist()}]", [p], lambda T, x: x[:, T.tensor(j)])
        return Call(f"{p[2]}[{idx.tolist()}]", [p], lambda T, x: x[T.tensor(idx)])
    return Call(f"{p[2]}[{key!r}]", [p], lambda T, x: x[key])


@op(weight=3)
def gather_scatter(c: Ctx):
    p = c.pick("fi", min_rank=1)
    t = p[0]
    d = c.dim(t, bad=0.0)
    n = t.shape[d]
    g = np.random.default_rng(c.rng.randrange(999))
    kind = c.rng.choice(
        [
            "index_select",
            "gather",
            "scatter_add",
            "take",
            "narrow",
            "index_add",
            "scatter",
            "take_along_dim",
        ]
    )
    if n == 0:
        raise Ctx.Skip
    # the index's dtype: mostly int64, else one PyTorch takes or refuses per op (int32 by
    # gather/scatter/index_select/index_add, none of the others: ops/_index_dtypes.py); drawn
    # from the numpy generator, so the Python one's draws (other seeds' programs) stay as they
    # were
    idt = str(g.choice(["int64"] * 5 + ["int32", "int16", "uint8", "uint16", "uint32", "uint64"]))
    if kind == "index_select":
        idx = g.integers(0, n, size=(c.rng.randint(0, 4),))
        return Call(
            f"index_select({p[2]}, {d}, {idx.tolist()}:{idt})",
            [p],
            lambda T, x: T.index_select(x, d, T.tensor(idx, dtype=getattr(T, idt))),
        )
    if kind == "take":
        if not t.numel():
            raise Ctx.Skip
        idx = g.integers(-t.numel(), t.numel(), size=(2, 3))
        return Call(f"take({p[2]}, {idx.tolist()})", [p], lambda T, x: T.take(x, T.tensor(idx)))
    if kind == "narrow":
        s = c.rng.randint(0, n - 1)
        ln = c.rng.randint(0, n - s)
        return Call(f"narrow({p[2]}, {d}, {s}, {ln})", [p], lambda T, x: x.narrow(d, s, ln))
    shape = [max(1, s - c.rng.randint(0, 1)) for s in t.shape]
    idx = g.integers(0, n, size=tuple(shape))
    if kind == "gather":
        return Call(
            f"gather({p[2]}, {d}, {idx.tolist()}:{idt})",
            [p],
            lambda T, x: T.gather(x, d, T.tensor(idx, dtype=getattr(T, idt))),
        )
    if kind == "take_along_dim":
        return Call(
            f"take_along_dim({p[2]}, {idx.tolist()}:{idt}, {d})",
            [p],
            lambda T, x: T.take_along_dim(x, T.tensor(idx, dtype=getattr(T, idt)), d),
        )
    src = g.standard_normal(tuple(shape))
    if kind == "index_add":
        idx1 = g.integers(0, n, size=(t.shape[d],))
        return Call(
            f"index_add({p[2]}, {d}, {idx1.tolist()}:{idt}, x)",
            [p],
            lambda T, x: x.index_add(d, T.tensor(idx1, dtype=getattr(T, idt)), x * 2),
        )
    if kind == "scatter":
        return Call(
            f"scatter({p[2]}, {d}, idx:{idt}, 1.5)",
            [p],
            lambda T, x: T.scatter(x, d, T.tensor(idx, dtype=getattr(T, idt)), 1.5),
        )

    def sadd(T, x):
        s = T.tensor(src).to(x.dtype)
        if x.requires_grad:
            s = s.requires_grad_() * 1
        return x.scatter_add(d, T.tensor(idx, dtype=getattr(T, idt)), s)

    return Call(f"scatter_add({p[2]}, {d}, {idx.tolist()}:{idt}, src)", [p], sadd)


@op(weight=2)
def masked_fill(c: Ctx):
    p = c.pick()
    q = c.pick("b")
    v = c.rng.choice([0.5, -2, True, float("-inf")])
    if c.rng.random() < 0.3 and v != float("-inf"):
        # (not -inf: PyTorch refuses to put a 0-d tensor's -inf into an integer tensor,
        # which ember, not reading the value's data, does not check)
        return Call(
            f"masked_fill({p[2]}, {q[2]}, tensor({v}))",
            [p, q],
            lambda T, x, m: x.masked_fill(m, T.tensor(v)),
        )
    return Call(f"masked_fill({p[2]}, {q[2]}, {v})", [p, q], lambda T, x, m: T.masked_fill(x, m, v))


# --- shapes ----------------------------------------------------------------------------------


@op(weight=3)
def join(c: Ctx):
    p = c.pick()
    q = c.pick() if c.rng.random() < 0.3 else p
    kind = c.rng.choice(["cat", "stack", "cat_empty", "hstack"])
    d = c.dim(p[0]) if kind != "stack" else c.rng.randint(-p[0].dim() - 1, p[0].dim())
    fns = {
        "cat": lambda T, a, b: T.cat([a, b * 2], d),
        "stack": lambda T, a, b: T.stack([a, b], dim=d),
        "cat_empty": lambda T, a, b: T.cat([a, T.zeros(0)]),
        "hstack": lambda T, a, b: T.hstack([a, b]),
    }
    return Call(f"{kind}({p[2]}, {q[2]}, {d})", [p, q], fns[kind])


@op(weight=3)
def split(c: Ctx):
    p = c.pick(min_rank=1)
    d = c.dim(p[0])
    kind = c.rng.choice(["split", "split_list", "chunk", "unbind", "tensor_split"])
    n = p[0].shape[d] if -p[0].dim() <= d < p[0].dim() else 1
    size = c.rng.randint(1, 3)
    sizes = [n // 2, n - n // 2] if c.rng.random() < 0.9 else [n, 1]
    fns = {
        "split": lambda T, x: x.split(size, d),
        "split_list": lambda T, x: T.split(x, sizes, dim=d),
        "chunk": lambda T, x: x.chunk(size, d),
        "unbind": lambda T, x: T.unbind(x, d),
        "tensor_split": lambda T, x: T.tensor_split(x, size, d),
    }
    return Call(f"{kind}({p[2]}, {size}/{sizes}, {d})", [p], lambda T, x: list(fns[kind](T, x)))


@op(weight=6)
def shape(c: Ctx):
    p = c.pick()
    t = p[0]
    rng = c.rng
    r = t.dim()
    perm = list(range(r))
    rng.shuffle(perm)
    kind = rng.choice(
        [
            "reshape",
            "view",
            "permute",
            "transpose",
            "expand",
            "squeeze",
            "squeeze_all",
            "unsqueeze",
            "flatten",
            "movedim",
            "t",
            "flip",
            "repeat",
            "roll",
            "contiguous_view",
            "reshape_bad",
            "expand_as",
            "tile",
            "view_noncontig",
            "unflatten",
            "swapaxes",
            "mT",
            "diagonal",
            "tril",
        ]
    )
    d = c.dim(t)
    fns = {
        "reshape": lambda T, x: x.reshape(-1),
        "view": lambda T, x: (
            x.view(*(list(x.shape[::-1]) or [1])) if x.dim() <= 1 else x.view(x.shape[0], -1)
        ),
        "permute": lambda T, x: x.permute(*perm),
        "transpose": lambda T, x: T.transpose(x, 0, -1) if x.dim() else x.t(),
        "expand": lambda T, x: x.expand(2, *x.shape),
        "squeeze": lambda T, x: x.squeeze(d),
        "squeeze_all": lambda T, x: T.squeeze(x),
        "unsqueeze": lambda T, x: x.unsqueeze(rng_d),
        "flatten": lambda T, x: T.flatten(x, min(1, max(x.dim() - 1, 0))),
        "movedim": lambda T, x: T.movedim(x, 0, -1),
        "t": lambda T, x: x.t() if x.dim() <= 2 else x.transpose(1, 2),
        "flip": lambda T, x: x.flip(d) if rng_flag else T.flip(x, tuple(range(x.dim()))),
        "repeat": lambda T, x: x.repeat(2, *([1] * x.dim())),
        "roll": lambda T, x: T.roll(x, 1, d) if x.dim() else T.roll(x, 1),
        "contiguous_view": lambda T, x: x.t().contiguous().view(-1) if x.dim() == 2 else x,
        "reshape_bad": lambda T, x: x.reshape(x.numel() + 1),
        "expand_as": lambda T, x: x[..., :1].expand_as(x) if x.dim() else x,
        "tile": lambda T, x: T.tile(x, (2,)),
        "view_noncontig": lambda T, x: x.t().reshape(-1) if x.dim() == 2 else x.flatten(),
        "unflatten": lambda T, x: x.reshape(-1).unflatten(0, (1, -1)),
        "swapaxes": lambda T, x: T.swapaxes(x, 0, -1) if x.dim() else x,
        "mT": lambda T, x: x.mT if x.dim() >= 2 else x.T,
        "diagonal": lambda T, x: T.diagonal(x, 0, 0, 1) if x.dim() >= 2 else T.diag(x),
        "tril": lambda T, x: T.tril(x, -1) if x.dim() >= 2 else x,
    }
    rng_d = rng.randint(-r - 1, r)
    rng_flag = rng.random() < 0.5
    return Call(f"{kind}({p[2]}, d={d}, perm={perm}, u={rng_d})", [p], fns[kind])


# --- products and normalizations -------------------------------------------------------------


def _numpy_dtype(t) -> str:
    """The NumPy dtype a tensor like t is made from (bfloat16's data is float32, cast)."""
    name = str(t.dtype).rsplit(".", 1)[-1]
    return "float32" if name == "bfloat16" else name


def _as(T, w, x):
    """w as a tensor of x's dtype."""
    w = T.tensor(w)
    return w if w.dtype == x.dtype else w.to(x.dtype)


@op(weight=4)
def product(c: Ctx):
    p = c.pick("f", min_rank=1)
    t = p[0]
    g = np.random.default_rng(c.rng.randrange(999))
    kind = c.rng.choice(
        [
            "matmul_vec",
            "matmul",
            "bmm",
            "einsum_ij",
            "einsum_sum",
            "mv",
            "outer",
            "dot",
            "tensordot",
            "matmul_int",
        ]
    )
    dt = _numpy_dtype(t)
    k = t.shape[-1]
    if kind == "matmul_vec":
        w = g.standard_normal((k,)).astype(dt)
        return Call(f"{p[2]} @ v{k}", [p], lambda T, x: x @ _as(T, w, x))
    if kind == "matmul":
        w = g.standard_normal((2, k, 3) if c.rng.random() < 0.3 else (k, 3)).astype(dt)
        return Call(f"matmul({p[2]}, w{w.shape})", [p], lambda T, x: T.matmul(x, _as(T, w, x)))
    if kind == "matmul_int":
        w = g.integers(0, 3, (k, 2))
        return Call(f"matmul({p[2]}, int w)", [p], lambda T, x: x @ T.tensor(w))
    if kind == "bmm":
        if t.dim() != 3:
            raise Ctx.Skip
        w = g.standard_normal((t.shape[0], k, 2)).astype(dt)
        return Call(f"bmm({p[2]}, w)", [p], lambda T, x: T.bmm(x, _as(T, w, x)))
    if kind == "einsum_ij":
        letters = "abc"[: t.dim()]
        out = letters[::-1]
        return Call(f"einsum({letters}->{out})", [p], lambda T, x: T.einsum(f"{letters}->{out}", x))
    if kind == "einsum_sum":
        letters = "abc"[: t.dim()]
        w = g.standard_normal((k, 2)).astype(dt)
        spec = f"{letters},{letters[-1]}z->{letters[0]}z"
        return Call(f"einsum({spec})", [p], lambda T, x: T.einsum(spec, x, _as(T, w, x)))
    if kind == "mv":
        w = g.standard_normal((k,)).astype(dt)
        return Call(f"mv({p[2]})", [p], lambda T, x: T.mv(x, _as(T, w, x)))
    if kind == "outer":
        return Call(f"outer({p[2]})", [p], lambda T, x: T.outer(x.reshape(-1), x.reshape(-1)))
    if kind == "dot":
        return Call(f"dot({p[2]})", [p], lambda T, x: T.dot(x, x))
    w = g.standard_normal((k, 2)).astype(dt)
    return Call(f"tensordot({p[2]})", [p], lambda T, x: T.tensordot(x, _as(T, w, x), dims=1))


@op(weight=3)
def normalize(c: Ctx):
    p = c.pick("f", min_rank=1)
    t = p[0]
    d = c.dim(t)
    g = np.random.default_rng(c.rng.randrange(999))
    dt = _numpy_dtype(t)
    kind = c.rng.choice(
        [
            "softmax",
            "log_softmax",
            "layer_norm",
            "group_norm",
            "softmax_dtype",
            "normalize",
            "dropout0",
            "cross_entropy",
        ]
    )
    F = "nn.functional"
    if kind == "softmax":
        return Call(f"softmax({p[2]}, {d})", [p], lambda T, x: T.softmax(x, d))
    if kind == "softmax_dtype":
        return Call(f"softmax({p[2]}, {d}, f64)", [p], lambda T, x: x.softmax(d, dtype=T.float64))
    if kind == "log_softmax":
        return Call(
            f"log_softmax({p[2]}, {d})", [p], lambda T, x: T.nn.functional.log_softmax(x, dim=d)
        )
    if kind == "normalize":
        return Call(
            f"normalize({p[2]}, {d})", [p], lambda T, x: T.nn.functional.normalize(x, dim=d)
        )
    if kind == "dropout0":
        return Call(f"dropout({p[2]}, 0)", [p], lambda T, x: T.nn.functional.dropout(x, 0.0))
    if kind == "cross_entropy":
        if t.dim() != 2 or t.shape[1] == 0:
            raise Ctx.Skip
        y = g.integers(0, t.shape[1], size=(t.shape[0],))
        return Call(
            f"cross_entropy({p[2]}, {y.tolist()})",
            [p],
            lambda T, x: T.nn.functional.cross_entropy(x, T.tensor(y), label_smoothing=0.1),
        )
    if kind == "layer_norm":
        k = c.rng.randint(1, t.dim())
        shape = tuple(t.shape[-k:])
        w = g.standard_normal(shape).astype(dt)
        affine = c.rng.random() < 0.5
        return Call(
            f"layer_norm({p[2]}, {shape}, affine={affine})",
            [p],
            lambda T, x: T.nn.functional.layer_norm(
                x, shape, _as(T, w, x) if affine else None, _as(T, w, x) if affine else None
            ),
        )
    if t.dim() < 2:
        raise Ctx.Skip
    ch = t.shape[1]
    groups = c.rng.choice([v for v in (1, 2, 3, 4) if ch % v == 0] or [1])
    w = g.standard_normal((ch,)).astype(dt)
    return Call(
        f"{F}.group_norm({p[2]}, {groups})",
        [p],
        lambda T, x: T.nn.functional.group_norm(x, groups, _as(T, w, x), _as(T, w, x)),
    )


# --- in place --------------------------------------------------------------------------------


@op(weight=4)
def inplace(c: Ctx):
    p = c.pick()
    o = c.other(p)
    text, make, entry = _operand(o)
    kind = c.rng.choice(
        [
            "add_",
            "mul_",
            "clamp_",
            "sub_",
            "div_",
            "view_add_",
            "view_mul_",
            "masked_fill_",
            "t_add_",
            "index_fill_",
            "pow_",
            "zero_",
            "copy_",
        ]
    )
    args = [p] + ([entry] if entry is not None else [])

    def fn(T, x, *rest):
        y = x * 1 if x.dtype != T.bool else x.clone()
        b = rest[0] if rest else make(T)
        if kind == "add_":
            y.add_(b)
        elif kind == "mul_":
            y.mul_(b)
        elif kind == "sub_":
            y.sub_(b, alpha=2)
        elif kind == "div_":
            y.div_(b)
        elif kind == "pow_":
            y.pow_(2)
        elif kind == "clamp_":
            if hasattr(b, "dim"):
                y.clamp_(max=b)
            else:
                y.clamp_(-0.5, b)
        elif kind == "view_add_":
            if y.dim() == 0:
                y.add_(b)
            else:
                y[0].add_(b if not hasattr(b, "dim") or b.dim() == 0 else b.sum())
        elif kind == "view_mul_":
            # (not reshape: whether it aliases depends on strides, which ember does not model
            # as PyTorch's elementwise results do)
            v = y.t() if y.dim() == 2 else y[..., :]
            v.mul_(2)
        elif kind == "t_add_":
            if y.dim() >= 1:
                y[..., ::2] += 1
            else:
                y += 1
        elif kind == "masked_fill_":
            y.masked_fill_(y > 0, 0.5)
        elif kind == "index_fill_":
            if y.dim() >= 1 and y.shape[0]:
                y.index_fill_(0, T.tensor([0]), -1)
        elif kind == "zero_":
            y[..., :1].zero_() if y.dim() else y.zero_()
        elif kind == "copy_":
            y.copy_(b)
        return y

    return Call(f"{kind}({p[2]}, {text})", args, fn)


@op(weight=1)
def item_like(c: Ctx):
    p = c.pick()
    kind = c.rng.choice(["numel", "dim", "size", "is_fp", "eq_all"])
    fns = {
        "numel": lambda T, x: x.numel(),
        "dim": lambda T, x: x.dim(),
        "size": lambda T, x: x.size(-1) if x.dim() else x.numel(),
        "is_fp": lambda T, x: T.is_floating_point(x),
        "eq_all": lambda T, x: T.equal(x, x.clone()),
    }
    return Call(f"{kind}({p[2]})", [p], fns[kind])
