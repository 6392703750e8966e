"""The slopes of randomized leaky ReLU in training (``F.rrelu(training=True)``): a random
primitive, ``random_rrelu_slopes(x, lower, upper, generator)``, drawing as PyTorch's CPU
kernel draws them, so a seed gives PyTorch's slopes.

ATen's kernel walks the input in memory order and draws only for the elements that are not
positive: each such element takes ``u * (upper - lower) + lower`` with ``u`` a double uniform
(53 bits of a 64-bit word), rounded to the input's compute type (float for float32 and the
16-bit dtypes); a positive element keeps slope 1 and draws nothing. So the number of words
drawn depends on the input's values, and the op takes the input as an operand (its draws
read it), which a captured graph keeps too.
"""

from __future__ import annotations

import numpy as np

from ..types import TensorType
from ._registry import OpDef, apply, register
from ._util import elementwise_cost, require_float


def _infer(x, *, lower, upper, generator):
    require_float("rrelu", x)
    return TensorType(tuple(x.shape), x.dtype)


def _kernel(x, *, lower, upper, generator):
    flat = np.ascontiguousarray(x).reshape(-1)
    drawn = flat <= 0
    count = int(np.count_nonzero(drawn))
    words = generator.words64(count) & np.uint64((1 << 53) - 1)
    u = words.astype(np.float64) * 2.0**-53
    compute = np.float64 if x.dtype == np.float64 else np.float32
    slopes = (u * (float(upper) - float(lower)) + float(lower)).astype(compute)
    out = np.ones(flat.shape, compute)
    out[drawn] = slopes
    return out.astype(x.dtype).reshape(x.shape)


def _workspace(node, layouts) -> int:
    """At most (every element drawn) per element: the mask (1 byte), the slopes in the
    compute type (4 or 8) and the draws' temporaries at their peak, the words and their
    doubles (20 bytes beside float32 slopes, 24 beside float64 ones; measured: 25 and 33);
    a 16-bit result is rounded from the float32 slopes while they are held (27). The draws
    are not made in blocks: their number is known only from the values."""
    size = 1
    for d in node.outputs[0].shape:
        size *= d if isinstance(d, int) else 1
    return {8: 33, 4: 25}.get(node.outputs[0].dtype.itemsize, 27) * size


RRELU_SLOPES = register(
    OpDef(
        name="random_rrelu_slopes",
        kind="random",
        infer=_infer,
        kernel=_kernel,
        cost=elementwise_cost(1),
        workspace=_workspace,
        doc="random_rrelu_slopes(x, lower, upper, generator): rrelu's training slopes, "
        "U(lower, upper) where x <= 0 (drawn in memory order), 1 elsewhere",
    )
)


def rrelu_slopes(x, lower: float, upper: float, generator):
    """The slopes rrelu multiplies ``x`` by in training (see the module's docstring)."""
    return apply(RRELU_SLOPES, x, lower=float(lower), upper=float(upper), generator=generator)
