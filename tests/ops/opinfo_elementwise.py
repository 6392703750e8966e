"""OpInfos of the elementwise functions: unary math, binary arithmetic, comparisons and
logic, where, clamp, casts (see opinfo.py)."""

import numpy as np

from .opinfo import DT, OpInfo, Sample, away_from, rng

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-300, -3.5, 2.25, 1e300])
SPECIAL_POS = np.array([np.nan, np.inf, 0.0, 1e-300, 0.5, 2.25, 1e300])


def unary_samples(
    low=-2.0, high=2.0, special=SPECIAL, kinks=None, seed=0, grad_special=True, grad_at_nan=True
):
    """(2, 3), 0-d, zero-size, strided and 3-d values in [low, high) (off ``kinks``), and the
    special values (NaN, infinities, signed zeros, tiny and huge)."""

    def make():
        r = rng(seed)

        def values(shape):
            v = r.uniform(low, high, shape)
            return v if kinks is None else away_from(v, kinks)

        return [
            Sample((values((2, 3)),), desc="(2, 3)"),
            Sample((values(()),), desc="0-d"),
            Sample((values((0, 3)),), desc="zero-size"),
            Sample((values((3, 4)),), desc="strided", strided=True),
            Sample((values((2, 1, 3)),), desc="3-d"),
            Sample(
                (special.copy(),),
                desc="special values",
                grad=grad_special,
                grad_at_nan=grad_at_nan,
            ),
        ]

    return make


def unary(name, **kw):
    sample_kw = {
        k: kw.pop(k)
        for k in ("low", "high", "special", "kinks", "grad_special", "grad_at_nan")
        if k in kw
    }
    return OpInfo(name, unary_samples(**sample_kw), **kw)


OPS = [
    unary("exp"),
    unary("log", low=0.1, high=3.0, special=SPECIAL_POS),
    unary("log1p", low=-0.9, high=3.0, special=SPECIAL_POS),
    unary("expm1"),
    unary("sqrt", low=0.1, high=3.0, special=SPECIAL_POS),
    unary("rsqrt", low=0.1, high=3.0, special=SPECIAL_POS),
    unary("reciprocal", low=0.2, high=3.0),
    unary("sin"),
    unary("cos"),
    unary("tanh"),
    unary("sigmoid", low=-30.0, high=30.0),
    unary("erf"),
    unary("neg"),
    unary("abs", kinks=(0.0,)),
    unary("sign", kinks=(0.0,)),
    # (ember's relu gradient is where(result > 0, g, 0), the form the pooling and convolution
    # epilogues fuse, so 0 at a NaN, where PyTorch's passes the gradient)
    unary("relu", kinks=(0.0,), grad_at_nan=False),
    unary("floor", low=-5.0, high=5.0, kinks=np.arange(-5, 6)),
    unary("ceil", low=-5.0, high=5.0, kinks=np.arange(-5, 6)),
    unary("trunc", low=-5.0, high=5.0, kinks=np.arange(-5, 6)),
]


def _round_samples():
    r = rng(1)
    x = away_from(r.uniform(-50, 50, (3, 4)), np.arange(-50, 51) + 0.5)
    halves = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.125, 1234.5, np.nan, np.inf])
    return [
        Sample((x,), desc="(3, 4)"),
        Sample((halves,), desc="halves to even"),
        Sample((x,), {"decimals": 2}, desc="decimals=2"),
        Sample((x,), {"decimals": -1}, desc="decimals=-1"),
        Sample((x[:0],), desc="zero-size"),
        Sample((x,), desc="strided", strided=True),
    ]


OPS.append(OpInfo("round", _round_samples))


# ---------------------------------------------------------------------------- binary

R = rng(2)
A = R.standard_normal((2, 3))
B = R.standard_normal((2, 3))


def binary_samples(lhs=(-2.0, 2.0), rhs=(-2.0, 2.0), rhs_kinks=None, lhs_kinks=None, seed=3):
    def make():
        r = rng(seed)

        def left(shape):
            v = r.uniform(*lhs, shape)
            return v if lhs_kinks is None else away_from(v, lhs_kinks)

        def right(shape):
            v = r.uniform(*rhs, shape)
            return v if rhs_kinks is None else away_from(v, rhs_kinks)

        special = np.array([np.nan, 1.0, np.inf, -np.inf, 0.0, 2.0])
        return [
            Sample((left((2, 3)), right((2, 3))), desc="same shape"),
            Sample((left((3, 1)), right((1, 4))), desc="broadcast both"),
            Sample((left((2, 3, 4)), right((4,))), desc="broadcast a row"),
            Sample((left(()), right((2, 3))), desc="0-d with (2, 3)"),
            Sample((left((2, 3)), right(())), desc="(2, 3) with 0-d"),
            Sample((left((3, 4)), right((3, 4))), desc="strided", strided=True),
            Sample((left((0, 3)), right((3,))), desc="zero-size"),
            Sample((left((2, 3)), 1.5), desc="python float"),
            Sample((left((2, 3)), 2), desc="python int"),
            Sample(
                (np.concatenate([special, special]), np.concatenate([special[::-1], special])),
                desc="special values",
                grad=False,
            ),
        ]

    return make


def binary(name, promotion=True, **kw):
    sample_kw = {k: kw.pop(k) for k in ("lhs", "rhs", "rhs_kinks", "lhs_kinks") if k in kw}
    return OpInfo(name, binary_samples(**sample_kw), promotion=promotion, **kw)


_SCALAR_OPERAND = (
    "ember.maximum/minimum accept a Python scalar (a weak operand, as in ember.add); "
    "torch.maximum/minimum require tensors"
)
OPS += [
    binary("add"),
    binary("sub"),
    binary("mul"),
    binary("div", rhs_kinks=(0.0,)),
    binary("pow", lhs=(0.2, 2.0)),
    binary(
        "maximum",
        spellings=("T", "M"),
        differences={"python float": _SCALAR_OPERAND, "python int": _SCALAR_OPERAND},
        scalars=False,
    ),
    binary(
        "minimum",
        spellings=("T", "M"),
        differences={"python float": _SCALAR_OPERAND, "python int": _SCALAR_OPERAND},
        scalars=False,
    ),
    binary(
        "floor_div",
        torch_name="floor_divide",
        grad=False,  # (PyTorch defines no gradient for floor_divide)
        rhs_kinks=(0.0,),
        lhs_kinks=np.arange(-8, 9) * 0.5,
    ),
    binary("mod", torch_name="remainder", rhs=(0.3, 2.0), lhs_kinks=np.arange(-8, 9) * 0.3),
]


def _inplace_without_torch_method(name):
    """``x.maximum_(y)`` (ember only): PyTorch's counterpart is its function written into x."""

    def call(lib, x, y):
        target = x.clone()
        if lib.name == "ember":
            return getattr(target, name + "_")(y)
        return target.copy_(getattr(lib.mod, name)(x, y))

    return call


def _same_shape_samples():
    return [s for s in binary_samples()() if s.desc in ("same shape", "broadcast a row")][:1] + [
        Sample((A, B[0]), desc="broadcast"),
        Sample((A, B), desc="strided", strided=True),
    ]


OPS += [
    OpInfo(name, _same_shape_samples, call=_inplace_without_torch_method(name), spellings=("I",))
    for name in ("maximum", "minimum")
]


def _pow_edges():
    zeros = np.array([0.0, 0.0, 0.0, 2.0, -2.0, 0.0])
    exps = np.array([0.0, 2.0, 0.5, 0.0, 3.0, -1.0])
    return [
        Sample((zeros[:5], exps[:5]), desc="0 ** 0, 0 ** 2, (-2) ** 3"),
        Sample((zeros, exps), desc="0 ** -1", grad=False),
        Sample((R.uniform(0.5, 2, (2, 3)), 3), desc="integer exponent"),
        Sample((R.uniform(-2, 2, (2, 3)), 2.0), desc="negative base, even power"),
    ]


def _ties():
    x = np.array([1.0, 2.0, 3.0, np.nan, 5.0])
    y = np.array([1.0, 0.0, 3.0, 4.0, np.nan])
    return [Sample((x, y), desc="ties and NaN")]


OPS += [
    OpInfo("pow", _pow_edges, spellings=("T",)),
    OpInfo("maximum", _ties, spellings=("T",)),
    OpInfo("minimum", _ties, spellings=("T",)),
]

for _cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
    OPS.append(binary(_cmp, grad=False))


def _bools():
    r = rng(4)
    return [
        Sample((r.standard_normal((2, 3)) > 0, r.standard_normal((2, 3)) > 0), desc="same"),
        Sample((r.standard_normal((3, 1)) > 0, r.standard_normal((4,)) > 0), desc="broadcast"),
        Sample((r.standard_normal((2, 3)), r.standard_normal((3,))), desc="floats"),
        Sample((np.zeros((0, 2), bool), np.ones((2,), bool)), desc="zero-size"),
    ]


# (no gradients: the results are bool; in place into a float tensor, PyTorch's x.logical_and_
# leaves the copy's identity gradient through the 0/1 values, ember's gives none, as eq_'s)
for _logic in ("logical_and", "logical_or", "logical_xor"):
    OPS.append(OpInfo(_logic, _bools, promotion=True, grad=False))
OPS.append(
    OpInfo("logical_not", lambda: [Sample((s.args[0],), desc=s.desc) for s in _bools()], grad=False)
)

for _test in ("isnan", "isinf", "isfinite"):
    OPS.append(unary(_test))


# ------------------------------------------------------------------------- operators


def _operator(symbol, fn, reflected=None, **kw):
    """A Python operator (the Tensor's dunder methods, from ops/_methods.py)."""
    return OpInfo(
        f"operator {symbol}",
        kw.pop("samples", binary_samples(**kw.pop("sample_kw", {}))),
        call=lambda lib, x, y: fn(x, y),
        spellings=("op",),
        promotion=kw.pop("promotion", True),
        **kw,
    )


OPS += [
    _operator("+", lambda x, y: x + y),
    _operator("-", lambda x, y: x - y),
    _operator("*", lambda x, y: x * y),
    _operator("/", lambda x, y: x / y, sample_kw={"rhs_kinks": (0.0,)}),
    _operator(
        "//",
        lambda x, y: x // y,
        grad=False,
        sample_kw={"rhs_kinks": (0.0,), "lhs_kinks": np.arange(-8, 9) * 0.5},
    ),
    _operator(
        "%", lambda x, y: x % y, sample_kw={"rhs": (0.3, 2.0), "lhs_kinks": np.arange(-8, 9) * 0.3}
    ),
    _operator("**", lambda x, y: x**y, sample_kw={"lhs": (0.2, 2.0)}),
    _operator("reflected -", lambda x, y: 2.5 - x * y),
    _operator("reflected /", lambda x, y: 3 / (x * x + y * y + 1)),
    _operator("reflected **", lambda x, y: 2.0 ** (x + y)),
    _operator("== and <", lambda x, y: (x == y, x < y, y >= x), grad=False),
    _operator("unary - and abs", lambda x, y: (-x, abs(y)), promotion=False),
    OpInfo(
        "operator & | ^ ~",
        _bools,
        call=lambda lib, x, y: (x & y, x | y, x ^ y, ~x) if x.dtype == lib.mod.bool else x,
        spellings=("op",),
    ),
]


# --------------------------------------------------------------------------- where, clamp


def _where_samples():
    r = rng(5)
    cond = r.standard_normal((2, 3)) > 0
    return [
        Sample((cond, r.standard_normal((2, 3)), r.standard_normal((2, 3))), desc="same"),
        Sample((cond, r.standard_normal((3,)), r.standard_normal((2, 1))), desc="broadcast"),
        Sample((cond, r.standard_normal((2, 3)), 0.0), desc="python float"),
        Sample((cond, 1, r.standard_normal((2, 3))), desc="python int first"),
        Sample((cond, r.standard_normal(()), r.standard_normal((2, 3))), desc="0-d"),
        Sample((cond[:0], r.standard_normal((0, 3)), 1.0), desc="zero-size"),
        Sample(
            (cond, r.standard_normal((2, 3)), r.standard_normal((2, 3))),
            desc="strided",
            strided=True,
        ),
        Sample(
            (np.array([True, False, True]), np.array([np.nan, 1.0, np.inf]), np.zeros(3)),
            desc="NaN",
        ),
    ]


def _where_method_samples():
    return [Sample((s.args[1], s.args[0], s.args[2]), desc=s.desc) for s in _where_samples()[:3]]


def _where_cond_only():
    r = rng(6)
    return [
        Sample((r.standard_normal((3, 4)) > 0,), desc="2-d"),
        Sample((np.array([0.0, 1.5, 0.0, -2.0]),), desc="floats"),
        Sample((np.zeros((0, 2), bool),), desc="zero-size"),
    ]


def _where_binary(lib, x, y):
    cond = lib.tensor(np.array([[True, False, True], [False, True, False]]), False)
    return lib.mod.where(cond, x, y)


OPS += [
    OpInfo("where", _where_samples, spellings=("T",), promotion=True, binary=_where_binary),
    OpInfo("where", _where_cond_only, spellings=("T",), grad=False),
    OpInfo("where", _where_method_samples, spellings=("M",)),
]


def _clamp_samples():
    r = rng(7)
    x = away_from(r.uniform(-2, 2, (3, 4)), (-0.5, 0.7))
    return [
        Sample((x, -0.5, 0.7), desc="both bounds"),
        Sample((x,), {"min": 0.1}, desc="min only"),
        Sample((x,), {"max": -0.1}, desc="max only"),
        Sample((x, away_from(r.uniform(-1, 1, (3, 1)), (0.0,)) * 0.3), desc="tensor lower bound"),
        Sample((x, -1.0, 1), desc="mixed bound types"),
        Sample((x, 0.5, -0.5), desc="min above max"),
        Sample((np.array([np.nan, -np.inf, np.inf, 0.0]), -1.0, 1.0), desc="NaN and inf"),
        Sample((x[:0], 0.0, 1.0), desc="zero-size"),
        Sample((x, -0.5, 0.7), desc="strided", strided=True),
    ]


OPS += [OpInfo("clip", _clamp_samples), OpInfo("clamp", _clamp_samples)]


# ------------------------------------------------------------------------------- casts


def _cast_samples():
    r = rng(8)
    x = r.uniform(-3, 3, (2, 3))
    return [Sample((x, DT(d)), desc=d) for d in ("float32", "int64", "int8", "bool", "float16")] + [
        Sample((x[:0], DT("int32")), desc="zero-size"),
        Sample((x, DT("float64")), desc="strided", strided=True),
    ]


def _to_dtype(lib, x, dtype):
    return lib.mod.cast(x, dtype) if lib.name == "ember" else x.to(dtype)


def _unary_method_samples():
    r = rng(9)
    x = r.uniform(-3, 3, (2, 3))
    return [
        Sample((x,), desc="(2, 3)"),
        Sample((np.array(x[0, 0]),), desc="0-d"),
        Sample((x,), desc="strided", strided=True),
    ]


OPS.append(OpInfo("cast", _cast_samples, call=_to_dtype, spellings=("T",)))
for _method in ("float", "double", "half", "bfloat16", "bool", "byte", "char", "short", "int"):
    OPS.append(OpInfo(_method, _unary_method_samples, spellings=("M",)))
OPS += [
    OpInfo("long", _unary_method_samples, spellings=("M",)),
    OpInfo(
        "to",
        lambda: (
            [Sample((s.args[0], s.args[1]), desc=s.desc) for s in _cast_samples()]
            + [Sample((A, "cpu"), desc="device"), Sample((A,), {"dtype": DT("float32")}, desc="kw")]
        ),
        spellings=("M",),
    ),
    OpInfo(
        "type_as",
        lambda: [
            Sample((A, np.zeros(2, np.int32)), desc="int32", nondiff=(1,)),
            Sample((A, np.zeros(2, np.float32)), desc="float32", nondiff=(1,)),
        ],
        spellings=("M",),
    ),
    OpInfo("clone", _unary_method_samples),
    OpInfo("contiguous", _unary_method_samples, spellings=("M",)),
    OpInfo(
        "stop_gradient",
        _unary_method_samples,
        # PyTorch's detach; multiplied by the input so the gradient shows what it cut
        call=lambda lib, x: (lib.mod.stop_gradient(x) if lib.name == "ember" else x.detach()) * x,
        spellings=("T",),
    ),
]


# ------------------------------------------------------------- method and in-place aliases

OPS += [
    OpInfo(
        "floor_divide",
        binary_samples(rhs_kinks=(0.0,), lhs_kinks=np.arange(-8, 9) * 0.5),
        spellings=("M", "I"),
        grad=False,
    ),
    OpInfo(
        "remainder",
        binary_samples(rhs=(0.3, 2.0), lhs_kinks=np.arange(-8, 9) * 0.3),
        spellings=("M", "I"),
    ),
    OpInfo("true_divide", binary_samples(rhs_kinks=(0.0,)), spellings=("M", "I")),
]
