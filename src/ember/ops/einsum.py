"""Einstein summation: the ``einsum`` primitive and its public function.

The public `einsum` accepts NumPy/PyTorch equations (implicit output, ``...``, spaces, size-1
broadcasting) and rewrites each call into a *canonical* equation for the primitive: explicit
output, no ellipsis (its dimensions get letters of their own), letters renamed in order of first
appearance (``"ij,jk->ik"`` and ``"ab,bc->ac"`` are the same op), and operands' broadcast size-1
dimensions squeezed away. The primitive's shape rule therefore only checks that every letter has
one size.

The VJP of each operand is one more einsum of the output gradient with the other operands.
Letters that the operand repeats (a diagonal, ``"ii->i"``) are renamed apart and tied by identity
matrices; letters that only that operand has (summed out, ``"ij->"``) are broadcast back.

The kernel contracts the operands pair by pair in np.einsum_path's order (cached per equation
and shapes), each pair with rows, columns and a sum as one batched product of contiguous
operands (`_contracted`: np.matmul in the NumPy kernel, ember's GEMM in the fast rule), a
product of vectors by np.einsum's own loop; np.einsum contracts a pair that shares a batch
label in an unblocked loop. An equation that repeats a letter within a term (a diagonal) is
np.einsum's whole.
"""

from __future__ import annotations

import functools
import string
from typing import NamedTuple

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, ArgumentTypeError, ShapeError
from ..types import TensorType
from . import _torch_flops
from . import api as E
from ._matmul_kernels import matmul_fast
from ._registry import Cost, OpDef, apply, export, register
from ._rules import Autocast, Complex
from ._util import fmt_shape, half_precision, io_bytes, require_same_dtype, value_bytes
from .promotion import promote

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
    terms, out = _split(equation)
    if any(len(set(t)) != len(t) for t in terms):  # (a diagonal: NumPy's own loops)
        path = _path(equation, tuple(a.shape for a in operands))
        return np.einsum(equation, *operands, optimize=path)
    path = _path(equation, _shapes(operands))
    return _contracted(list(operands), list(terms), out, path, np.matmul)


def _einsum_fast(*operands, equation):
    """The kernel's pairwise contractions with each product on ember's GEMM (`matmul_fast`:
    no BLAS threads left spinning; NumPy's batched matmul on a loaded machine ran 30x its
    single-threaded time), for two or more float32/float64 operands without a repeated label;
    None elsewhere."""
    terms, out = _split(equation)
    if len(operands) < 2 or operands[0].dtype not in _WIDE:
        return None
    if any(len(set(t)) != len(t) for t in terms):
        return None
    path = _path(equation, _shapes(operands))
    return _contracted(list(operands), list(terms), out, path, _gemm)


_WIDE = (np.dtype(np.float32), np.dtype(np.float64))


def _gemm(a, b):
    result = matmul_fast(a, b)
    return np.matmul(a, b) if result is None else result


def _shapes(operands) -> tuple:
    return tuple(a.shape for a in operands)


class _Pair(NamedTuple):
    """One contraction of `_contracted`: operands ``j`` and ``i`` (positions in the current
    list; i > j, both removed, the product appended), their terms after summing out labels
    nothing else reads, the labels of the batched product, and whether it is a GEMM."""

    i: int
    j: int | None
    ta: str
    tb: str
    batch: list
    left: list
    inner: list
    right: list
    gemm: bool

    @property
    def kept(self) -> str:
        return "".join(self.batch + self.left + self.right)


def _pairs(terms: list, out: str, path, sizes: dict) -> list:
    """The pairs of `_contracted` for these terms (letters distinct within each), in
    ``path``'s order (np.einsum_path's), and the last term left."""
    terms = list(terms)
    pairs = []
    for i, j in _pairwise(path, len(terms)):
        if j is None:  # one operand: the labels nothing else reads summed out
            ta = terms.pop(i)
            later = set(out).union(*terms)
            kept = [ch for ch in ta if ch in later]
            pairs.append(_Pair(i, None, ta, "", kept, [], [], [], False))
            terms.append(pairs[-1].kept)
            continue
        tb, ta = terms.pop(i), terms.pop(j)
        later = set(out).union(*terms)
        ta = "".join(ch for ch in ta if ch in later or ch in tb)
        tb = "".join(ch for ch in tb if ch in later or ch in ta)
        batch = [ch for ch in ta if ch in tb and ch in later]
        inner = [ch for ch in ta if ch in tb and ch not in later]
        left = [ch for ch in ta if ch not in tb]
        right = [ch for ch in tb if ch not in ta]
        # products of vectors (a dot per batch, a matrix by a vector, an outer product) run
        # NumPy's own loop: a GEMM call per dot product costs more than the dot
        gemm = bool(inner) and _count(left, sizes) > 1 and _count(right, sizes) > 1
        pairs.append(_Pair(i, j, ta, tb, batch, left, inner, right, gemm))
        terms.append(pairs[-1].kept)
    return pairs, terms[0]


def _pairwise(path, n: int):
    """np.einsum_path's contractions (tuples of positions in a list from which they are
    removed and to whose end their result is appended) as steps of one or two operands:
    ``(i, j)`` with i > j, or ``(i, None)``."""
    for positions in path[1:]:
        order = sorted(positions, reverse=True)
        if len(order) == 1:
            yield order[0], None
        else:
            yield order[0], order[1]
            for p in order[2:]:  # (the result so far, now last, with the next operand)
                yield n - len(order) + 1, p
        n -= len(order) - 1


def _count(labels, sizes: dict) -> int:
    return int(np.prod([sizes[ch] for ch in labels], dtype=np.int64))


def _contracted(arrays: list, terms: list, out: str, path, matmul) -> np.ndarray:
    """The operands contracted pair by pair in ``path``'s order, each pair a batched product
    ``matmul(lhs, rhs)`` of contiguous operands (GEMMs) where it has rows, columns and a sum,
    then the last term permuted (and summed) to ``out``. np.einsum's own contraction of a
    pair that shares a batch label runs an unblocked loop (a 4x8x256x64 attention-score
    product: 200x a GEMM's time), as does np.matmul of transposed batched operands."""
    sizes = {ch: n for t, a in zip(terms, arrays) for ch, n in zip(t, a.shape)}
    pairs, last = _pairs(terms, out, path, sizes)
    arrays = list(arrays)
    terms = list(terms)
    for p in pairs:
        if p.j is None:
            arrays.append(_summed_alone(arrays.pop(p.i), terms.pop(p.i), p.kept)[0])
            terms.append(p.kept)
            continue
        b, tb = _summed_alone(arrays.pop(p.i), terms.pop(p.i), p.tb)
        a, ta = _summed_alone(arrays.pop(p.j), terms.pop(p.j), p.ta)
        if p.gemm:
            lhs = _permuted(a, ta, p.batch + p.left + p.inner)
            rhs = _permuted(b, tb, p.batch + p.inner + p.right)
            lhs = lhs.reshape(_count(p.batch, sizes), _count(p.left, sizes), -1)
            rhs = rhs.reshape(_count(p.batch, sizes), -1, _count(p.right, sizes))
            product = matmul(lhs, rhs).reshape([sizes[ch] for ch in p.kept])
        else:
            product = np.einsum(f"{ta},{tb}->{p.kept}", a, b)
        arrays.append(product)
        terms.append(p.kept)
    (x,) = arrays
    if last == out and x.flags.c_contiguous and pairs:  # (the last product is the result)
        return x
    result = np.einsum(f"{last}->{out}", x)
    if np.may_share_memory(result, x) or not result.flags.c_contiguous:
        return result.copy()
    return result


def _summed_alone(x, term: str, wanted: str):
    """``x`` with the labels not in ``wanted`` (read by nothing else) summed out, and its
    term (``wanted``)."""
    gone = tuple(k for k, ch in enumerate(term) if ch not in wanted)
    if not gone:
        return x, term
    return x.sum(axis=gone), wanted


def _permuted(x, term: str, order: list) -> np.ndarray:
    """``x`` with its axes in ``order``'s labels, C-contiguous (BLAS reads it in place)."""
    return np.ascontiguousarray(x.transpose([term.index(ch) for ch in order]))


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
    """`_contracted`'s temporaries beyond the result, at their peak over the pairs: the
    intermediate products alive, each GEMM's operands copied where their order is not the
    product's, and the product (unless it is the result itself); half precision adds the
    float32 copies of the operands and the float32 result, alive while it is rounded."""
    out = node.outputs[0]
    half = half_precision(out)
    itemsize = 4 if half else out.dtype.itemsize
    terms, result = _split(node.attrs["equation"])
    shapes = [tuple(v.shape) for v in node.inputs]
    extra = 2 * sum(value_bytes(v) for v in node.inputs) + 2 * value_bytes(out) if half else 0
    if not all(isinstance(d, int) for s in shapes for d in s):
        return extra  # (symbolic sizes: the pairs' sizes are not numbers)
    if len(terms) < 2 or any(len(set(t)) != len(t) for t in terms):
        return extra
    sizes = {ch: n for t, s in zip(terms, shapes) for ch, n in zip(t, s)}
    pairs, last = _pairs(terms, result, _path(node.attrs["equation"], tuple(shapes)), sizes)
    live = [None] * len(terms)  # (element counts of the intermediates; None: an operand)
    peak = 0
    for k, p in enumerate(pairs):
        if p.j is None:
            a = live.pop(p.i)
            n = _count(p.kept, sizes)
            peak = max(peak, sum(x for x in live if x) + (a or 0) + n)
            live.append(n)
            continue
        b, a = live.pop(p.i), live.pop(p.j)
        step = sum(n for n in live if n)
        if p.gemm:
            if p.ta != "".join(p.batch + p.left + p.inner):
                step += _count(p.ta, sizes)
            if p.tb != "".join(p.batch + p.inner + p.right):
                step += _count(p.tb, sizes)
        final = k == len(pairs) - 1 and p.kept == result
        n = _count(p.kept, sizes)
        peak = max(peak, step + (0 if final else n) + (a or 0) + (b or 0))
        live.append(n)
    return peak * itemsize + extra


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
        fast=_einsum_fast,
        vjp=_einsum_vjp,
        cost=_einsum_cost,
        torch_flops=_torch_flops.einsum,
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
