"""OpInfos of torch names ember gained for ported programs: ``torch.put`` / ``put_`` (through
index_put: values and gradients, accumulate, negative and repeated positions), the
``unsafe_*`` splits as Tensor methods, the count samplers ``torch.poisson`` and
``torch.binomial`` (random: shapes, dtypes and the values' properties), ``torch.frombuffer``
and ``torch.from_dlpack`` (each library given its own copy of the same bytes); see opinfo.py."""

import numpy as np

from .opinfo import FLOATS, OpInfo, Sample, rng

R = rng(7109)
X = R.standard_normal((3, 4))


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def _put_samples():
    return [
        S(X, np.array([0, -1, 5]), R.standard_normal(3), desc="set, negative position"),
        S(
            X,
            np.array([[1, 1], [4, 0]]),
            R.standard_normal((2, 2)),
            kwargs={"accumulate": True},
            desc="accumulate, repeated position",
        ),  # fmt: skip
        S(X, np.array([2, 7]), R.standard_normal(2), desc="strided", strided=True),
        S(X, np.array([12]), R.standard_normal(1), desc="out of range refused", grad=False),
        S(X, np.array([1, 2]), R.standard_normal(1), desc="too few values refused", grad=False),
        S(X, np.array([1]), np.array([1]), desc="source dtype refused", grad=False),
    ]


def _nonnegative(out):
    v = out.numpy()
    assert (v >= 0).all() and (v == np.round(v)).all()


def _counts_samples():
    return [
        S(np.array([0.0, 1.0, 4.5, 30.0]), desc="rates", grad=False),
        S(np.full((2, 3), 2.0), desc="2-d", grad=False),
        S(np.zeros((0,)), desc="empty", grad=False),
        S(np.array([-1.0]), desc="negative rate refused", grad=False),
    ]


def _binomial_samples():
    return [
        S(
            np.array([10.0, 5.0, 0.0, 3.0]),
            np.array([0.5, 0.1, 0.3, 1.0]),
            desc="counts",
            grad=False,
        ),  # fmt: skip
        S(np.array([10.0, 4.0]), np.array([[0.5], [0.2]]), desc="broadcast", grad=False),
        S(np.array([1, 2]), np.array([0.5, 0.5]), desc="integer count refused", grad=False),
    ]


def _buffer_call(lib, x, dtype):
    data = bytearray(x.numpy().astype(dtype).tobytes())
    return lib.mod.frombuffer(data, dtype=lib.dtype(dtype))


def _dlpack_call(lib, x):
    return lib.mod.from_dlpack(x.detach().numpy().copy())


OPS = [
    OpInfo("put", _put_samples, dtypes=FLOATS),
    *[
        OpInfo(name, samples, spellings=("M",), dtypes=FLOATS)
        for name, samples in (
            (
                "unsafe_split",
                lambda: [
                    S(X, 2, desc="rows"),
                    S(X, 3, 1, desc="columns"),
                    S(X, [1, 3], 1, desc="list refused"),
                ],
            ),
            ("unsafe_chunk", lambda: [S(X, 2, 1, desc="two chunks"), S(X, 3, desc="rows")]),
            ("unsafe_split_with_sizes", lambda: [S(X, [1, 2], desc="1 and 2 rows")]),
        )
    ],
    OpInfo("poisson", _counts_samples, grad=False, random=True, dtypes=(), check=_nonnegative),
    OpInfo(
        "binomial", _binomial_samples, grad=False, random=True, dtypes=(), check=_nonnegative
    ),  # fmt: skip
    OpInfo(
        "frombuffer",
        lambda: [S(X, desc="float64", grad=False), S(X[0], desc="float32", grad=False)],
        call=lambda lib, x: _buffer_call(lib, x, "float64" if x.ndim == 2 else "float32"),
        grad=False,
        dtypes=(),
    ),
    OpInfo(
        "from_dlpack",
        lambda: [S(X, desc="float64", grad=False), S(np.arange(5), desc="int64", grad=False)],
        call=_dlpack_call,
        grad=False,
        dtypes=(),
    ),
]

INTERNAL = {
    "random_poisson": "(its VJP only) OpInfo compares no gradient of a random op (the draws "
    "differ from PyTorch's); its VJP, zero as PyTorch's, runs in the conformance samples and "
    "is compared with torch.poisson's in tests/test_tensor_api_gaps.py",
    "linspace": "made only by a graph over symbolic sizes (linspace(a, b, x.size(1)) under "
    "automatic dynamic shapes; a concrete count is a constant, which OpInfo's samples give): "
    "compared with torch.linspace in tests/ops/samples_sem58.py and, compiled over varying "
    "sizes, in tests/test_sem58_symbolic_sizes.py",
    "add_scaled": "made only by a recorded optimizer step (its hyper-parameters graph values: "
    "optim/_common.py add_scaled, optim/optimizer.py lerp_); its conformance sample is in "
    "tests/ops/samples_issue19c.py, and captured steps are compared with eager ones bit for bit "
    "in tests/optim/test_sem60_adam_order.py, eager ones with PyTorch's",
    "host_print": "made only by ember.compile's capture of a print call (PyTorch has no such "
    "op: torch.compile breaks the graph and prints); its conformance sample is "
    "tests/ops/samples_host_print.py, and what it prints is compared with torch.compile's in "
    "tests/test_sem59_compile_print.py",
}
