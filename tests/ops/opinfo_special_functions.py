"""OpInfos of ops/special_functions.py: torch.special's scaled Bessel and error functions,
ndtri, the Bessel functions, the orthogonal polynomials, gammainc / gammaincc / zeta, and the
top-level igamma / igammac; see opinfo.py.

PyTorch's Bessel functions are its own approximations, about 1e-8 relative from the true values
in float64 (airy_ai 3e-5 near its zeros: mpmath agrees with ember's SciPy values to float64,
tests/test_special_functions.py): they are compared at the tolerance those leave."""

import numpy as np

from ember.ops.special_functions import POLYNOMIALS

from .opinfo import FLOATS, OpInfo, Sample, rng

R = rng(2713)


def u(low, high, *shape):
    return R.uniform(low, high, shape)


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def _special(name, samples, **kw):
    def call(lib, *args, **kwargs):
        return getattr(lib.mod.special, name)(*args, **kwargs)

    return OpInfo(f"special.{name}", samples, call=call, spellings=("T",), dtypes=(), **kw)


def _unary_samples(low, high, special, grad=True):
    return lambda: [
        S(u(low, high, 2, 3), desc="(2, 3)", grad=grad),
        S(u(low, high, 3, 4), desc="strided", strided=True, grad=grad),
        S(np.array(special, dtype=np.float64), desc="special values", grad=False),
        S(np.array([1, 2, 0]), desc="integers", grad=False),
    ]


EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 30.0]
OPS = [
    _special("i0e", _unary_samples(-4, 4, EDGES)),
    _special("i1e", _unary_samples(-4, 4, EDGES)),
    _special("erfcx", _unary_samples(-2, 4, EDGES), rtol=1e-9),
    _special("ndtri", _unary_samples(0.02, 0.98, [np.nan, 0.0, 1.0, 0.5, -0.5, 1.5])),
]
for _name, _low, _high, _rtol in (
    ("airy_ai", -3, 3, 1e-4),
    ("bessel_j0", -6, 6, 1e-5),
    ("bessel_j1", -6, 6, 1e-5),
    ("bessel_y0", 0.1, 6, 1e-5),
    ("bessel_y1", 0.1, 6, 1e-5),
    ("modified_bessel_i0", -4, 4, 1e-8),
    ("modified_bessel_i1", -4, 4, 1e-8),
    ("modified_bessel_k0", 0.1, 6, 1e-8),
    ("modified_bessel_k1", 0.1, 6, 1e-8),
    ("scaled_modified_bessel_k0", 0.1, 6, 1e-8),
    ("scaled_modified_bessel_k1", 0.1, 6, 1e-8),
    ("spherical_bessel_j0", -6, 6, 1e-8),
):
    # (no gradient, as PyTorch's: the results do not require grad)
    OPS.append(
        _special(_name, _unary_samples(_low, _high, EDGES, grad=False), rtol=_rtol, atol=1e-6)
    )


def _polynomial_samples():
    x = u(-1.2, 1.2, 2, 6)
    degrees = np.array([[-1, 0, 1, 2, 5, 9], [3, 4, 7, 8, 12, 6]])
    return [
        S(x, degrees.astype(np.float64), desc="float degrees", grad=False),
        S(x, degrees, desc="int degrees", grad=False),
        S(x, 3, desc="python degree", grad=False),
        # (no NaN: PyTorch 2.13 returns uninitialized memory for most of them; ember NaN,
        # tests/test_special_functions.py)
        S(np.array([1.0, -1.0, 0.0, 0.5, 2.0]), 7, desc="ends", grad=False),
        S(u(-1, 1, 3, 4), 4.7, desc="truncated degree, strided", strided=True, grad=False),
    ]


for _name in POLYNOMIALS:  # (every one ember defines)
    OPS.append(_special(_name, _polynomial_samples, rtol=1e-9, atol=1e-9))


def _gamma_samples():
    a, x = u(0.5, 4, 2, 3), u(0.1, 5, 2, 3)
    return [
        # (a gradient in the second argument only, as PyTorch's)
        S(a, x, desc="(2, 3)", nondiff=(0,)),
        S(u(0.5, 4, 3, 1), u(0.1, 5, 1, 4), desc="broadcast", nondiff=(0,)),
        S(a, 2.0, desc="python other", grad=False),
        S(np.array([1.0, 2.0, 0.0, -1.0, np.nan]), np.array([0.0, np.inf, 1.0, 1.0, 1.0]),
          desc="edges", grad=False),
    ]  # fmt: skip


def _zeta_samples():
    x, q = u(1.5, 5, 2, 3), u(0.5, 3, 2, 3)
    return [
        S(x, q, desc="(2, 3)", nondiff=(0,)),
        S(np.array([2.0, 1.0, 0.5, 3.0]), np.array([1.0, 1.0, 1.0, -0.5]), desc="edges",
          grad=False),
    ]  # fmt: skip


# ember takes a Python number as a weak scalar operand, as its other binary functions do
_SCALAR = {"python other": "ember accepts a Python number; PyTorch wants a tensor"}
OPS += [
    _special("gammainc", _gamma_samples, rtol=1e-9, differences=_SCALAR),
    _special("gammaincc", _gamma_samples, rtol=1e-9, differences=_SCALAR),
    _special("zeta", _zeta_samples, rtol=1e-9),
]
for _name in ("igamma", "igammac"):
    OPS += [
        OpInfo(
            _name,
            _gamma_samples,
            dtypes=FLOATS,
            rtol=1e-9,
            spellings=("T", "M"),
            differences=_SCALAR,
        ),
        OpInfo(
            _name,
            lambda: _gamma_samples()[:1],
            dtypes=(),
            grad=False,
            rtol=1e-9,
            spellings=("I",),
        ),
    ]
