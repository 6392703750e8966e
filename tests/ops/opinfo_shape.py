"""OpInfos of the shape and indexing functions (see opinfo.py)."""

import numpy as np

from .opinfo import OpInfo, Sample, rng

R = rng(30)
X = R.standard_normal((2, 3, 4))
M = R.standard_normal((3, 4))
E0 = np.zeros((0, 3))


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


OPS = [
    OpInfo(
        "reshape",
        lambda: [
            S(X, (6, 4), desc="tuple"),
            S(X, (-1,), desc="-1"),
            S(X, (4, -1, 2), desc="inner -1"),
            S(X, (4, 6), desc="strided", strided=True),
            S(E0, (3, 0), desc="zero-size"),
            S(np.array(2.0), (1, 1), desc="0-d"),
        ],
    ),
    OpInfo(
        "view",
        lambda: [S(X, 6, 4, desc="sizes"), S(X, (-1, 2), desc="tuple"), S(E0, 0, 3, desc="empty")],
    ),
    OpInfo(
        "view_dtype",
        lambda: [
            S(X, "int64", desc="same width"),
            S(X, "float32", desc="narrower"),
            S(X, "float32/float64", desc="wider", strided=True),
        ],
        call=lambda lib, x, name: (
            x.float().view(lib.dtype("float64"))
            if name == "float32/float64"
            else x.view(lib.dtype(name))
        ),
        spellings=("M",),
        grad=False,
        dtypes=(),
    ),
    OpInfo(
        "flatten",
        lambda: [
            S(X, desc="all"),
            S(X, 1, desc="start 1"),
            S(X, 0, -2, desc="negative end"),
            S(np.array(3.0), desc="0-d"),
            S(X, 1, desc="strided", strided=True),
        ],
    ),
    OpInfo(
        "squeeze",
        lambda: [
            S(X[:1, :, None], desc="all"),
            S(X[:1, :, None], 0, desc="dim"),
            S(X[:1, :, None], -1, desc="negative dim"),
            S(X, 1, desc="a dim that is not 1"),
            S(X[:1, :, None], (0, 2), desc="tuple"),
        ],
    ),
    OpInfo(
        "unsqueeze",
        lambda: [
            S(X, 0, desc="0"),
            S(X, -1, desc="-1"),
            S(X, 2, desc="middle"),
            S(np.array(1.0), 0, desc="0-d"),
        ],
    ),
    OpInfo(
        "permute",
        lambda: [
            S(X, (2, 0, 1), desc="tuple"),
            S(X, 2, 0, 1, desc="varargs", only=("M",)),
            S(X, (-1, 0, 1), desc="negative"),
            S(X, (1, 0, 2), desc="strided", strided=True),
        ],
    ),
    OpInfo(
        "transpose",
        lambda: [
            S(X, 0, 2, desc="0, 2"),
            S(X, -1, 1, desc="negative"),
            S(M, 0, 1, desc="strided", strided=True),
        ],
    ),
    OpInfo("swapaxes", lambda: [S(X, 0, 2, desc="0, 2"), S(X, -1, 1, desc="negative")]),
    OpInfo(
        "movedim",
        lambda: [
            S(X, 0, 2, desc="int"),
            S(X, (0, 1), (2, 0), desc="tuples"),
            S(X, -1, 0, desc="negative"),
            S(X, (0, 1), (2, 0), desc="strided", strided=True),
        ],
    ),
    OpInfo(
        "flip",
        lambda: [
            S(X, (0, 2), desc="tuple"),
            S(X, (-1,), desc="negative"),
            S(E0, (0,), desc="zero-size"),
            S(M, (1,), desc="strided", strided=True),
        ],
    ),
    OpInfo(
        "broadcast_to",
        lambda: [
            S(M[0], (3, 4), desc="row"),
            S(M[:, :1], (2, 3, 4), desc="column"),
            S(np.array(2.0), (2, 2), desc="0-d"),
            S(M, (2, 3, 4), desc="strided", strided=True),
        ],
    ),
    OpInfo("expand", lambda: [S(M[:, :1], 3, 5, desc="sizes"), S(M[:, :1], (2, -1, 4), desc="-1")]),
    OpInfo("expand_as", lambda: [S(M[:1], M, desc="row")], spellings=("M",)),
    OpInfo("view_as", lambda: [S(X, X.reshape(6, 4), desc="6x4", nondiff=(1,))], spellings=("M",)),
    OpInfo(
        "broadcast_shapes",
        lambda: [
            S((3, 1), (1, 4), desc="two"),
            S(3, (2, 1), (), desc="an int and an empty shape"),
            S((2, 3), (4, 3), desc="mismatch (refused)"),
        ],
        grad=False,
        dtypes=(),
    ),
    OpInfo(
        "broadcast_tensors",
        lambda: [
            S(M, M[:1], np.array(1.0), desc="three"),
            S(M[:, :1], X[0, :, None, :], desc="two"),
        ],
    ),
]


def _cat_samples():
    return [
        S([M, M[:1]], desc="dim 0"),
        S([M, M[:, :2]], 1, desc="dim 1"),
        S([M, M[:, :2]], -1, desc="negative dim"),
        S([M, E0.reshape(0, 4)], desc="with an empty"),
        S([M.astype(np.float32), M.astype(np.float64)], desc="promotes", grad=False),
        S([M, M], 1, desc="strided", strided=True),
        S([M], desc="one tensor"),
    ]


OPS += [
    OpInfo(n, _cat_samples, torch_name="cat" if n != "concatenate" else None)
    for n in ("cat", "concat", "concatenate")
]
OPS += [
    OpInfo(
        "stack",
        lambda: [
            S([M, M * 2], desc="0"),
            S([M, M], -1, desc="-1"),
            S([np.array(1.0), np.array(2.0)], desc="0-d"),
        ],
    ),
    OpInfo(
        "split",
        lambda: [
            S(X, 2, 2, desc="size 2"),
            S(X, [1, 3], 2, desc="sections"),
            S(X, 1, desc="dim 0"),
            S(X, 3, -2, desc="negative dim"),
            S(X, 2, 2, desc="strided", strided=True),
        ],
    ),
    OpInfo(
        "chunk",
        lambda: [
            S(X, 2, 2, desc="2 chunks"),
            S(X, 3, 1, desc="even"),
            S(X, 4, -1, desc="more chunks than fit"),
        ],
    ),
    OpInfo(
        "unbind",
        lambda: [S(X, desc="0"), S(X, -1, desc="-1"), S(X, 1, desc="strided", strided=True)],
    ),
    OpInfo(
        "narrow",
        lambda: [
            S(X, 2, 1, 2, desc="dim 2"),
            S(X, -1, 0, 4, desc="negative dim"),
            S(X, 0, 1, 0, desc="empty"),
        ],
    ),
    OpInfo(
        "select",
        lambda: [
            S(X, 1, 2, desc="dim 1"),
            S(X, -1, -1, desc="negative"),
            S(X, 0, 1, desc="strided", strided=True),
        ],
    ),
    OpInfo(
        "tile",
        lambda: [
            S(M, (2, 1), desc="2, 1"),
            S(M, (2,), desc="fewer reps"),
            S(M, (2, 1, 2), desc="more reps"),
            S(M, 2, 3, desc="varargs", only=("M",)),
        ],
    ),
    OpInfo("repeat", lambda: [S(M, 2, 1, desc="2, 1"), S(M, (2, 1, 2), desc="more dims")]),
    OpInfo(
        "repeat_interleave",
        lambda: [
            S(M, 2, desc="flattened"),
            S(M, 3, 1, desc="dim 1"),
            S(M, 2, -2, desc="negative dim"),
            S(M, np.array([1, 0, 2]), 0, desc="a count per row"),
            S(M, np.array([2, 1, 0, 3]), 1, kwargs={"output_size": 6}, desc="per column"),
            S(M, np.array([2]), desc="one count, flattened"),
            S(M, np.array(3), 1, desc="0-d count"),
        ],
    ),
    OpInfo(
        "tril",
        lambda: [
            S(M, desc="0"),
            S(M, 1, desc="1"),
            S(M, -1, desc="-1"),
            S(X, desc="batched"),
            S(M, desc="strided", strided=True),
        ],
    ),
    OpInfo(
        "triu",
        lambda: [S(M, desc="0"), S(M, 1, desc="1"), S(M, -2, desc="-2"), S(X, desc="batched")],
    ),
]


# ------------------------------------------------------------------------------- padding


def _pad_samples():
    img = R.standard_normal((1, 2, 4, 5))
    out = []
    for mode in ("constant", "reflect", "replicate", "circular"):
        # (PyTorch pads the last dimension of 2-d and 3-d inputs only, in the modes other than
        # constant; ember pads any)
        out.append(S(img[0], (1, 2), kwargs={"mode": mode}, desc=f"{mode} last dim"))
        out.append(S(img, (1, 1, 2, 0), kwargs={"mode": mode}, desc=f"{mode} two dims"))
        out.append(S(img[0], (-1, 2), kwargs={"mode": mode}, desc=f"{mode} negative"))
    out.append(S(img, (1, 1), kwargs={"value": 2.5}, desc="value"))
    out.append(S(M, (0, 0, 1, 1), desc="2-d constant"))
    out.append(S(img, (2, -3, -1, 1), desc="crop and pad"))
    out.append(S(img, (1, 1), desc="strided", strided=True))
    return out


OPS.append(OpInfo("pad", _pad_samples))


# ------------------------------------------------------------------------------ indexing


def _getitem_samples():
    idx = np.array([2, 0, 2])
    mask = M > 0
    return [
        S(X, (1,), desc="int"),
        S(X, (slice(None), slice(1, None, 2)), desc="slices"),
        S(X, (Ellipsis, -1), desc="ellipsis"),
        S(X, (None, 0), desc="None"),
        S(X, (slice(None), idx), desc="an index tensor", nondiff=()),
        S(X, (idx[:2], slice(None), idx[1:]), desc="two index tensors"),
        S(M, (mask,), desc="a mask"),
        S(X, (slice(1, None),), desc="slice from 1"),
        S(X, (0, slice(None), 1), desc="strided", strided=True),
    ]


def _getitem(lib, x, index):
    if lib.name == "ember":
        return lib.mod.getitem(x, index)
    return x[index]


def _index_args(lib, index):
    return tuple(lib.tensor(i, False) if isinstance(i, np.ndarray) else i for i in index)


def _getitem_call(lib, x, index):
    return _getitem(lib, x, _index_args(lib, index))


OPS.append(OpInfo("getitem", _getitem_samples, call=_getitem_call, spellings=("T",)))


def _index_put_samples():
    idx = np.array([0, 2, 0])
    return [
        S(M, (idx,), R.standard_normal((3, 4)), desc="rows"),
        S(M, (idx,), R.standard_normal((3, 4)), kwargs={"accumulate": True}, desc="accumulate"),
        S(M, (idx, np.array([1, 1, 3])), R.standard_normal(3), desc="points"),
        S(M, (idx[:2], np.array([1, 2])), np.array(5.0), desc="a 0-d value"),
    ]


def _index_put(how):
    """index_put as a function ("T"), a method ("M") or in place on a copy ("I"), with the
    index tensors made in the library."""

    def call(lib, x, index, value, accumulate=False):
        index = _index_args(lib, index)
        if how == "T":
            return lib.mod.index_put(x, index, value, accumulate=accumulate)
        if how == "M":
            return x.index_put(index, value, accumulate=accumulate)
        target = x.clone()
        return target.index_put_(index, value, accumulate=accumulate)

    return call


OPS += [
    OpInfo("index_put", _index_put_samples, call=_index_put(how), spellings=(how,))
    for how in ("T", "M", "I")
]


def _setitem_samples():
    return [
        S(M, (1,), np.array(2.0), desc="row = 0-d"),
        S(M, (slice(None), 2), R.standard_normal(3), desc="column"),
        S(M, (M > 0,), np.array(0.0), desc="mask"),
    ]


def _setitem(lib, x, index, value):
    x = x * 1
    x[_index_args(lib, index)] = value
    return x


OPS.append(OpInfo("x[index] = value", _setitem_samples, call=_setitem, spellings=("op",)))

IDX = np.array([[0, 2, 1, 0], [1, 1, 0, 2]])


def _gather_samples():
    return [
        S(M, 0, IDX, desc="dim 0"),
        S(M, 1, IDX[:, :3] % 4, desc="dim 1"),
        S(M, -1, IDX[:1] % 4, desc="negative dim"),
        S(M, 0, IDX, desc="strided", strided=True),
        S(M, 0, np.zeros((0, 4), np.int64), desc="empty index"),
    ]


OPS.append(OpInfo("gather", _gather_samples))


def _scatter_samples(add):
    src = R.standard_normal((2, 4))
    out = [
        S(M, 0, IDX, src, desc="dim 0"),
        S(M, 1, IDX[:, :3] % 4, src[:, :3], desc="dim 1"),
        S(M, -1, IDX[:1] % 4, src[:1], desc="negative dim"),
    ]
    if not add:
        out.append(S(M, 0, IDX, kwargs={"value": 2.5}, desc="value"))
    return out


OPS += [
    OpInfo("scatter", lambda: _scatter_samples(False)),
    OpInfo("scatter_add", lambda: _scatter_samples(True)),
    OpInfo(
        "index_select",
        lambda: [
            S(M, 0, np.array([2, 0, 2]), desc="rows"),
            S(M, -1, np.array([3, 1]), desc="negative dim"),
            S(M, 1, np.zeros(0, np.int64), desc="empty"),
            S(M, 0, np.array([1, 1]), desc="strided", strided=True),
        ],
    ),
    OpInfo(
        "index_add",
        lambda: [
            S(M, 0, np.array([2, 0, 2]), R.standard_normal((3, 4)), desc="rows"),
            S(
                M,
                1,
                np.array([1, 1]),
                R.standard_normal((3, 2)),
                kwargs={"alpha": 2.0},
                desc="alpha",
            ),
        ],
    ),
    OpInfo(
        "masked_fill",
        lambda: [
            S(M, M > 0, 0.0, desc="float"),
            S(M, M[:1] > 0, -1, desc="broadcast mask, int"),
            S(M, M > 0, np.array(2.5), desc="0-d tensor value", nondiff=(2,)),
            S(M, M > 0, float("nan"), desc="NaN"),
        ],
    ),
    OpInfo(
        "masked_select",
        lambda: [
            S(M, M > 0, desc="mask"),
            S(M, M[:1] > 0, desc="broadcast"),
            S(M, np.zeros((3, 4), bool), desc="none"),
        ],
    ),
    OpInfo(
        "take",
        lambda: [
            S(M, np.array([0, 11, 5]), desc="flat"),
            S(M, np.array([[1, -1], [2, 3]]), desc="2-d, negative"),
        ],
    ),
    OpInfo(
        "take_along_dim",
        lambda: [
            S(M, np.argsort(M, 1), 1, desc="argsort"),
            S(M, np.array([[0], [3], [1]]), -1, desc="broadcast index"),
            S(M, np.array([0, 5, 11]), desc="flattened"),
        ],
    ),
    OpInfo(
        "nonzero",
        lambda: [
            S(M > 0, desc="bool"),
            S(np.array([0.0, 1.5, 0.0, -2.0]), desc="floats"),
            S(M > 0, kwargs={"as_tuple": True}, desc="as_tuple"),
            S(np.zeros((0, 2)), desc="empty"),
            S(np.array(3.0), desc="0-d"),
        ],
        grad=False,
    ),
    OpInfo(
        "argwhere",
        lambda: [S(M > 0, desc="bool"), S(np.array([0.0, 1.5, 0.0]), desc="floats")],
        grad=False,
    ),
    OpInfo(
        "one_hot",
        lambda: [
            S(np.array([0, 2, 1]), desc="inferred classes"),
            S(np.array([[0, 2], [1, 0]]), 4, desc="num_classes"),
            S(np.zeros(0, np.int64), 3, desc="empty"),
        ],
        grad=False,
        dtypes=(),
    ),
]
