"""``ember.nn.init``: in-place weight initialisers with PyTorch's names, arguments and formulas.

Every function fills its tensor without recording a gradient and returns it. Random ones draw
from an `ember.Generator` (the default generator unless ``generator=`` is given) as PyTorch's
do, on PyTorch's stream (ember/random_streams.py): after the same seed, uniform fills give
PyTorch's values bit for bit, normal ones within an ulp or two (trunc_normal_ and orthogonal_
follow from them: PyTorch's inverse-CDF and QR constructions).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import random_streams as streams
from ..autograd import no_grad
from ..errors import ArgumentError, user_stacklevel
from ..random import Generator, resolve
from ..tensor import Tensor

_LINEAR = (
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
)


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    if nonlinearity in _LINEAR or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ArgumentError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ArgumentError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.ndim < 2:
        raise ArgumentError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"
        )
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ArgumentError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _write(tensor: Tensor, array: np.ndarray) -> Tensor:
    with no_grad():
        tensor.copy_(Tensor(np.ascontiguousarray(array, dtype=tensor._data.dtype)))
    return tensor


def uniform_(
    tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Generator | None = None
) -> Tensor:
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(
    tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Generator | None = None
) -> Tensor:
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def constant_(tensor: Tensor, val: float) -> Tensor:
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """The identity matrix (2-D tensors only)."""
    if tensor.ndim != 2:
        raise ArgumentError("Only tensors with 2 dimensions are supported")
    return _write(tensor, np.eye(*tensor.shape))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """The Dirac delta (identity convolution) for 3-, 4- and 5-D convolution weights."""
    if tensor.ndim not in (3, 4, 5):
        raise ArgumentError("Only tensors with 3, 4, or 5 dimensions are supported")
    if tensor.shape[0] % groups != 0:
        raise ArgumentError("dim 0 must be divisible by groups")
    per_group = tensor.shape[0] // groups
    out = np.zeros(tensor.shape)
    centre = tuple(s // 2 for s in tensor.shape[2:])
    for g in range(groups):
        for d in range(min(per_group, tensor.shape[1])):
            out[(g * per_group + d, d) + centre] = 1
    return _write(tensor, out)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None):
    """U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))`` (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None):
    """N(0, std^2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float | None:
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=user_stacklevel())
        return None
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    """U(-b, b) with ``b = gain * sqrt(3 / fan)`` (He et al., 2015)."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    """N(0, std^2) with ``std = gain / sqrt(fan)`` (He et al., 2015)."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Generator | None = None,
) -> Tensor:
    """N(mean, std^2) conditioned on [a, b] (bounds in absolute units), sampled exactly by
    PyTorch's rejection scheme, draw for draw: where [a, b] holds more than 0.3 of the mass,
    normal draws redrawn where they fall outside; otherwise uniform proposals on [a, b],
    each accepted where the log of a uniform draw lies below the log density's drop from its
    peak on [a, b], the rejected ones proposed again."""
    if not a < b:
        raise ArgumentError(f"trunc_normal_: the bounds must satisfy a < b, got a={a}, b={b}")
    if std <= 0:
        raise ArgumentError(f"trunc_normal_: std must be positive, got {std}")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
            "The distribution of values may be incorrect.",
            stacklevel=user_stacklevel(),
        )
    from ..ops import api as E

    with no_grad():
        if _phi((b - mean) / std) - _phi((a - mean) / std) > 0.3:
            lo, hi = (tensor.new_tensor(v).item() for v in (a, b))  # in the tensor's dtype
            result = tensor.normal_(mean, std, generator=generator)
            while True:
                outside = (result < lo) | (result > hi)
                if not outside.any():
                    break
                again = E.empty_like(result).normal_(mean, std, generator=generator)
                result = E.where(outside, again, result)
            if result is not tensor:
                tensor.copy_(result)
            return tensor
        mode = max(a, min(mean, b))
        log_peak = -0.5 * ((mode - mean) / std) ** 2

        def log_drop(x):  # the log density relative to its peak on [a, b]
            return x.sub(mean).div_(std).pow_(2).mul_(-0.5).sub_(log_peak)

        tensor.uniform_(a, b, generator=generator)
        pending = E.empty_like(tensor).uniform_(generator=generator).log_().gt(log_drop(tensor))
        result = tensor
        while pending.any():
            candidates = E.empty_like(tensor).uniform_(a, b, generator=generator)
            result = E.where(pending, candidates, result)
            accept = E.empty_like(tensor).uniform_(generator=generator).log_()
            pending = E.where(pending, accept.gt(log_drop(candidates)), pending)
        if result is not tensor:
            tensor.copy_(result)
    return tensor


def orthogonal_(tensor: Tensor, gain: float = 1, generator: Generator | None = None) -> Tensor:
    """A (semi-)orthogonal matrix (trailing dimensions flattened), times ``gain``: the Q of the
    QR decomposition of a Gaussian matrix, signs fixed so that it is uniformly distributed
    (Saxe et al., 2013)."""
    if tensor.ndim < 2:
        raise ArgumentError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():  # PyTorch's: a normal fill of the tensor's dtype, then its QR
        flat = tensor.new_empty((rows, cols)).normal_(0, 1, generator=generator).numpy(force=True)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, (q * gain).reshape(tensor.shape))


def sparse_(
    tensor: Tensor, sparsity: float, std: float = 0.01, generator: Generator | None = None
) -> Tensor:
    """N(0, std^2) with a fraction ``sparsity`` of each column set to zero (2-D only)."""
    if tensor.ndim != 2:
        raise ArgumentError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros = math.ceil(sparsity * rows)
    with no_grad():
        tensor.normal_(0, std, generator=generator)
    values = tensor.numpy(force=True).copy()
    for col in range(cols):  # (PyTorch draws these permutations from the default generator)
        values[streams.permutation(resolve(None), rows)[:zeros], col] = 0
    return _write(tensor, values)


def _deprecated(new):
    """PyTorch's old name of an initializer (``nn.init.normal`` for ``normal_``): the same
    function, with PyTorch's FutureWarning."""
    old = new.__name__[:-1]

    def fn(*args, **kwargs):
        warnings.warn(
            f"`nn.init.{old}` is now deprecated in favor of `nn.init.{new.__name__}`.",
            FutureWarning,
            stacklevel=user_stacklevel(),
        )
        return new(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = old
    fn.__doc__ = f"Deprecated: `{new.__name__}` (PyTorch's old name)."
    return fn


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)

__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "ones_",
    "zeros_",
    "eye_",
    "dirac_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
    "sparse_",
]
