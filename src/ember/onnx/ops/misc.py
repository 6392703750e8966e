"""The remaining ONNX operators: bitwise (BitShift, BitwiseAnd/Or/Xor/Not, BitCast), Det, the
random operators (RandomUniform/Normal and their Like forms, Bernoulli, Multinomial), the
string operators (StringConcat, StringSplit, StringNormalizer, RegexFullMatch) and, of the
ai.onnx.ml domain, Binarizer, ArrayFeatureExtractor, LabelEncoder and TreeEnsemble (its trees
walked level by level in ember's ops, every row and tree at once, so it captures).

Bitwise ops on ember's integer types use ember's bitwise ops (so they capture); uint16/32/64
are computed in NumPy from the data (see elementwise.py's `numpy_op`). BitCast reinterprets
bytes in NumPy (ember has no dtype view), and the string ops work on NumPy object arrays: both
need the data, so a captured model with them runs eagerly.

A random operator with a ``seed`` attribute draws from its own `ember.Generator` seeded from it
once per loaded model, so two loads of a model draw the same sequence (each call draws anew,
as onnxruntime's kernels do); without a seed it draws from ember's default generator.
"""

from __future__ import annotations

import re
import weakref

import numpy as np

from ...random import Generator
from .._convert import converter, ember_dtype, supported_dtype
from ._common import E, dtype_np, np_dtype
from .elementwise import lacks_dtype, numpy_op

# ---------------------------------------------------------------------------------------------
# bitwise


def _np_shift(left: bool):
    def shift(x, y):
        bits = x.dtype.itemsize * 8
        inside = (y >= 0) & (y < bits)
        amount = np.where(inside, y, 0).astype(x.dtype)
        out = np.left_shift(x, amount) if left else np.right_shift(x, amount)
        fill = np.zeros((), x.dtype)
        if not left and x.dtype.kind == "i":
            fill = np.where(x < 0, np.array(-1, x.dtype), fill)
        return np.where(inside, out, fill).astype(x.dtype)

    return shift


@converter("BitShift", 11)
def _bitshift(ctx, x, y):
    direction = ctx.attr("direction")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.error(f"direction must be LEFT or RIGHT, got {direction!r}")
    left = direction == "LEFT"
    if lacks_dtype(x, y):
        return numpy_op(ctx, _np_shift(left), x, y, like=0)
    fn = E.bitwise_left_shift if left else E.bitwise_right_shift
    return fn(ctx.tensor(x), ctx.tensor(y))


def _bitwise(fn, np_fn):
    def convert(ctx, *xs):
        if lacks_dtype(*xs):
            return numpy_op(ctx, np_fn, *xs, like=0)
        return fn(*(ctx.tensor(x) for x in xs))

    return convert


converter("BitwiseAnd", 18)(_bitwise(E.bitwise_and, np.bitwise_and))
converter("BitwiseOr", 18)(_bitwise(E.bitwise_or, np.bitwise_or))
converter("BitwiseXor", 18)(_bitwise(E.bitwise_xor, np.bitwise_xor))
converter("BitwiseNot", 18)(_bitwise(E.bitwise_not, np.invert))


@converter("BitCast", 26)
def _bitcast(ctx, x):
    target = np_dtype(ctx.attr("to"), ctx.label)
    array = ctx.static(x, "BitCast's input")
    if target.kind in "OSU" or array.dtype.kind in "OSU":
        raise ctx.error("BitCast from or to strings is not defined")
    if target.itemsize != array.dtype.itemsize:
        raise ctx.error(
            f"BitCast needs types of one width: {array.dtype.name} ({array.dtype.itemsize * 8} "
            f"bits) to {target.name} ({target.itemsize * 8} bits)"
        )
    return np.ascontiguousarray(array).view(target).reshape(array.shape)


# ---------------------------------------------------------------------------------------------
# linear algebra


@converter("Det", 11)
def _det(ctx, x):
    x = ctx.tensor(x)
    if len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
        raise ctx.error(f"Det needs square matrices [..., M, M], got shape {tuple(x.shape)}")
    return E.det(x)


# ---------------------------------------------------------------------------------------------
# random

_GENERATORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _generator(ctx):
    """The node's own generator when it has a seed (made once per loaded graph), else None."""
    if not ctx.has_attr("seed"):
        return None
    per_graph = _GENERATORS.setdefault(ctx.runner, {})
    key = id(ctx.node)
    if key not in per_graph:
        # the seed is a float attribute: its bits make the integer seed (1.0 and 1.5 differ)
        seed = int(np.asarray(float(ctx.attr("seed")), np.float64).view(np.uint64))
        per_graph[key] = Generator(seed % (2**63))
    return per_graph[key]


def _float_type(ctx, code, default):
    dtype = np_dtype(code, ctx.label) if code else np.dtype(default)
    if dtype.kind != "f" and dtype.name != "bfloat16":
        raise ctx.error(f"the random values' dtype must be a float type, got {dtype.name}")
    return ember_dtype(dtype, ctx.label)


def _like_dtype(ctx, x):
    return dtype_np(x) if not ctx.has_attr("dtype") else np_dtype(ctx.attr("dtype"), ctx.label)


@converter("RandomUniform", 1, random=True)
def _random_uniform(ctx):
    dtype = _float_type(ctx, ctx.attr("dtype", 1), np.float32)
    shape = tuple(int(d) for d in ctx.attr("shape"))
    low, high = float(ctx.attr("low", 0.0)), float(ctx.attr("high", 1.0))
    return E.uniform(low, high, shape, generator=_generator(ctx), dtype=dtype)


@converter("RandomNormal", 1, random=True)
def _random_normal(ctx):
    dtype = _float_type(ctx, ctx.attr("dtype", 1), np.float32)
    shape = tuple(int(d) for d in ctx.attr("shape"))
    mean, scale = float(ctx.attr("mean", 0.0)), float(ctx.attr("scale", 1.0))
    return E.normal(mean, scale, shape, generator=_generator(ctx), dtype=dtype)


@converter("RandomUniformLike", 1, random=True)
def _random_uniform_like(ctx, x):
    dtype = _float_type(ctx, 0, _like_dtype(ctx, x))
    low, high = float(ctx.attr("low", 0.0)), float(ctx.attr("high", 1.0))
    shape = tuple(int(d) for d in x.shape)
    return E.uniform(low, high, shape, generator=_generator(ctx), dtype=dtype)


@converter("RandomNormalLike", 1, random=True)
def _random_normal_like(ctx, x):
    dtype = _float_type(ctx, 0, _like_dtype(ctx, x))
    mean, scale = float(ctx.attr("mean", 0.0)), float(ctx.attr("scale", 1.0))
    shape = tuple(int(d) for d in x.shape)
    return E.normal(mean, scale, shape, generator=_generator(ctx), dtype=dtype)


@converter("Bernoulli", 15, random=True)
def _bernoulli(ctx, p):
    p = ctx.tensor(p)
    out = E.bernoulli(p, generator=_generator(ctx))
    target = np_dtype(ctx.attr("dtype"), ctx.label) if ctx.has_attr("dtype") else dtype_np(p)
    if not supported_dtype(target):  # (uint16/32/64: the 0/1 draws in NumPy's type)
        return ctx.static(out, "the draws").astype(target)
    return E.cast(out, ember_dtype(target, ctx.label))


@converter("Multinomial", 7, random=True)
def _multinomial(ctx, x):
    x = ctx.tensor(x)
    if len(x.shape) != 2:
        raise ctx.error(f"Multinomial's input must be [batch_size, class_size], got {x.shape}")
    # the input holds unnormalized log-probabilities
    weights = E.softmax(E.cast(x, ember_dtype(np.float64, ctx.label)), -1)
    draws = E.multinomial(weights, int(ctx.attr("sample_size", 1)), True, generator=_generator(ctx))
    return E.cast(draws, ember_dtype(np_dtype(ctx.attr("dtype", 6), ctx.label), ctx.label))


# ---------------------------------------------------------------------------------------------
# strings (NumPy object arrays)


def _strings(ctx, value, what="the input") -> np.ndarray:
    array = ctx.static(value, what)
    if array.dtype.kind not in "OSU":
        raise ctx.error(f"{what} must be a string tensor, got {array.dtype.name}")
    return array.astype(object)


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


@converter("StringConcat", 20)
def _string_concat(ctx, x, y):
    a, b = np.broadcast_arrays(_strings(ctx, x, "X"), _strings(ctx, y, "Y"))
    out = np.empty(a.shape, dtype=object)
    for index in np.ndindex(a.shape):
        out[index] = _text(a[index]) + _text(b[index])
    return out


@converter("RegexFullMatch", 20)
def _regex_full_match(ctx, x):
    pattern = _text(ctx.attr("pattern", ""))
    try:
        compiled = re.compile(pattern)
    except re.error as err:
        raise ctx.error(f"invalid pattern {pattern!r}: {err}") from None
    array = _strings(ctx, x, "X")
    out = np.zeros(array.shape, dtype=bool)
    for index in np.ndindex(array.shape):
        out[index] = compiled.fullmatch(_text(array[index])) is not None
    return out


@converter("StringSplit", 20)
def _string_split(ctx, x):
    array = _strings(ctx, x, "X")
    delimiter = ctx.attr("delimiter", None)
    delimiter = None if delimiter is None or _text(delimiter) == "" else _text(delimiter)
    maxsplit = ctx.attr("maxsplit", None)
    maxsplit = -1 if maxsplit is None else int(maxsplit)
    parts = np.empty(array.shape, dtype=object)
    counts = np.zeros(array.shape, dtype=np.int64)
    for index in np.ndindex(array.shape):
        text = _text(array[index])
        # without a delimiter: split on runs of whitespace, leading/trailing ignored (str.split)
        pieces = text.split(delimiter, maxsplit)
        parts[index], counts[index] = pieces, len(pieces)
    width = int(counts.max(initial=0))
    out = np.full(array.shape + (width,), "", dtype=object)
    for index in np.ndindex(array.shape):
        for k, piece in enumerate(parts[index]):
            out[index + (k,)] = piece
    return out, counts


@converter("StringNormalizer", 10)
def _string_normalizer(ctx, x):
    array = _strings(ctx, x, "X")
    if array.ndim not in (1, 2) or (array.ndim == 2 and array.shape[0] != 1):
        raise ctx.error(f"StringNormalizer takes [C] or [1, C] strings, got {array.shape}")
    action = _text(ctx.attr("case_change_action", "NONE"))
    if action not in ("NONE", "LOWER", "UPPER"):
        raise ctx.error(f"case_change_action must be NONE, LOWER or UPPER, got {action!r}")
    sensitive = bool(ctx.attr("is_case_sensitive", 0))
    stopwords = [_text(w) for w in ctx.attr("stopwords", [])]
    if sensitive:
        stops = set(stopwords)
    else:
        stops = {w.casefold() for w in stopwords}
    words = []
    for value in array.reshape(-1):
        word = _text(value)
        if (word if sensitive else word.casefold()) in stops:
            continue
        if action == "LOWER":
            word = word.lower()
        elif action == "UPPER":
            word = word.upper()
        words.append(word)
    if not words:  # ONNX: everything removed leaves one empty string
        words = [""]
    out = np.array(words, dtype=object)
    return out.reshape(1, -1) if array.ndim == 2 else out


# ---------------------------------------------------------------------------------------------
# ai.onnx.ml

_ML = "ai.onnx.ml"


@converter("Binarizer", 1, domain=_ML)
def _binarizer(ctx, x):
    x = ctx.tensor(x)
    threshold = float(ctx.attr("threshold", 0.0))
    return E.where(x > threshold, E.ones_like(x), E.zeros_like(x))


@converter("ArrayFeatureExtractor", 1, domain=_ML)
def _array_feature_extractor(ctx, x, indices):
    # the indices pick along the last axis; a vector input gives one row (onnxruntime's rule)
    index = np.asarray(ctx.ints(indices, "Y"), dtype=np.int64)
    if isinstance(x, np.ndarray) and x.dtype.kind in "OSU":
        out = x[..., index]
        return out.reshape((1, index.size) if x.ndim == 1 else x.shape[:-1] + (index.size,))
    x = ctx.tensor(x)
    width = int(x.shape[-1])
    if np.any((index < 0) | (index >= width)):
        raise ctx.error(f"ArrayFeatureExtractor's indices must be in [0, {width}), got {index}")
    out = E.index_select(x, len(x.shape) - 1, E.tensor(index))
    return E.reshape(out, (1, index.size)) if len(x.shape) == 1 else out


def _label_table(ctx):
    """(keys, values, default) of a LabelEncoder, from whichever of its attribute forms the
    node uses (opset 1's classes_strings, opset 2's keys_*/values_*, opset 4's tensors)."""
    if ctx.opset < 2 or ctx.has_attr("classes_strings"):
        classes = list(ctx.attr("classes_strings", []))
        return classes, None, (ctx.attr("default_int64", -1), ctx.attr("default_string", "_Unused"))
    keys = next(
        (
            np.asarray(ctx.attr(name))
            for name in ("keys_tensor", "keys_strings", "keys_int64s", "keys_floats")
            if ctx.has_attr(name)
        ),
        None,
    )
    values, default = None, None
    for name, default_name, fallback, dtype in (
        ("values_tensor", "default_tensor", None, None),
        ("values_strings", "default_string", "_Unused", object),
        ("values_int64s", "default_int64", -1, np.int64),
        ("values_floats", "default_float", -0.0, np.float32),
    ):
        if ctx.has_attr(name):
            values = np.asarray(ctx.attr(name), dtype=dtype)
            if name == "values_tensor":
                if ctx.has_attr("default_tensor"):
                    default = np.asarray(ctx.attr("default_tensor")).reshape(-1)[0]
                elif values.dtype.kind in "OSU":
                    default = "_Unused"
                else:
                    default = -1 if values.dtype.kind in "iu" else -0.0
            else:
                default = ctx.attr(default_name, fallback)
            break
    if keys is None or values is None:
        raise ctx.error("LabelEncoder needs one keys_* and one values_* attribute")
    if keys.size != values.size:
        raise ctx.error(f"LabelEncoder has {keys.size} keys and {values.size} values")
    return list(keys.reshape(-1)), values.reshape(-1), default


def _key(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, (float, np.floating)) and np.isnan(value):
        return "nan-key"  # NaN keys match any NaN
    return value.item() if isinstance(value, np.generic) else value


@converter("LabelEncoder", 1, domain=_ML)
def _label_encoder(ctx, x):
    array = ctx.static(x, "the input")
    keys, values, default = _label_table(ctx)
    if values is None:  # opset 1: strings <-> their index in classes_strings
        default_int, default_string = default
        if array.dtype.kind in "OSU":
            table = {_key(k): i for i, k in enumerate(keys)}
            out = [table.get(_key(v), default_int) for v in array.reshape(-1)]
            return np.array(out, dtype=np.int64).reshape(array.shape)
        out = [keys[int(v)] if 0 <= int(v) < len(keys) else default_string for v in array.flat]
        return np.array(out, dtype=object).reshape(array.shape)
    table = {_key(k): v for k, v in zip(keys, values)}  # (a repeated key: the last one wins)
    out = [table.get(_key(v), default) for v in array.reshape(-1)]
    return np.array(out, dtype=values.dtype).reshape(array.shape)


def _tree_tables(ctx):
    """The TreeEnsemble's nodes and leaves as flat tables over one index space: interior nodes
    0..n-1, leaves n..n+L-1 (a leaf's children are itself), with each tree's root, and the
    deepest path (the number of steps that brings every row to its leaf)."""
    ints = lambda name: np.asarray(ctx.attr(name), dtype=np.int64)  # noqa: E731
    modes = np.asarray(ctx.attr("nodes_modes")).astype(np.int64).reshape(-1)
    n = modes.size
    feature, true_id, false_id = (
        ints("nodes_featureids"),
        ints("nodes_truenodeids"),
        ints("nodes_falsenodeids"),
    )
    true_leaf, false_leaf = ints("nodes_trueleafs"), ints("nodes_falseleafs")
    splits = np.asarray(ctx.attr("nodes_splits", np.zeros(n)), dtype=np.float64).reshape(-1)
    missing = np.zeros(n, bool)
    if ctx.has_attr("nodes_missing_value_tracks_true"):
        missing = np.asarray(ctx.attr("nodes_missing_value_tracks_true"), bool).reshape(-1)
    weights = np.asarray(ctx.attr("leaf_weights"), dtype=np.float64).reshape(-1)
    targets = ints("leaf_targetids").reshape(-1)
    leaves = weights.size
    if {a.size for a in (feature, true_id, false_id, true_leaf, false_leaf, splits)} != {n}:
        raise ctx.error("the nodes_* attributes of a TreeEnsemble differ in length")
    # set membership: each member node's values, up to the next NaN, in node order
    members = []
    if np.any(modes == 6):
        values = np.asarray(ctx.attr("membership_values"), dtype=np.float64).reshape(-1)
        groups, current = [], []
        for v in values:
            if np.isnan(v):
                groups.append(current)
                current = []
            else:
                current.append(v)
        if len(groups) < int(np.sum(modes == 6)):
            raise ctx.error("membership_values lists fewer sets than there are member nodes")
        it = iter(groups)
        members = [next(it) if m == 6 else [] for m in modes]
    width = max([len(m) for m in members] + [1])
    member_table = np.full((n + leaves, width), np.nan)
    for i, group in enumerate(members):
        member_table[i, : len(group)] = group
    pad = np.zeros(leaves, np.int64)
    child_true = np.concatenate(
        [np.where(true_leaf == 1, n + true_id, true_id), n + np.arange(leaves)]
    )
    child_false = np.concatenate(
        [np.where(false_leaf == 1, n + false_id, false_id), n + np.arange(leaves)]
    )
    if np.any(child_true >= n + leaves) or np.any(child_false >= n + leaves):
        raise ctx.error("a TreeEnsemble branch points past the nodes or leaves")
    roots = []
    for r in ints("tree_roots").reshape(-1):
        degenerate = true_leaf[r] and false_leaf[r] and true_id[r] == false_id[r]
        roots.append(n + true_id[r] if degenerate else r)
    # the depth: steps until every root's walk reaches a leaf (a cycle is an error)
    depth, frontier = 0, {int(r) for r in roots if r < n}
    while frontier:
        depth += 1
        if depth > n:
            raise ctx.error("the TreeEnsemble's nodes form a cycle")
        frontier = {int(c) for u in frontier for c in (child_true[u], child_false[u]) if c < n}
    tables = {
        "feature": np.concatenate([feature, pad]),
        "split": np.concatenate([splits, np.zeros(leaves)]),
        "mode": np.concatenate([modes, pad]),
        "missing": np.concatenate([missing, np.zeros(leaves, bool)]),
        "true": child_true,
        "false": child_false,
        "members": member_table,
    }
    return n, tables, np.asarray(roots, np.int64), depth, weights, targets


@converter("TreeEnsemble", 5, domain=_ML)
def _tree_ensemble(ctx, x):
    x = ctx.tensor(x)
    if len(x.shape) != 2:
        raise ctx.error(f"TreeEnsemble's input must be [N, F], got {x.shape}")
    n, tables, roots, depth, weights, targets = _tree_tables(ctx)
    n_targets = int(ctx.attr("n_targets"))
    if targets.size and (targets.min() < 0 or targets.max() >= n_targets):
        raise ctx.error(f"leaf_targetids must be in [0, {n_targets})")
    rows = int(x.shape[0])
    f64 = ember_dtype(np.float64, ctx.label)
    data = E.cast(x, f64)
    t = {k: E.tensor(v) for k, v in tables.items()}
    # every row walks every tree at once: pos [N, trees], one level per step
    pos = E.tensor(np.broadcast_to(roots, (rows, roots.size)).copy())
    for _ in range(depth):
        value = E.gather(data, 1, E.take(t["feature"], pos))
        split = E.take(t["split"], pos)
        mode = E.take(t["mode"], pos)
        outcomes = (
            value <= split,
            value < split,
            value >= split,
            value > split,
            value == split,
            value != split,
        )
        member = E.take(
            t["members"].reshape(-1),
            E.unsqueeze(pos, -1) * int(tables["members"].shape[1])
            + E.tensor(np.arange(tables["members"].shape[1])),
        )
        go_true = E.any(member == E.unsqueeze(value, -1), -1)
        for code, outcome in enumerate(outcomes):
            go_true = E.where(mode == code, outcome, go_true)
        go_true = E.logical_or(go_true, E.logical_and(E.take(t["missing"], pos), E.isnan(value)))
        pos = E.where(go_true, E.take(t["true"], pos), E.take(t["false"], pos))
    leaf = pos - n
    weight = E.take(E.tensor(weights), leaf)  # [N, trees]
    hit = E.unsqueeze(E.take(E.tensor(targets), leaf), -1) == E.tensor(np.arange(n_targets))
    weight = E.unsqueeze(weight, -1)  # [N, trees, targets]
    aggregate = int(ctx.attr("aggregate_function", 1))
    if aggregate in (0, 1):
        out = E.sum(E.where(hit, weight, E.zeros((), dtype=f64)), 1)
        if aggregate == 0:
            out = out / float(max(roots.size, 1))
    elif aggregate in (2, 3):
        # a target no leaf of the row reaches scores 0 (onnxruntime's rule; onnx's reference
        # leaves FLT_MAX / -FLT_MAX there)
        fill = float("inf") if aggregate == 2 else float("-inf")
        masked = E.where(hit, weight, E.full((), fill, dtype=f64))
        out = E.amin(masked, 1) if aggregate == 2 else E.amax(masked, 1)
        out = E.where(E.any(hit, 1), out, E.zeros_like(out))
    else:
        raise ctx.error(f"unknown aggregate_function {aggregate}")
    return E.cast(post_transform(ctx, out, int(ctx.attr("post_transform", 0))), x.dtype)


def post_transform(ctx, scores, transform: int):
    # the spec's numbering: NONE 0, SOFTMAX 1, LOGISTIC 2, SOFTMAX_ZERO 3, PROBIT 4
    # (onnxruntime 1.32 reads 1 as LOGISTIC and 2 as SOFTMAX, its older regressor's order)
    if transform == 0:
        return scores
    if transform == 1:
        return E.softmax(scores, -1)
    if transform == 2:
        return E.sigmoid(scores)
    if transform == 3:  # softmax over the non-zero scores; zeros stay zero
        nonzero = scores != 0
        top = E.amax(E.where(nonzero, scores, E.full((), -np.inf, dtype=scores.dtype)), -1, True)
        e = E.where(nonzero, E.exp(scores - top), E.zeros_like(scores))
        total = E.sum(e, -1, True)
        return E.where(total > 0, e / E.where(total > 0, total, E.ones_like(total)), e)
    if transform == 4:
        return E.erfinv(scores * 2.0 - 1.0) * float(np.sqrt(2.0))
    raise ctx.error(f"unknown post_transform {transform}")
