"""OpInfos of functional/toplevel_native.py's top-level functions: aten's native norms,
convolution and conv_tbc, max_pool1d_with_indices, the functional recurrent cells, the
dropouts' in-place and feature forms, the top-level in-place forms, as_strided_scatter,
nonzero_static, empty_permuted, get_device, is_storage and set_default_tensor_type; see
opinfo.py."""

import numpy as np

from .opinfo import Fn, OpInfo, Sample, rng

R = rng(7070)
FLOAT = ("float32", "float64")


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def _on_clone(name):
    """The in-place top-level function on a copy of the first operand (so a leaf's gradient
    flows through the write)."""

    def call(lib, x, *args, **kwargs):
        return getattr(lib.mod, name)(x.clone(), *args, **kwargs)

    return call


X3 = R.standard_normal((2, 3, 4))
X4 = R.standard_normal((2, 4, 3, 3))


def _layer_samples():
    return [
        S(X3, [4], None, None, 1e-5, desc="last dim"),
        S(X3, [3, 4], R.standard_normal((3, 4)), R.standard_normal((3, 4)), 1e-5, desc="affine"),
        S(X3, (4,), None, None, 1e-3, desc="strided", strided=True),
        S(X3, [3], None, None, 1e-5, desc="shape mismatch refused"),
    ]


def _batch_samples():
    w, b = R.standard_normal(3), R.standard_normal(3)
    return [
        S(X3, w, b, None, None, True, 0.1, 1e-5, desc="training, no stats"),
        S(
            X3,
            None,
            None,
            np.zeros(3),
            np.ones(3),
            True,
            0.1,
            1e-5,
            desc="training, stats",
            nondiff=(3, 4),
        ),
        S(X3, w, b, np.zeros(3), np.full(3, 2.0), False, 0.1, 1e-5, desc="eval", nondiff=(3, 4)),
        S(X4[:, :3], None, None, None, None, True, 0.1, 1e-5, desc="4-d"),
    ]


def _group_samples():
    return [
        S(X4, None, None, 2, 4, 9, 2, 1e-5, desc="2 groups"),
        S(X4, R.standard_normal(4), R.standard_normal(4), 2, 4, 9, 4, 1e-5, desc="affine"),
        S(X4.reshape(2, 4, 9), None, None, 2, 4, 9, 1, 1e-5, desc="3-d, one group"),
        S(X4, None, None, 2, 4, 8, 2, 1e-5, desc="HxW mismatch refused"),
    ]


def _convolution_samples():
    x1, w1 = R.standard_normal((2, 3, 7)), R.standard_normal((4, 3, 3))
    x2, w2 = R.standard_normal((1, 2, 5, 5)), R.standard_normal((4, 1, 3, 3))
    wt = R.standard_normal((3, 2, 3))
    return [
        S(x1, w1, R.standard_normal(4), [1], [1], [1], False, [0], 1, desc="1-d"),
        S(x2, w2, None, [2, 1], [1, 0], [1, 2], False, [0, 0], 2, desc="2-d groups"),
        S(x1, wt, None, [2], [1], [1], True, [1], 1, desc="transposed"),
        S(
            R.standard_normal((1, 2, 4, 4, 4)),
            R.standard_normal((3, 2, 2, 2, 2)),
            None,
            [1, 1, 1],
            [0, 0, 0],
            [1, 1, 1],
            False,
            [0, 0, 0],
            1,
            desc="3-d",
        ),
    ]


def _tbc_samples():
    return [
        S(
            R.standard_normal((6, 2, 3)),
            R.standard_normal((3, 3, 4)),
            R.standard_normal(4),
            1,
            desc="pad 1",
        ),
        S(
            R.standard_normal((5, 1, 2)),
            R.standard_normal((2, 2, 3)),
            R.standard_normal(3),
            desc="no pad",
        ),
        S(
            R.standard_normal((5, 1, 2)),
            R.standard_normal((2, 3, 3)),
            R.standard_normal(3),
            desc="channels refused",
        ),
    ]


def _pool_samples():
    x = R.standard_normal((2, 3, 9))
    return [
        S(x, [3], desc="kernel"),
        S(x, [3], [2], [1], [1], True, desc="every argument"),
        S(x, 2, 1, desc="ints"),
    ]


def _cell_samples(gates, pair=False):
    def h(shape):
        return (
            (R.standard_normal(shape), R.standard_normal(shape))
            if pair
            else R.standard_normal(shape)
        )

    return lambda: [
        S(
            R.standard_normal((2, 3)),
            h((2, 4)),
            R.standard_normal((gates * 4, 3)),
            R.standard_normal((gates * 4, 4)),
            R.standard_normal(gates * 4),
            R.standard_normal(gates * 4),
            desc="biases",
        ),
        S(
            R.standard_normal((2, 3)),
            h((2, 4)),
            R.standard_normal((gates * 4, 3)),
            R.standard_normal((gates * 4, 4)),
            desc="no biases",
        ),
        S(
            R.standard_normal((2, 5)),
            h((2, 4)),
            R.standard_normal((gates * 4, 3)),
            R.standard_normal((gates * 4, 4)),
            desc="features refused",
        ),
    ]


def _dropout_check(p):
    def check(out):  # (ones in: zeros and 1 / (1 - p) in training, ones in evaluation)
        v = out.numpy()
        if (v == 1).all():
            return
        kept = v != 0
        np.testing.assert_allclose(v[kept], np.ones_like(v)[kept] / (1 - p), rtol=1e-6)

    return check


def _dropout_samples():
    return [
        S(np.ones((4, 5, 6)), 0.5, True, desc="train", grad=False),
        S(np.ones((4, 5)), 0.5, False, desc="eval", grad=False),
        S(np.ones((4, 5)), 1.5, True, desc="p refused", grad=False),
    ]


def _feature_check(out):
    v = out.numpy()
    if (v == 1).all():  # (evaluation)
        return
    assert ((v == 0) | (v == 2.0)).all()
    if v.ndim > 2:  # whole features: constant over the trailing dims
        assert (v == v[..., :1]).all()


def _feature_samples():
    return [
        S(np.ones((4, 5, 6)), 0.5, True, desc="3-d", grad=False),
        S(np.ones((8, 6)), 0.5, True, desc="2-d", grad=False),
        S(np.ones((4, 5, 6)), 0.5, False, desc="eval", grad=False),
        S(np.ones(5), 0.5, True, desc="1-d refused", grad=False),
    ]


def _alpha_check(out):
    assert np.isfinite(out.numpy()).all()


INTS = np.array([12, 18, -9, 0, 7])


OPS = [
    OpInfo("native_layer_norm", _layer_samples, dtypes=FLOAT),
    OpInfo("native_batch_norm", _batch_samples, dtypes=FLOAT),
    OpInfo("native_group_norm", _group_samples, dtypes=FLOAT),
    OpInfo("convolution", _convolution_samples, dtypes=FLOAT),
    OpInfo("conv_tbc", _tbc_samples, dtypes=FLOAT),
    OpInfo("max_pool1d_with_indices", _pool_samples, dtypes=FLOAT),
    OpInfo("lstm_cell", _cell_samples(4, pair=True), dtypes=FLOAT),
    OpInfo("gru_cell", _cell_samples(3), dtypes=FLOAT),
    OpInfo("rnn_tanh_cell", _cell_samples(1), dtypes=FLOAT),
    OpInfo("rnn_relu_cell", _cell_samples(1), dtypes=FLOAT),
    OpInfo(
        "dropout_",
        _dropout_samples,
        call=_on_clone("dropout_"),
        random=True,
        check=_dropout_check(0.5),
        dtypes=FLOAT,
    ),
    OpInfo(
        "alpha_dropout_",
        _dropout_samples,
        call=_on_clone("alpha_dropout_"),
        random=True,
        check=_alpha_check,
        dtypes=FLOAT,
    ),
    OpInfo(
        "feature_alpha_dropout_",
        _feature_samples,
        call=_on_clone("feature_alpha_dropout_"),
        random=True,
        check=_alpha_check,
        dtypes=FLOAT,
    ),
    OpInfo("feature_dropout", _feature_samples, random=True, check=_feature_check, dtypes=FLOAT),
    OpInfo(
        "feature_dropout_",
        _feature_samples,
        call=_on_clone("feature_dropout_"),
        random=True,
        check=_feature_check,
        dtypes=FLOAT,
    ),
    OpInfo(
        "index_put_",
        lambda: [
            S(
                R.standard_normal((4, 3)),
                (np.array([0, 2]),),
                R.standard_normal((2, 3)),
                desc="rows",
            ),
            S(
                R.standard_normal((4, 3)),
                (np.array([1, 1]), np.array([0, 2])),
                R.standard_normal(2),
                True,
                desc="accumulate",
            ),
        ],
        call=_on_clone("index_put_"),
        spellings=("T",),
        dtypes=FLOAT,
    ),
    OpInfo(
        "gcd_",
        lambda: [S(INTS, np.array([8, 12, 6, 5, 0]))],
        call=_on_clone("gcd_"),
        spellings=("T",),
        dtypes=("int32", "int64"),
        grad=False,
    ),
    OpInfo(
        "lcm_",
        lambda: [S(INTS, np.array([8, 12, 6, 5, 0]))],
        call=_on_clone("lcm_"),
        spellings=("T",),
        dtypes=("int32", "int64"),
        grad=False,
    ),
    OpInfo(
        "addmv_",
        lambda: [
            S(R.standard_normal(3), R.standard_normal((3, 4)), R.standard_normal(4)),
            S(
                R.standard_normal(3),
                R.standard_normal((3, 4)),
                R.standard_normal(4),
                kwargs={"beta": 0.5, "alpha": 2.0},
                desc="beta alpha",
            ),
        ],
        call=_on_clone("addmv_"),
        spellings=("T",),
        dtypes=FLOAT,
    ),
    OpInfo(
        "conj_physical_",
        lambda: [
            S(R.standard_normal((2, 3)), desc="real: unchanged"),
            S(
                R.standard_normal((2, 3)) + 1j * R.standard_normal((2, 3)),
                desc="complex",
                grad=False,
            ),
        ],
        call=lambda lib, x: lib.mod.conj_physical_(x.clone()),
        spellings=("T",),
        dtypes=FLOAT,
    ),
    OpInfo(
        "conj_physical_",
        lambda: [S(R.standard_normal((2, 3)) + 1j * R.standard_normal((2, 3)), grad=False)],
        call=lambda lib, x: x.clone().conj_physical_(),
        spellings=("M",),
        dtypes=(),
    ),
    OpInfo(
        "as_strided_scatter",
        lambda: [
            S(
                R.standard_normal((3, 4)),
                R.standard_normal((2, 2)),
                (2, 2),
                (1, 2),
                1,
                desc="offset",
            ),
            S(R.standard_normal((3, 4)), R.standard_normal((2, 3)), (2, 3), (4, 1), desc="rows"),
            S(
                R.standard_normal((4, 3)).T,
                R.standard_normal((2, 2)),
                (2, 2),
                (1, 2),
                1,
                desc="transposed values",
            ),
            S(R.standard_normal((2, 3, 2)), R.standard_normal(4), (4,), (3,), desc="3-d"),
            S(
                R.standard_normal((3, 4)),
                R.standard_normal((2, 2)),
                (2, 2),
                (1, 20),
                desc="out of bounds refused",
            ),
        ],
        spellings=("T",),
        # PyTorch 2.13's gradient of the input is wrong on the CPU (it keeps the scattered
        # positions and zeroes the others); ember's, the other way round, is checked against
        # finite differences in tests/test_api8_toplevel.py
        grad=False,
    ),
    OpInfo(
        "nonzero_static",
        lambda: [
            S(np.array([[1.0, 0.0], [0.0, 2.0]]), kwargs={"size": 3}, desc="padded"),
            S(np.array([1.0, 0.0, 3.0, 4.0]), kwargs={"size": 2}, desc="cut"),
            S(np.array([1.0, 0.0, 3.0]), kwargs={"size": 4, "fill_value": 7}, desc="fill"),
            S(np.zeros((2, 3)), kwargs={"size": 2}, desc="none"),
        ],
        grad=False,
    ),
    OpInfo(
        "empty_permuted",
        lambda: [
            S((2, 3, 4), (0, 2, 1)),
            S(
                (2, 3, 4, 5),
                (0, 2, 3, 1),
                kwargs={"dtype": Fn(lambda lib: lib.mod.float64)},
                desc="channels last, float64",
            ),
            S((2, 3), (0, 0), desc="not a permutation refused"),
        ],
        call=lambda lib, *a, **k: (lambda t: (tuple(t.shape), t.stride(), str(t.dtype)[6:]))(
            lib.mod.empty_permuted(*a, **k)
        ),
        grad=False,
    ),
    OpInfo("get_device", lambda: [S(np.ones(3))], grad=False),
    OpInfo(
        "is_storage",
        lambda: [S(np.ones(3), desc="a tensor"), S([1, 2], desc="a list")],
        grad=False,
    ),
    OpInfo(
        "set_default_tensor_type",
        lambda: [
            S("torch.DoubleTensor", desc="by name"),
            S(Fn(lambda lib: lib.mod.DoubleTensor), desc="by type"),
            S("torch.LongTensor", desc="integer refused"),
        ],
        call=lambda lib, t: _with_default_type(lib, t),
        grad=False,
    ),
]


def _with_default_type(lib, t):
    try:
        lib.mod.set_default_tensor_type(t)
        return lib.mod.tensor([1.5])
    finally:
        lib.mod.set_default_dtype(lib.mod.float32)
