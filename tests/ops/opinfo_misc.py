"""OpInfos of creation, random sampling and control flow, the public functions without a
PyTorch counterpart (``NO_TORCH``) and the registered ops no public call runs eagerly
(``INTERNAL``), each with the reason (see opinfo.py)."""

import numpy as np

from .opinfo import DT, FLOATS, OpInfo, Sample, rng

R = rng(60)
M = R.standard_normal((3, 4))


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


# ------------------------------------------------------------------------------ creation


def _shapes(*extra):
    return lambda: [
        S(2, 3, desc="sizes"),
        S((2, 3), desc="tuple"),
        S(0, desc="empty"),
        S((), desc="0-d"),
        S(2, 3, kwargs={"dtype": DT("int32")}, desc="dtype"),
        *extra,
    ]


OPS = [
    OpInfo("zeros", _shapes(), grad=False, dtypes=()),
    OpInfo("ones", _shapes(), grad=False, dtypes=()),
    # (ember never hands out uninitialised memory: its empty is zeros; compared in shape and
    # dtype only, PyTorch's values being whatever the memory held)
    OpInfo("empty", _shapes(), grad=False, dtypes=(), random=True),
    OpInfo(
        "full",
        lambda: [
            S((2, 3), 1.5, desc="float"),
            S((2, 3), 7, desc="int: int64"),
            S((2,), True, desc="bool"),
            S((2, 3), 2, kwargs={"dtype": DT("float16")}, desc="dtype"),
            S((0, 2), 0.5, desc="empty"),
        ],
        grad=False,
        dtypes=(),
    ),
]


def _like_samples():
    return [
        S(M, desc="float64"),
        S(M.astype(np.int32), desc="int32"),
        S(M, kwargs={"dtype": DT("float32")}, desc="dtype"),
        S(M[:0], desc="empty"),
    ]


OPS += [
    OpInfo("zeros_like", _like_samples, grad=False),
    OpInfo("ones_like", _like_samples, grad=False),
    OpInfo("empty_like", _like_samples, grad=False, random=True),
    OpInfo(
        "full_like",
        lambda: [
            S(M, 2.5, desc="float"),
            S(M.astype(np.int64), 3, desc="int"),
            S(M, 1, kwargs={"dtype": DT("int8")}, desc="dtype"),
        ],
        grad=False,
    ),
    OpInfo(
        "arange",
        lambda: [
            S(5, desc="end"),
            S(1, 10, 3, desc="ints"),
            S(0, 10, 0.1, desc="float step"),
            S(-3.3, 7.1, 0.37, desc="negative start"),
            S(10, 0, -1.5, desc="negative step"),
            S(0, 1, 0.25, kwargs={"dtype": DT("float64")}, desc="float64"),
            S(0, 5, kwargs={"dtype": DT("float16")}, desc="float16"),
            S(3, 3, desc="empty"),
        ],
        grad=False,
        dtypes=(),
        # (PyTorch's vectorized kernel adds j * step to each vector's rounded first value:
        # float32 values can be an ulp of that value away from ember's once-rounded ones)
        rtol=1e-6,
        atol=1e-6,
    ),
    OpInfo(
        "linspace",
        lambda: [
            S(0, 1, 5, desc="5"),
            S(-2.5, 7, 11, desc="11"),
            S(0, 1, 1, desc="1"),
            S(0, 1, 0, desc="0"),
            S(0, 10, 7, kwargs={"dtype": DT("float64")}, desc="float64"),
            S(0, 10, 5, kwargs={"dtype": DT("int64")}, desc="int64"),
        ],
        grad=False,
        dtypes=(),
        rtol=1e-6,
        atol=1e-6,
    ),
    OpInfo(
        "eye",
        lambda: [
            S(3, desc="3"),
            S(2, 4, desc="2x4"),
            S(0, desc="0"),
            S(3, kwargs={"dtype": DT("int32")}, desc="dtype"),
        ],
        grad=False,
        dtypes=(),
    ),
]


def _data_samples():
    return [
        S(0.7, kwargs={"dtype": DT("float64")}, desc="float to float64"),
        S([0.1, 1e300], kwargs={"dtype": DT("float64")}, desc="list to float64"),
        S([[1, 2], [3, 4]], desc="ints"),
        S([True, False], desc="bools"),
        S([1.5, 2], desc="mixed: default float"),
        S(M, desc="an array keeps float64"),
        S(M.astype(np.float32), kwargs={"dtype": DT("float16")}, desc="array cast"),
        S([], desc="empty list"),
        S(3, desc="int scalar"),
        S(2.5, desc="float scalar"),
        S([[0.7]], kwargs={"dtype": DT("bfloat16")}, desc="bfloat16"),
    ]


OPS += [
    OpInfo("tensor", _data_samples, grad=False, dtypes=()),
    OpInfo("as_tensor", _data_samples, grad=False, dtypes=()),
    OpInfo(
        "from_numpy",
        lambda: [S(M, desc="float64"), S(M.astype(np.int16), desc="int16"), S(M > 0, desc="bool")],
        # (the same array object to both: the libraries share its memory)
        call=lambda lib, x: lib.mod.from_numpy(
            x.numpy().copy() if lib.name == "ember" else x.numpy()
        ),
        grad=False,
        dtypes=(),
    ),
]


# ---------------------------------------------------------------------------- random


def _in_unit(out):
    v = out.numpy()
    assert ((v >= 0) & (v < 1)).all()


def _finite(out):
    assert np.isfinite(out.numpy()).all()


def _zero_or_one(out):
    assert set(np.unique(out.numpy())) <= {0.0, 1.0}


OPS += [
    OpInfo("rand", _shapes(), grad=False, dtypes=(), random=True, check=_in_unit),
    OpInfo("randn", _shapes(), grad=False, dtypes=(), random=True, check=_finite),
    OpInfo(
        "randint",
        lambda: [
            S(0, 5, (3, 4), desc="range"),
            S(7, (2,), desc="high only"),
            S(-3, 3, (4,), kwargs={"dtype": DT("int32")}, desc="dtype"),
        ],
        grad=False,
        dtypes=(),
        random=True,
    ),
    OpInfo(
        "randperm",
        lambda: [S(6, desc="6"), S(0, desc="0"), S(5, kwargs={"dtype": DT("int32")}, desc="dtype")],
        grad=False,
        dtypes=(),
        random=True,
        check=lambda out: np.testing.assert_array_equal(
            np.sort(out.numpy()), np.arange(out.shape[0])
        ),
    ),
    OpInfo(
        "randint_like",
        lambda: [S(M, 5, desc="high only"), S(M, -2, 3, desc="range"), S(M[:0], 4, desc="empty")],
        grad=False,
        random=True,
        dtypes=FLOATS,
        check=lambda out: np.testing.assert_array_equal(out.numpy(), np.round(out.numpy())),
    ),
    OpInfo("rand_like", _like_samples, grad=False, random=True, spellings=("T",), dtypes=FLOATS),
    OpInfo("randn_like", _like_samples, grad=False, random=True, spellings=("T",), dtypes=FLOATS),
    *[
        OpInfo(
            name,
            lambda: [S(M, desc="(3, 4)"), S(M[:0], desc="empty")],
            # (x.rand_like() is ember's; PyTorch spells it torch.rand_like(x))
            call=lambda lib, x, name=name: (
                getattr(x, name)() if lib.name == "ember" else getattr(lib.mod, name)(x)
            ),
            spellings=("M",),
            grad=False,
            random=True,
            dtypes=FLOATS,
        )
        for name in ("rand_like", "randn_like")
    ],
    OpInfo(
        "normal",
        lambda: [S(0.0, 1.0, (3, 4), desc="scalars"), S(2.0, 0.5, (2,), desc="mean, std")],
        grad=False,
        dtypes=(),
        random=True,
        check=_finite,
    ),
    OpInfo(
        "uniform",
        lambda: [S(0.0, 1.0, (3, 4), desc="unit"), S(-2.0, 3.0, (5,), desc="range")],
        # PyTorch's counterpart: an empty tensor filled by uniform_
        call=lambda lib, low, high, size: (
            lib.mod.uniform(low, high, size)
            if lib.name == "ember"
            else lib.mod.empty(size).uniform_(low, high)
        ),
        spellings=("T",),
        grad=False,
        dtypes=(),
        random=True,
    ),
    OpInfo(
        "bernoulli",
        lambda: [
            S(R.uniform(0, 1, (3, 4)), desc="probabilities"),
            S(np.array([0.0, 1.0]), desc="0 and 1"),
        ],
        grad=False,
        random=True,
        check=_zero_or_one,
        dtypes=FLOATS,
    ),
]


def _fill_(name, *args):
    def call(lib, x):
        target = x.clone()
        out = getattr(target, name)(*args)
        assert out is target
        return out

    return call


OPS += [
    OpInfo(
        "normal_",
        lambda: [S(M, desc="(3, 4)")],
        call=_fill_("normal_", 1.0, 2.0),
        spellings=("M",),
        grad=False,
        random=True,
        dtypes=FLOATS,
    ),
    OpInfo(
        "uniform_",
        lambda: [S(M, desc="(3, 4)")],
        call=_fill_("uniform_", -1.0, 1.0),
        spellings=("M",),
        grad=False,
        random=True,
        dtypes=FLOATS,
    ),
    OpInfo(
        "bernoulli_",
        lambda: [S(M, desc="(3, 4)")],
        call=_fill_("bernoulli_", 0.3),
        spellings=("M",),
        grad=False,
        random=True,
        check=_zero_or_one,
        dtypes=FLOATS,
    ),
]


def _dropped_or_scaled(out):
    """Each element 0 or its input scaled by 1 / (1 - p): p=0.5 on ones gives 0 or 2."""
    assert set(np.unique(out.numpy())) <= {0.0, 2.0} or not out.numpy().any()


def _dropout_random():
    return [S(np.ones((4, 3, 5, 6)), 0.5, desc="p=0.5"), S(np.ones((2, 3, 4, 5)), 1.0, desc="p=1")]


OPS += [
    OpInfo(
        name,
        _dropout_random,
        spellings=("F",),
        grad=False,
        random=True,
        check=_dropped_or_scaled,
        dtypes=(),
    )
    for name in ("dropout", "dropout1d", "dropout2d", "dropout3d")
]


# ------------------------------------------------------------------------- control flow


def _cond(lib, pred, x, y):
    """``cond`` against Python's ``if`` in PyTorch."""

    def f(a, b):
        return a * b + a.sin(), b

    def g(a, b):
        return a - b, b * 2

    if lib.name == "ember":
        return lib.mod.cond(pred, f, g, x, y)
    return f(x, y) if bool(pred) else g(x, y)


def _while(lib, x, checkpoint_every=None):
    """A loop that halves a carry until its sum is small, counting the trips (``while_loop``
    against Python's ``while`` in PyTorch)."""

    def cond(vals):
        return vals[0].abs().sum() > 0.1

    def body(vals):
        return vals[0] * 0.5 + vals[0].sin() * 0.1, vals[1] + 1

    init = (x, lib.tensor(np.array(0), False))
    if lib.name == "ember":
        return lib.mod.while_loop(cond, body, init, checkpoint_every=checkpoint_every)
    vals = init
    while bool(cond(vals)):
        vals = body(vals)
    return vals


def _fori(lib, x, w, checkpoint_every=None):
    def body(i, vals):
        return vals * w + i.to(vals.dtype) * 0.25

    if lib.name == "ember":
        return lib.mod.fori_loop(1, 5, body, x, checkpoint_every=checkpoint_every)
    vals = x
    for i in range(1, 5):
        vals = body(lib.tensor(np.array(i), False), vals)
    return vals


def _scan(lib, init, xs, checkpoint_every=None):
    def fn(carry, x):
        carry = carry * 0.9 + x.tanh()
        return carry, carry.sum()

    if lib.name == "ember":
        return lib.mod.scan(fn, init, xs, checkpoint_every=checkpoint_every)
    carry, ys = init, []
    for x in xs:
        carry, y = fn(carry, x)
        ys.append(y)
    return carry, lib.mod.stack(ys)


OPS += [
    OpInfo(
        "cond",
        lambda: [
            S(np.array(True), M, M[0], desc="true"),
            S(np.array(False), M, M[0], desc="false"),
            S(True, M, M[0], desc="a Python bool"),
        ],
        call=_cond,
        dtypes=(),
    ),
    OpInfo(
        "while_loop",
        lambda: [
            S(M, desc="eager"),
            S(M, kwargs={"checkpoint_every": 2}, desc="checkpointed: one node"),
        ],
        call=_while,
        dtypes=(),
    ),
    OpInfo(
        "fori_loop",
        lambda: [
            S(M, M[0], desc="eager"),
            S(M, M[0], kwargs={"checkpoint_every": 2}, desc="checkpointed"),
        ],
        call=_fori,
        dtypes=(),
    ),
    OpInfo(
        "scan",
        lambda: [
            S(M[0], M, desc="eager"),
            S(M[0], M, kwargs={"checkpoint_every": 2}, desc="checkpointed"),
        ],
        call=_scan,
        dtypes=(),
    ),
]


# ------------------------------------------------------------------------- not compared

NO_TORCH = {
    "T:record_loop_gradients": "a diagnostics context manager (LoopGradStats per run of a "
    "loop's gradient kernel), no op: PyTorch has no such instrument",
}

INTERNAL = {
    "linear_resample_backward": "(its VJP only) interpolate's linear gradient; its VJP (a second "
    "derivative: linear_resample) is checked by finite differences and against PyTorch's "
    "index_add in tests/ops/samples_resample.py",
    "relu_backward": "(its VJP only) the eager tape's ReLU gradient; its VJP is checked against "
    "PyTorch's double backward and by finite differences in tests/ops/samples_relu_backward.py",
    "floor_div": "(its VJP only) PyTorch defines no gradient for floor_divide to compare with; "
    "ember's is 0, checked by finite differences in tests/ops/samples_elementwise.py",
    "cond": "eagerly ember.cond is Python's if; the op is what ember.trace records "
    "(tests/ops/samples_control.py checks it against eager)",
    "fused_elementwise": "made by the fusion pass from elementwise ops (transforms/fuse.py); "
    "tests/conftest.py checks every run against the ops it fuses",
    "fused_reduce": "made by the fusion pass (a loop ending in reductions); checked by "
    "tests/conftest.py and tests/transforms/test_fuse_leading.py",
    "fused_epilogue": "made by the epilogue pass (a product and its elementwise reader); checked "
    "by tests/conftest.py",
    "pointwise_depthwise": "made by the patterns pass from two convolution epilogues (an "
    "expansion and the depthwise convolution after it); tests/ops/samples_pointwise_depthwise.py "
    "checks it against PyTorch, tests/onnx/test_onnx55_inverted_residual.py its C kernel",
    "batch_norm_fold": "made by transforms/fold_affine_inputs.py (an inference batch norm folded "
    "into a weight); tests/ops/samples_batch_norm_fold.py checks it against PyTorch and "
    "tests/transforms/test_fold_affine_inputs.py the folded models",
    "autograd_function": "what a custom autograd Function records in a graph built with "
    "gradients (its VJP is the user's backward): tests/ops/samples_function_call.py checks it "
    "against the same Function in PyTorch, tests/test_autograd_function_capture.py the "
    "captured programs",
    "attention": "what scaled_dot_product_attention and MultiheadAttention record where no "
    "gradient is wanted (the OpInfo samples differentiate: the composite); "
    "tests/ops/samples_attention_op.py checks it and its VJP against PyTorch, "
    "tests/runtime/test_cattention.py the kernel and the models",
}


# ------------------------------------------------------ Tensor's own in-place methods


def _method_(name, *args):
    def call(lib, x, *rest):
        target = x * 1  # (a non-leaf copy: gradients flow through the write)
        out = getattr(target, name)(*args, *rest)
        assert out is target
        return out

    return call


OPS += [
    OpInfo(
        "fill_",
        lambda: [
            S(M, 2.5, desc="float"),
            S(M, 3, desc="int"),
            S(M, np.array(1.5), desc="0-d tensor"),
        ],
        call=_method_("fill_"),
        spellings=("op",),
    ),
    OpInfo("zero_", lambda: [S(M, desc="(3, 4)")], call=_method_("zero_"), spellings=("op",)),
    OpInfo(
        "copy_",
        lambda: [
            S(M, R.standard_normal((3, 4)), desc="same shape"),
            S(M, R.standard_normal(4), desc="broadcast"),
            S(M, np.arange(4), desc="from int64"),
        ],
        call=_method_("copy_"),
        spellings=("op",),
    ),
    OpInfo(
        "operator @",
        lambda: [
            S(M, R.standard_normal((4, 2)), desc="2-d"),
            S(M[0], R.standard_normal((4, 2)), desc="1-d left"),
            S(R.standard_normal((2, 3, 4)), M.T.copy(), desc="batched"),
        ],
        call=lambda lib, x, y: x @ y,
        spellings=("op",),
        sweep=1,
    ),
]
