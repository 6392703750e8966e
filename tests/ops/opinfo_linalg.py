"""OpInfos of the products, convolutions and pooling (see opinfo.py)."""

import numpy as np

import ember

from .opinfo import OpInfo, Sample, rng

R = rng(40)


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def n(*shape):
    return R.standard_normal(shape)


_BOOL_PRODUCTS = {
    "bool": "ember's einsum and bilinear multiply bool tensors (logical and, summed as any); "
    "PyTorch's bmm refuses bool"
}

OPS = [
    OpInfo(
        "matmul",
        lambda: [
            S(n(3, 4), n(4, 5), desc="2-d"),
            S(n(4), n(4, 5), desc="1-d left"),
            S(n(3, 4), n(4), desc="1-d right"),
            S(n(4), n(4), desc="dot"),
            S(n(2, 3, 4), n(4, 5), desc="batched left"),
            S(n(2, 1, 3, 4), n(5, 4, 2), desc="broadcast batches"),
            S(n(0, 4), n(4, 5), desc="zero rows"),
            S(n(3, 0), n(0, 5), desc="zero inner"),
            S(n(3, 4), n(4, 5), desc="strided", strided=True),
        ],
        sweep=1,
    ),
    OpInfo(
        "mm",
        lambda: [
            S(n(3, 4), n(4, 5), desc="2-d"),
            S(n(3, 4), n(4, 2), desc="strided", strided=True),
        ],
        sweep=1,
    ),
    OpInfo(
        "spmm",  # (PyTorch's older name of mm, which also takes dense operands)
        lambda: [S(n(3, 4), n(4, 5), desc="2-d")],
        sweep=1,
    ),
    OpInfo(
        "bmm",
        lambda: [
            S(n(2, 3, 4), n(2, 4, 5), desc="batched"),
            S(n(0, 3, 4), n(0, 4, 5), desc="empty batch"),
        ],
        sweep=1,
    ),
    OpInfo(
        "mv",
        lambda: [S(n(3, 4), n(4), desc="3x4"), S(n(3, 4), n(4), desc="strided", strided=True)],
        sweep=1,
    ),
    OpInfo("dot", lambda: [S(n(5), n(5), desc="5"), S(n(0), n(0), desc="empty")], sweep=1),
    OpInfo("outer", lambda: [S(n(3), n(4), desc="3x4"), S(n(3), n(0), desc="empty")], sweep=1),
    OpInfo("ger", lambda: [S(n(3), n(4), desc="3x4")], sweep=1),
    OpInfo(
        "einsum",
        lambda: [
            S("ij,jk->ik", n(3, 4), n(4, 5), desc="matmul"),
            S("bij,bjk->bik", n(2, 3, 4), n(2, 4, 5), desc="batched"),
            S("ii->i", n(3, 3), desc="diagonal"),
            S("ij->", n(3, 4), desc="sum"),
            S("i,j->ij", n(3), n(4), desc="outer"),
            S("...ij,...jk", n(2, 3, 4), n(4, 2), desc="ellipsis, implicit output"),
            S("ij,jk->ik", n(3, 4), n(4, 5), desc="strided", strided=True),
        ],
        sweep=1,
        dtype_differences=_BOOL_PRODUCTS,
    ),
    OpInfo(
        "addmm",
        lambda: [
            S(n(3, 5), n(3, 4), n(4, 5), desc="full input"),
            S(n(5), n(3, 4), n(4, 5), desc="row input"),
            S(n(3, 5), n(3, 4), n(4, 5), kwargs={"beta": 0.5, "alpha": 2.0}, desc="beta, alpha"),
            S(
                np.full((3, 5), np.nan),
                n(3, 4),
                n(4, 5),
                kwargs={"beta": 0},
                desc="beta 0 ignores NaN",
            ),
        ],
        sweep=1,
    ),
    OpInfo(
        "linear",
        lambda: [
            S(n(3, 4), n(5, 4), n(5), desc="bias"),
            S(n(2, 3, 4), n(5, 4), desc="no bias, batched"),
            S(n(4), n(5, 4), n(5), desc="1-d input"),
            S(n(3, 4), n(5, 4), n(5), desc="strided", strided=True),
        ],
        sweep=1,
    ),
    OpInfo(
        "bilinear",
        lambda: [
            S(n(3, 4), n(3, 2), n(5, 4, 2), n(5), desc="bias"),
            S(n(3, 4), n(3, 2), n(5, 4, 2), desc="no bias"),
            # (the wider input's features meet the weight in the GEMM: both ways round)
            S(n(2, 3, 2), n(2, 3, 5), n(4, 2, 5), n(4), desc="batched, input2 wider"),
            S(n(3), n(5), n(2, 3, 5), n(2), desc="1-d inputs"),
            S(n(0, 3), n(0, 3), n(2, 3, 3), desc="no rows"),
            S(n(4, 3), n(4, 6), n(2, 3, 6), n(2), desc="strided", strided=True),
        ],
        sweep=1,
        dtype_differences=_BOOL_PRODUCTS,
    ),
]


# -------------------------------------------------------------------------- convolutions


def _conv_samples(d):
    x = n(2, 4, *([6] * d))
    w = n(3, 4, *([3] * d))
    wg = n(4, 2, *([2] * d))
    return [
        S(x, w, n(3), desc="bias"),
        S(x, w, kwargs={"stride": 2, "padding": 1}, desc="stride 2, padding 1"),
        S(x, w, kwargs={"dilation": 2}, desc="dilation"),
        S(x, wg, kwargs={"groups": 2}, desc="groups"),
        S(x, w, kwargs={"padding": "same"}, desc="padding same"),
        S(x[0], w, desc="unbatched"),
        S(x, w, desc="strided", strided=True),
    ]


def _conv_transpose_samples(d):
    x = n(2, 4, *([4] * d))
    w = n(4, 3, *([3] * d))
    wg = n(4, 1, *([2] * d))
    return [
        S(x, w, n(3), desc="bias"),
        S(x, w, kwargs={"stride": 2, "padding": 1, "output_padding": 1}, desc="stride, output pad"),
        S(x, wg, kwargs={"groups": 2}, desc="groups"),
        S(x, w, kwargs={"dilation": 2}, desc="dilation"),
        S(x, w, desc="strided", strided=True),
    ]


_FLOAT_KERNELS = "ember's {} kernels are floating point only (PyTorch's CPU ones also take {})"
_INTS = ("uint8", "int8", "int16", "int32", "int64")
_CONV_INTS = {d: _FLOAT_KERNELS.format("convolution", "integer tensors") for d in _INTS}

for _d in (1, 2, 3):
    for _name, _make in (("conv", _conv_samples), ("conv_transpose", _conv_transpose_samples)):
        OPS.append(
            OpInfo(
                f"{_name}{_d}d",
                lambda d=_d, make=_make: make(d),
                sweep=1,
                rtol=1e-9,
                dtype_differences=_CONV_INTS,
            )
        )


# ------------------------------------------------------------------------------- pooling


def _pool_samples(d, kind):
    x = n(2, 3, *([7] * d))
    out = [
        S(x, 2, desc="kernel 2"),
        S(x, 3, 2, 1, desc="kernel 3, stride 2, padding 1"),
        S(x, 3, kwargs={"stride": 2, "ceil_mode": True}, desc="ceil_mode"),
        S(x[0], 2, desc="unbatched"),
        S(x, 2, desc="strided", strided=True),
    ]
    if kind == "max":
        out.append(S(x, 2, kwargs={"dilation": 2}, desc="dilation"))
        out.append(S(x, 2, kwargs={"return_indices": True}, desc="indices"))
        ties = np.zeros((1, 1, *([4] * d)))
        out.append(S(ties, 2, desc="ties"))
    else:
        out.append(S(x, 3, 2, 1, kwargs={"count_include_pad": False}, desc="without padding"))
        if d > 1:
            out.append(S(x, 2, kwargs={"divisor_override": 3}, desc="divisor_override"))
    return out


def _adaptive_samples(d, kind):
    x = n(2, 3, *([7] * d))
    out = [
        S(x, 3, desc="3 from 7"),
        S(x, 1, desc="global"),
        S(x, 7, desc="identity"),
        S(x[0], 2, desc="unbatched"),
        S(x, 4, desc="strided", strided=True),
    ]
    if kind == "max":
        out.append(S(x, 3, kwargs={"return_indices": True}, desc="indices"))
    if d > 1:
        out.append(S(x, (2, None) + (None,) * (d - 2), desc="None keeps a size"))
    return out


_POOL_DTYPES = {
    "max": {
        d: "ember's max pooling takes integer tensors (a maximum needs no rounding); "
        "PyTorch's CPU kernels refuse them"
        for d in _INTS
    },
    "avg": {"int64": _FLOAT_KERNELS.format("average pooling", "int64")},
}
_POOL3D_HALF = {
    d: "ember's 3-d average pooling takes half precision (computed in float32); PyTorch's "
    "CPU kernel refuses it"
    for d in ("float16", "bfloat16")
}

for _d in (1, 2, 3):
    for _kind in ("max", "avg"):
        _differences = dict(_POOL_DTYPES[_kind])
        if _kind == "avg" and _d == 3:
            _differences.update(_POOL3D_HALF)
        OPS.append(
            OpInfo(
                f"{_kind}_pool{_d}d",
                lambda d=_d, k=_kind: _pool_samples(d, k),
                sweep=1,
                # (torch.max_pool2d takes no return_indices, torch.adaptive_max_pool2d always
                # returns them: ember's top-level functions are F's)
                torch_spellings={"T": "F"},
                dtype_differences=_differences,
            )
        )
        OPS.append(
            OpInfo(
                f"adaptive_{_kind}_pool{_d}d",
                lambda d=_d, k=_kind: _adaptive_samples(d, k),
                sweep=1,
                torch_spellings={"T": "F"},
                dtype_differences=dict(_POOL_DTYPES[_kind]),
            )
        )


def _grad(lib):
    return ember.autograd.grad if lib.name == "ember" else lib.mod.autograd.grad


def _differentiated(fn, wrt=1):
    """A call returning the first ``wrt`` inputs' gradients of ``sum(fn(...) * w)`` (``w``
    the last input), squared and summed: the test differentiates that again, so the backward
    ops' own VJPs (second derivatives) run against PyTorch's."""

    def call(lib, *args):
        *inputs, w = args
        y = fn(lib, *inputs)
        grads = _grad(lib)((y * w).sum(), inputs[:wrt], create_graph=True)
        return sum((g * g).sum() for g in grads)

    return call


def _second(name, fn, samples, wrt=1):
    return OpInfo(
        f"{name}, differentiated twice",
        samples,
        call=_differentiated(fn, wrt),
        spellings=("op",),
        dtypes=(),
        rtol=1e-9,
    )


OPS += [
    _second(
        "max_pool2d",
        lambda lib, x: lib.F.max_pool2d(x, 2),
        lambda: [S(n(2, 3, 6, 6), n(2, 3, 3, 3), desc="kernel 2")],
    ),
    _second(
        "max_pool2d's gradient",  # (a third derivative: pool_gather's VJP)
        lambda lib, x: _grad(lib)((lib.F.max_pool2d(x, 2) ** 3).sum(), x, create_graph=True)[0],
        lambda: [S(n(1, 2, 4, 4), n(1, 2, 4, 4), desc="kernel 2")],
    ),
    _second(
        "avg_pool2d",
        lambda lib, x: lib.F.avg_pool2d(x, 3, 2, 1),
        lambda: [S(n(2, 3, 6, 6), n(2, 3, 3, 3), desc="kernel 3, stride 2, padding 1")],
    ),
    _second(
        "conv2d",
        lambda lib, x, k: lib.F.conv2d(x, k, padding=1) ** 2,
        lambda: [S(n(2, 3, 5, 5), n(4, 3, 3, 3), n(2, 4, 5, 5), desc="padding 1")],
        wrt=2,
    ),
    _second(
        "getitem",
        lambda lib, x: x[:, 1:3] ** 3,
        lambda: [S(n(3, 4), n(3, 2), desc="slice")],
    ),
    _second(
        "pad",
        lambda lib, x: lib.F.pad(x, (1, 2), mode="reflect") ** 3,
        lambda: [S(n(2, 5), n(2, 8), desc="reflect")],
    ),
]
