"""Lazy layers: LazyLinear, LazyConv1d/2d/3d, LazyConvTranspose1d/2d/3d, LazyBatchNorm1d/2d/3d
and LazyInstanceNorm1d/2d/3d infer their input size (``in_features``, ``in_channels``,
``num_features``) from the first input and then become the ordinary layer (``type(m)`` is
``nn.Linear`` after the first call), as PyTorch's do.

Until then their parameters are `UninitializedParameter` (buffers `UninitializedBuffer`): a
PyTorch-style placeholder, simplified: it holds an empty array (shape ``(0,)``) rather than
refusing to tell its shape. ``materialize(shape)`` fills it in place with zeros of ``shape``
and turns it into a plain `Parameter` (`Tensor`), so anything that already holds it (an
optimizer built before the first forward) sees the materialized tensor; the layer's
``reset_parameters`` then initializes it as the ordinary layer does. ``load_state_dict`` before
the first call materializes each placeholder to the state's shape, as PyTorch's load hook does.
The first call must be eager (not inside ``ember.function``/``trace``, where it raises an
`EmberError`): the parameters are created then, and capture reads a model's parameters when it
starts.
"""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentError, EmberError
from ..graph import scope as _scope
from ..tensor import Tensor
from .conv import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from .linear import Linear
from .norm_extra import InstanceNorm3d
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
)
from .parameter import Parameter, factory_dtype


class UninitializedParameter(Parameter):
    """A parameter whose shape is not known yet (see the module docstring)."""

    __slots__ = ()
    cls_to_become = Parameter

    def __init__(self, requires_grad: bool = True, device=None, dtype=None) -> None:
        super().__init__(
            Tensor(np.empty((0,), factory_dtype(device, dtype).np)), requires_grad=requires_grad
        )

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Become a zero-filled plain Parameter of ``shape`` (in place)."""
        np_dtype = self._data.dtype if dtype is None else factory_dtype(device, dtype).np
        self._data = np.zeros(tuple(shape), np_dtype)
        self.__class__ = self.cls_to_become

    def __repr__(self) -> str:
        return "<UninitializedParameter>"

    def __deepcopy__(self, memo: dict) -> UninitializedParameter:
        if id(self) not in memo:
            copy = UninitializedParameter(self._requires_grad)
            copy._data = self._data.copy()
            memo[id(self)] = copy
        return memo[id(self)]

    def __reduce_ex__(self, protocol):
        return (_rebuild_uninitialized, (UninitializedParameter, self._data, self._requires_grad))


class UninitializedBuffer(Tensor):
    """A buffer whose shape is not known yet (see the module docstring)."""

    __slots__ = ()
    cls_to_become = Tensor

    def __init__(self, requires_grad: bool = False, device=None, dtype=None) -> None:
        super().__init__(np.empty((0,), factory_dtype(device, dtype).np))

    materialize = UninitializedParameter.materialize

    def __repr__(self) -> str:
        return "<UninitializedBuffer>"

    def __deepcopy__(self, memo: dict) -> UninitializedBuffer:
        if id(self) not in memo:
            copy = UninitializedBuffer()
            copy._data = self._data.copy()
            memo[id(self)] = copy
        return memo[id(self)]

    def __reduce_ex__(self, protocol):
        return (_rebuild_uninitialized, (UninitializedBuffer, self._data, False))


def _rebuild_uninitialized(cls, data, requires_grad: bool):
    value = cls(requires_grad) if cls is UninitializedParameter else cls()
    value._data = data
    return value


def is_lazy(value) -> bool:
    return isinstance(value, (UninitializedParameter, UninitializedBuffer))


class LazyModuleMixin:
    """Infers the uninitialized parameters from the first input (a forward pre-hook that
    removes itself), then turns the module into ``cls_to_become``."""

    cls_to_become: type | None = None

    def _lazy_setup(self) -> None:
        self._initialize_hook = self.register_forward_pre_hook(_infer_parameters)

    def has_uninitialized_params(self) -> bool:
        tensors = list(self._parameters.values()) + list(self._buffers.values())
        return any(is_lazy(t) for t in tensors)

    def initialize_parameters(self, input) -> None:
        raise NotImplementedError

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self._lazy_size() != 0:
            super().reset_parameters()

    def _lazy_size(self) -> int:
        raise NotImplementedError


def _infer_parameters(module, args):
    if _scope.recording():
        # capture reads the model's parameters when it starts: one created now would be a
        # constant of the graph, never updated by an optimizer
        raise EmberError(
            f"{module._get_name()} creates its parameters at its first call, which must run "
            "eagerly: call the model once (on a sample batch) before ember.function or "
            "ember.trace",
            op=module._get_name(),
        )
    module.initialize_parameters(*args)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
    module._initialize_hook.remove()
    del module._initialize_hook
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become
    return None


def _materialize(module, names, shape) -> None:
    for name in names:
        t = module._parameters.get(name, module._buffers.get(name))
        if is_lazy(t):
            t.materialize(shape)


# ---------------------------------------------------------------------------------- linear


class LazyLinear(LazyModuleMixin, Linear):
    """A Linear whose ``in_features`` is the last dimension of its first input."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        Linear.__init__(self, 0, out_features, False, device, dtype)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        self._lazy_setup()

    def _lazy_size(self) -> int:
        return self.in_features

    def initialize_parameters(self, input) -> None:
        if self.has_uninitialized_params():
            self.in_features = int(input.shape[-1])
            _materialize(self, ["weight"], (self.out_features, self.in_features))
            _materialize(self, ["bias"], (self.out_features,))
            self.reset_parameters()
        else:  # materialized by load_state_dict
            self.in_features = int(self.weight.shape[1])


# ---------------------------------------------------------------------------- convolution


class _LazyConvMixin(LazyModuleMixin):
    def _lazy_init(self, bias: bool, device, dtype) -> None:
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        self._lazy_setup()

    def _lazy_size(self) -> int:
        return self.in_channels

    def initialize_parameters(self, input) -> None:
        nd = self.cls_to_become._nd
        if input.ndim not in (nd + 1, nd + 2):
            raise ArgumentError(
                f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                f"{self._get_name()}, but got input of size: {list(input.shape)}"
            )
        if self.has_uninitialized_params():
            self.in_channels = int(input.shape[1] if input.ndim == nd + 2 else input.shape[0])
            if self.in_channels % self.groups:
                raise ArgumentError("in_channels must be divisible by groups")
            k = tuple(self.kernel_size)
            if self.transposed:
                shape = (self.in_channels, self.out_channels // self.groups) + k
            else:
                shape = (self.out_channels, self.in_channels // self.groups) + k
            _materialize(self, ["weight"], shape)
            _materialize(self, ["bias"], (self.out_channels,))
            self.reset_parameters()
        else:
            w = self.weight.shape
            self.in_channels = int(w[0] if self.transposed else w[1] * self.groups)


def _lazy_conv(base: type) -> type:
    def __init__(
        self,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        base.__init__(
            self, 0, out_channels, kernel_size, stride, padding, dilation, groups, False,
            padding_mode, device, dtype,
        )  # fmt: skip
        self._lazy_init(bias, device, dtype)

    doc = f"A {base.__name__} whose ``in_channels`` comes from its first input."
    return type(
        f"Lazy{base.__name__}",
        (_LazyConvMixin, base),
        {"__init__": __init__, "cls_to_become": base, "__doc__": doc, "__module__": __name__},
    )


def _lazy_conv_transpose(base: type) -> type:
    def __init__(
        self,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups: int = 1,
        bias: bool = True,
        dilation=1,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        base.__init__(
            self, 0, out_channels, kernel_size, stride, padding, output_padding, groups, False,
            dilation, padding_mode, device, dtype,
        )  # fmt: skip
        self._lazy_init(bias, device, dtype)

    doc = f"A {base.__name__} whose ``in_channels`` comes from its first input."
    return type(
        f"Lazy{base.__name__}",
        (_LazyConvMixin, base),
        {"__init__": __init__, "cls_to_become": base, "__doc__": doc, "__module__": __name__},
    )


LazyConv1d = _lazy_conv(Conv1d)
LazyConv2d = _lazy_conv(Conv2d)
LazyConv3d = _lazy_conv(Conv3d)
LazyConvTranspose1d = _lazy_conv_transpose(ConvTranspose1d)
LazyConvTranspose2d = _lazy_conv_transpose(ConvTranspose2d)
LazyConvTranspose3d = _lazy_conv_transpose(ConvTranspose3d)


# -------------------------------------------------------------------------- normalization


class _LazyNormMixin(LazyModuleMixin):
    def _lazy_init(self, device, dtype) -> None:
        if self.affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if self.bias is not None:  # (bias=False registered None)
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if self.track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
        self._lazy_setup()

    def _lazy_size(self) -> int:
        return self.num_features

    def initialize_parameters(self, input) -> None:
        if self.has_uninitialized_params():
            self.num_features = int(input.shape[1] if input.ndim > 1 else input.shape[0])
            names = ["weight", "bias", "running_mean", "running_var"]
            _materialize(self, names, (self.num_features,))
            self.reset_parameters()
        else:
            t = self.weight if self.weight is not None else self.running_mean
            if t is not None:
                self.num_features = int(t.shape[0])


def _lazy_norm(base: type, affine: bool, track: bool) -> type:
    def __init__(
        self,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = affine,
        track_running_stats: bool = track,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        base.__init__(self, 0, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self._lazy_init(device, dtype)

    doc = f"A {base.__name__} whose ``num_features`` comes from its first input."
    return type(
        f"Lazy{base.__name__}",
        (_LazyNormMixin, base),
        {"__init__": __init__, "cls_to_become": base, "__doc__": doc, "__module__": __name__},
    )


LazyBatchNorm1d = _lazy_norm(BatchNorm1d, True, True)
LazyBatchNorm2d = _lazy_norm(BatchNorm2d, True, True)
LazyBatchNorm3d = _lazy_norm(BatchNorm3d, True, True)
# (PyTorch's lazy instance norms default to affine=True, track_running_stats=True, unlike
# InstanceNorm*d itself)
LazyInstanceNorm1d = _lazy_norm(InstanceNorm1d, True, True)
LazyInstanceNorm2d = _lazy_norm(InstanceNorm2d, True, True)
LazyInstanceNorm3d = _lazy_norm(InstanceNorm3d, True, True)
