"""Einstein summation: the ``einsum`` primitive and its public function.

The public `einsum` accepts NumPy/PyTorch equations (implicit output, ``...``, spaces, size-1
broadcasting) and rewrites each call into a *canonical* equation for the primitive: explicit
output, no ellipsis (its dimensions get letters of their own), letters renamed in order of first
appearance (``"ij,jk->ik"`` and ``"ab,bc->ac"`` are the same op), and operands' broadcast size-1
dimensions squeezed away. The primitive's shape rule therefore only checks that every letter has
one size.

The VJP of each operand is one more einsum of the output gradient with the other operands.
Letters that the operand repeats (a diagonal, ``"ii->i"``) are renamed apart and tied by identity
matrices; letters that only that operand has (summed out, ``"ij->"``) are broadcast back. The
kernel is ``np.einsum`` with a contraction path cached per equation and shapes, so pairwise
contractions run as BLAS GEMMs.
"""

from __future__ import annotations

import functools
import string

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, ArgumentTypeError, ShapeError
from ..types import TensorType
from . import api as E
from ._registry import Cost, OpDef, apply, export, register
from ._rules import Autocast, Complex
from ._util import fmt_shape, half_precision, io_bytes, require_same_dtype, value_bytes
from .elementwise import promote

_LETTERS = string.ascii_letters  # einsum's alphabet: 52 labels
_HALF = (dt.float16.np, dt.bfloat16.np)


def _split(equation: str) -> tuple[list[str], str]:
    lhs, _, rhs = equation.partition("->")
    return lhs.split(","), rhs


def _error(equation, shapes, why) -> ShapeError:
    listed = ", ".join(fmt_shape(s) for s in shapes)
    return ShapeError(
        f"equation {equation!r} does not fit operands of shapes {listed}: {why}", op="einsum"
    )


def _sizes(equation: str, shapes) -> dict:
    """Letter -> size for a canonical equation; raises when a letter has two sizes."""
    terms, out = _split(equation)
    if len(terms) != len(shapes):
        raise _error(equation, shapes, f"{len(terms)} terms for {len(shapes)} operands")
    sizes: dict = {}
    for term, shape in zip(terms, shapes):
        if len(term) != len(shape):
            raise _error(
                equation,
                shapes,
                f"term {term!r} has {len(term)} labels for {len(shape)} dimensions",
            )
        for ch, n in zip(term, shape):
            if sizes.setdefault(ch, n) != n:
                raise _error(equation, shapes, f"label {ch!r} has sizes {sizes[ch]} and {n}")
    for ch in out:
        if ch not in sizes:
            raise _error(equation, shapes, f"output label {ch!r} is in no operand")
    return sizes


# ------------------------------------------------------------------------------- primitive


def _einsum_infer(*operands, equation):
    dtype = require_same_dtype("einsum", *operands)
    sizes = _sizes(equation, [tuple(t.shape) for t in operands])
    return TensorType(tuple(sizes[ch] for ch in _split(equation)[1]), dtype)


@functools.lru_cache(maxsize=1024)
def _path(equation: str, shapes: tuple):
    # the contraction order depends on shapes only; stand-in arrays hold no data
    stand_ins = [np.broadcast_to(np.zeros((), np.float32), s) for s in shapes]
    return np.einsum_path(equation, *stand_ins, optimize="greedy")[0]


def _einsum_kernel(*operands, equation):
    if operands[0].dtype in _HALF:  # computed in float32, rounded once
        wide = [a.astype(np.float32) for a in operands]
        return np.asarray(_einsum_kernel(*wide, equation=equation)).astype(operands[0].dtype)
    if len(operands) == 1:
        out = np.einsum(equation, operands[0])
        if isinstance(out, np.ndarray) and np.may_share_memory(out, operands[0]):
            out = out.copy()  # NumPy returns views for transposes and diagonals; ours owns data
        return out
    path = _path(equation, tuple(a.shape for a in operands))
    return np.einsum(equation, *operands, optimize=path)


def _einsum_vjp(c, g):
    terms, out = _split(c.attrs["equation"])
    operands = c.inputs
    if c.in_types[0].dtype.is_complex:  # (products of the other operands' conjugates)
        operands = tuple(E.conj(x) for x in operands)
    grads = []
    for i, need in enumerate(c.needs_input_grad):
        grads.append(_operand_grad(i, terms, out, operands, g, c.in_types) if need else None)
    return tuple(grads)


def _operand_grad(i, terms, out, operands, g, in_types):
    used = set("".join(terms))
    fresh = (ch for ch in _LETTERS if ch not in used)
    shape = tuple(in_types[i].shape)
    # rename repeated labels of operand i apart; an identity matrix ties each copy to the first
    target, eyes, eye_terms = "", [], []
    for ch, n in zip(terms[i], shape):
        if ch in target:
            new = next(fresh, None)
            if new is None:
                raise ShapeError("too many labels to differentiate this equation", op="einsum")
            eyes.append(E.eye(n, dtype=g.dtype))
            eye_terms.append(ch + new)
            target += new
        else:
            target += ch
    other_terms = [t for j, t in enumerate(terms) if j != i]
    others = [operands[j] for j in range(len(terms)) if j != i]
    available = set(out) | set("".join(other_terms)) | set("".join(eye_terms))
    reduced = "".join(ch for ch in target if ch in available)
    grad = _canonical_apply([out] + other_terms + eye_terms, reduced, [g] + others + eyes)
    if reduced != target:  # labels only operand i had were summed out: broadcast them back
        grad = E.reshape(grad, tuple(n if ch in available else 1 for ch, n in zip(target, shape)))
        grad = E.broadcast_to(grad, shape)
    return grad


def _einsum_cost(in_types, out_types, attrs) -> Cost:
    """FLOPs of contracting the operands left to right, 2 per multiply-add (a single operand:
    one add per element it reads), so a matmul-shaped equation costs 2*M*N*K."""
    terms, out = _split(attrs["equation"])
    sizes = _sizes(attrs["equation"], [tuple(t.shape) for t in in_types])
    if len(terms) == 1:
        return Cost(
            int(np.prod([sizes[ch] for ch in set(terms[0])], dtype=np.int64)),
            io_bytes(in_types, out_types),
        )
    flops, current = 0, terms[0]
    for j in range(1, len(terms)):
        labels = sorted(set(current) | set(terms[j]))
        flops += 2 * int(np.prod([sizes[ch] for ch in labels], dtype=np.int64))
        later = set(out) | set("".join(terms[j + 1 :]))
        current = "".join(ch for ch in labels if ch in later)
    return Cost(flops, io_bytes(in_types, out_types))


def _einsum_workspace(node, layouts) -> int:
    """`_einsum_kernel`'s half-precision temporaries beyond the result: the float32 copies of
    the operands and the float32 result, alive while it is rounded (none counted in
    float32/float64)."""
    out = node.outputs[0]
    if not half_precision(out):
        return 0
    return 2 * sum(value_bytes(v) for v in node.inputs) + 2 * value_bytes(out)


def _onnx_einsum(e):
    if any(t.dtype is dt.bool_ for t in e.in_types):
        e.unsupported("on bool tensors")
    return e.node("Einsum", e.inputs, equation=e.attrs["equation"])


def _einsum_autocast(attrs):
    """PyTorch contracts two or more operands with ``bmm`` (on autocast's lower-precision
    list); one operand is a sum or a permutation, which autocast passes through."""
    return Autocast.LOWER if "," in attrs["equation"] else None


_EINSUM = register(
    OpDef(
        name="einsum",
        complex=Complex.GRADIENT,
        autocast=_einsum_autocast,
        onnx=_onnx_einsum,
        kind="linalg",
        infer=_einsum_infer,
        kernel=_einsum_kernel,
        vjp=_einsum_vjp,
        cost=_einsum_cost,
        workspace=_einsum_workspace,
        doc="einsum(*operands, equation): Einstein summation; the equation is canonical "
        "(explicit output, no ellipsis, letters in order of first appearance)",
    )
)


# --------------------------------------------------------------------------- canonical form


def _canonical_apply(terms, out, operands):
    """Apply the primitive after renaming the labels a, b, c, ... by first appearance. One
    operand whose output only reorders its labels is PyTorch's permuted view of it (so its
    contiguity, and writes through it, are PyTorch's)."""
    if len(terms) == 1 and len(set(terms[0])) == len(terms[0]) and set(out) == set(terms[0]):
        return E.permute(operands[0], tuple(terms[0].index(ch) for ch in out))
    names: dict = {}
    for ch in "".join(terms):
        if ch not in names:
            names[ch] = _LETTERS[len(names)]
    equation = ",".join("".join(names[ch] for ch in t) for t in terms)
    equation += "->" + "".join(names[ch] for ch in out)
    return apply(_EINSUM, *operands, equation=equation)


def _parse_terms(equation: str, shapes) -> tuple[list[str], str | None]:
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise _error(equation, shapes, f"{len(terms)} terms for {len(shapes)} operands")
    for t in terms + ([rhs] if arrow else []):
        body = t.replace("...", "", 1)
        if any(ch not in _LETTERS for ch in body):
            raise _error(equation, shapes, f"term {t!r} may hold only letters and one '...'")
    return terms, (rhs if arrow else None)


def _sublist_label(label) -> str:
    if label is Ellipsis:
        return "..."
    if isinstance(label, bool) or not isinstance(label, int):
        raise ArgumentTypeError(
            f"a subscript in a sublist must be an integer or Ellipsis, got {label!r}", op="einsum"
        )
    if not 0 <= label < len(_LETTERS):
        raise ArgumentError(
            f"subscript {label} in a sublist is not within the valid range [0, {len(_LETTERS)})",
            op="einsum",
        )
    return _LETTERS[(label + 26) % len(_LETTERS)]  # PyTorch's: 0..25 are 'A'..'Z'


def _from_sublists(args) -> tuple[str, list]:
    """``einsum(a, [0, 1], b, [1, 2], [0, 2])``: operands each followed by its labels (integers
    below 52, or Ellipsis), an optional last list the output's."""
    args = list(args)
    out = args.pop() if len(args) % 2 else None
    operands, terms = args[0::2], args[1::2]
    equation = ",".join("".join(_sublist_label(i) for i in t) for t in terms)
    if out is not None:
        equation += "->" + "".join(_sublist_label(i) for i in out)
    return equation, operands


def _larger(a, b):
    """The larger of two sizes of one label, one of them 1 or both equal: a symbolic size (never
    1, a batch traced with ``TensorSpec((None, ...))``) is the larger beside a 1."""
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    return b if a == 1 else a


@export
def einsum(equation: str, *operands):
    """Einstein summation, as ``torch.einsum``/``np.einsum``: ``einsum("ij,jk->ik", a, b)``,
    or in sublist form, ``einsum(a, [0, 1], b, [1, 2], [0, 2])``.
    Supports ``...`` (broadcast batch dimensions), implicit outputs, repeated labels
    (diagonals, traces), and size-1 broadcasting of a label."""
    if not isinstance(equation, str):
        equation, operands = _from_sublists((equation, *operands))
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ShapeError("einsum needs at least one operand", op="einsum")
    operands = list(promote(*operands))
    shapes = [tuple(t.shape) for t in operands]
    terms, out = _parse_terms(equation, shapes)
    used = set(equation)
    spare = [ch for ch in _LETTERS if ch not in used]

    # give the ellipsis dimensions labels of their own, right-aligned across operands
    ell_ndims = []
    for t, s in zip(terms, shapes):
        labels = len(t.replace("...", ""))
        n = len(s) - labels if "..." in t else 0
        if n < 0 or ("..." not in t and labels != len(s)):
            raise _error(equation, shapes, f"term {t!r} does not match {len(s)} dimensions")
        ell_ndims.append(n)
    width = max(ell_ndims)
    if width > len(spare):
        raise _error(equation, shapes, "too many dimensions under '...'")
    ell = "".join(spare[:width])
    terms = [t.replace("...", ell[width - n :]) for t, n in zip(terms, ell_ndims)]
    if out is None:  # implicit output: '...' then the labels used exactly once, sorted
        counts = "".join(terms)
        out = ell + "".join(
            sorted(ch for ch in set(counts) if counts.count(ch) == 1 and ch not in ell)
        )
    else:
        out = out.replace("...", ell)
    if len(set(out)) != len(out):
        raise _error(equation, shapes, f"the output {out!r} repeats a label")

    # size-1 dimensions broadcast: drop them from operands where the label is larger elsewhere
    sizes: dict = {}
    for t, s in zip(terms, shapes):
        for ch, n in zip(t, s):
            if n != 1 and sizes.get(ch, 1) not in (1, n):
                raise _error(equation, shapes, f"label {ch!r} has sizes {sizes[ch]} and {n}")
            sizes[ch] = _larger(sizes.get(ch, 1), n)
    for k, (t, s) in enumerate(zip(terms, shapes)):
        drop = [p for p, (ch, n) in enumerate(zip(t, s)) if n == 1 and sizes[ch] != 1]
        if drop:
            operands[k] = E.reshape(operands[k], tuple(n for p, n in enumerate(s) if p not in drop))
            terms[k] = "".join(ch for p, ch in enumerate(t) if p not in drop)
    for ch in out:
        if ch not in sizes:
            raise _error(equation, shapes, f"output label {ch!r} is in no operand")
    return _canonical_apply(terms, out, operands)
