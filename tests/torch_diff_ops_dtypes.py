"""The wide profile's extra vocabulary for tests/torch_diff_fuzzing.py: casts between every
dtype, shifts and bitwise ops, in-place ops whose result type must cast to the operand's
(``int_tensor += 1.5`` raises), PyTorch's promotion queries and reductions with a ``dtype``.
Importing it fills torch_diff_ops's WIDE_* tables."""

from __future__ import annotations

from tests.torch_diff_ops import (
    INT_DTYPES,
    WIDE_BINARY,
    WIDE_DTYPES,
    WIDE_UNARY,
    Call,
    Ctx,
    Fresh,
    _array,
    _kind,
    _operand,
    op,
)


def _cast_ok(x, dtype: str) -> bool:
    """Whether PyTorch defines the cast's values: a float or complex to an integer type is
    undefined behaviour in C++ outside the target's range (and for NaN and infinities)."""
    if dtype not in INT_DTYPES or _kind(x) not in "fc":
        return True
    v = x.detach()
    if v.is_complex():
        v = v.real
    v = v.double()
    lo = 0 if dtype == "uint8" else -100
    return bool(((v > lo - 1) & (v < 100)).all())


WIDE_UNARY.update(
    {
        "abs_int": lambda T, x: T.abs(x),
        "neg_int": lambda T, x: T.neg(x),
        "sign_int": lambda T, x: T.sgn(x) if x.is_complex() else T.sign(x),
        "half": lambda T, x: x.half(),
        "bf16": lambda T, x: x.to(T.bfloat16),
        "int": lambda T, x: x.int(),
        "cfloat": lambda T, x: x.to(T.complex64),
        "real": lambda T, x: T.real(x),
        "imag": lambda T, x: x.imag,
        "conj": lambda T, x: T.conj(x).resolve_conj(),
        "angle": lambda T, x: T.angle(x),
        "square_int": lambda T, x: x * x,
        "cube": lambda T, x: x**3,
        "exp2": lambda T, x: T.exp2(x),
        "signbit": lambda T, x: T.signbit(x),
        "isfinite": lambda T, x: T.isfinite(x),
        "isreal": lambda T, x: T.isreal(x),
    }
)

WIDE_BINARY.update(
    {
        "lshift": lambda T, a, b: a << b,
        "rshift": lambda T, a, b: a >> b,
        "bitwise_left_shift": lambda T, a, b: T.bitwise_left_shift(a, b),
        "floor_divide": lambda T, a, b: T.floor_divide(a, b),
        "gt": lambda T, a, b: a > b,
        "le": lambda T, a, b: T.le(a, b),
        "mul_int": lambda T, a, b: T.mul(a, b),
        "minimum_w": lambda T, a, b: T.minimum(a, b),
        "bitwise_xor": lambda T, a, b: T.bitwise_xor(a, b),
        "logical_or": lambda T, a, b: T.logical_or(a, b),
    }
)


@op(weight=4, wide=True)
def cast(c: Ctx):
    p = c.pick()
    dtype = c.rng.choice(WIDE_DTYPES)
    if not _cast_ok(p[0], dtype):
        raise Ctx.Skip
    how = c.rng.choice(["to", "type", "new_tensor_like"])
    if how == "to":
        return Call(f"{p[2]}.to({dtype})", [p], lambda T, x: x.to(getattr(T, dtype)))
    if how == "type":
        return Call(f"{p[2]}.type({dtype})", [p], lambda T, x: x.type(getattr(T, dtype)))
    return Call(
        f"zeros_like({p[2]}, {dtype}) + {p[2]}",
        [p],
        lambda T, x: T.zeros_like(x, dtype=getattr(T, dtype)).add_(x),
    )


AUGMENTED = {
    "+=": lambda y, b: y.__iadd__(b),
    "-=": lambda y, b: y.__isub__(b),
    "*=": lambda y, b: y.__imul__(b),
    "/=": lambda y, b: y.__itruediv__(b),
    "//=": lambda y, b: y.__ifloordiv__(b),
    "%=": lambda y, b: y.__imod__(b),
    "<<=": lambda y, b: y.__ilshift__(b),
    "&=": lambda y, b: y.__iand__(b),
    "|=": lambda y, b: y.__ior__(b),
}


@op(weight=4, wide=True)
def augmented(c: Ctx):
    """``y op= b`` on a copy: the result type must cast to y's dtype (PyTorch's can_cast),
    else a RuntimeError; b broadcasts to y's shape only."""
    p = c.pick()
    o = c.other(p)
    sym = c.rng.choice(sorted(AUGMENTED))
    text, make, entry = _operand(o)
    args = [p] + ([entry] if entry is not None else [])

    def fn(T, x, *rest):
        y = x.clone()
        b = rest[0] if rest else make(T)
        out = AUGMENTED[sym](y, b)
        assert out is y
        return y

    return Call(f"copy({p[2]}) {sym} {text}", args, fn)


@op(weight=2, wide=True)
def promotion(c: Ctx):
    p = c.pick()
    o = c.other(p)
    text, make, entry = _operand(o)
    args = [p] + ([entry] if entry is not None else [])
    kind = c.rng.choice(["result_type", "promote_types", "can_cast"])

    def fn(T, x, *rest):
        b = rest[0] if rest else make(T)
        if kind == "result_type":
            return _dtype_name(T.result_type(x, b))
        bd = b.dtype if hasattr(b, "dtype") else T.tensor(b).dtype
        if kind == "promote_types":
            return _dtype_name(T.promote_types(x.dtype, bd))
        return T.can_cast(x.dtype, bd)

    return Call(f"{kind}({p[2]}, {text})", args, fn)


def _dtype_name(d) -> str:
    return str(d).rsplit(".", 1)[-1]


@op(weight=3, wide=True)
def typed_reduction(c: Ctx):
    """Reductions of small integer and half-precision tensors: sums and products promote
    integers to int64, ``dtype=`` casts first (and wraps)."""
    p = c.pick()
    d = c.dim(p[0])
    dtype = c.rng.choice(WIDE_DTYPES)
    kind = c.rng.choice(["sum", "prod", "cumsum", "cumprod", "sum_dtype", "cumsum_dtype", "mean"])
    fns = {
        "sum": lambda T, x: x.sum(d),
        "prod": lambda T, x: T.prod(x, d),
        "cumsum": lambda T, x: x.cumsum(d),
        "cumprod": lambda T, x: T.cumprod(x, d),
        "sum_dtype": lambda T, x: x.sum(d, dtype=getattr(T, dtype)),
        "cumsum_dtype": lambda T, x: T.cumsum(x, d, dtype=getattr(T, dtype)),
        "mean": lambda T, x: x.mean(d, dtype=getattr(T, dtype)),
    }
    if "dtype" in kind or kind == "mean":
        if not _cast_ok(p[0], dtype):
            raise Ctx.Skip
    return Call(f"{kind}({p[2]}, {d}, {dtype})", [p], fns[kind])


@op(weight=2, wide=True)
def fresh_int_binary(c: Ctx):
    """Two integer tensors of different widths: overflow wraps in the promoted type."""
    p = c.pick("i")
    shape = tuple(p[0].shape)
    dtype = c.rng.choice(INT_DTYPES)
    other = Fresh(_array(c.rng, shape, dtype), dtype)
    kind = c.rng.choice(["add", "mul", "sub", "floordiv", "mod", "div", "pow", "and", "shift"])
    fns = {
        "add": lambda T, a, b: a + b,
        "mul": lambda T, a, b: a * b,
        "sub": lambda T, a, b: a - b,
        "floordiv": lambda T, a, b: a // T.where(b == 0, 1, b),
        "mod": lambda T, a, b: a % T.where(b == 0, 3, b),
        "div": lambda T, a, b: T.div(a, b, rounding_mode="trunc"),
        "pow": lambda T, a, b: a ** b.abs().clamp(max=3),
        "and": lambda T, a, b: a & b,
        "shift": lambda T, a, b: a >> b.abs().clamp(max=5),
    }
    return Call(
        f"{kind}({p[2]}, tensor({dtype}{shape}))",
        [p],
        lambda T, a: fns[kind](T, a, other.make(T)),
    )
