"""``ember.nn.utils.parametrize``: a parameter (or buffer) computed from other tensors each time
it is read, as PyTorch's module of the same name.

``register_parametrization(module, "weight", p)`` moves ``module.weight`` into
``module.parametrizations.weight`` (a `ParametrizationList`): its ``original`` (or, when ``p``'s
``right_inverse`` returns several tensors, ``original0``, ``original1``, ...) is what is stored
and trained, and reading ``module.weight`` returns ``p(original)``. The state_dict keys are
PyTorch's (``parametrizations.weight.original0``, ...), so parametrized state_dicts move between
the two. As in PyTorch the module's class is swapped for a subclass named
``Parametrized<Class>`` holding the property.
"""

from __future__ import annotations

import contextlib

from ...autograd import no_grad
from ...errors import ArgumentError, ArgumentTypeError, ShapeError
from ...ops._registry import TensorBase
from ...ops._util import fmt_shape
from ..container import ModuleDict, ModuleList
from ..module import Module
from ..parameter import Parameter

_cache: dict | None = None  # while `cached()` is active: (id(module), name) -> tensor


@contextlib.contextmanager
def cached():
    """Compute each parametrized tensor once inside the block (e.g. a weight shared by every
    step of a recurrent loop), instead of at every read."""
    global _cache
    outer = _cache
    _cache = {} if outer is None else outer
    try:
        yield
    finally:
        _cache = outer


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the original tensor(s) they
    start from."""

    def __init__(self, modules, original: TensorBase, unsafe: bool = False) -> None:
        super().__init__(modules)
        self.unsafe = unsafe
        with no_grad():
            new = original
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    # PyTorch's rule: a right_inverse that raises NotImplementedError here is
                    # taken as the identity (orthogonal's matrix_exp without trivialization)
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if isinstance(new, TensorBase):
            self.is_tensor, self.ntensors = True, 1
            with no_grad():
                if new is not original:
                    original.data = new.detach()
            self._store("original", original)
        else:
            new = tuple(new)
            self.is_tensor, self.ntensors = False, len(new)
            for i, t in enumerate(new):
                self._store(f"original{i}", Parameter(t.detach(), original.requires_grad))

    def _store(self, name: str, tensor) -> None:
        if isinstance(tensor, Parameter):
            self.register_parameter(name, tensor)
        else:
            self.register_buffer(name, tensor)

    def originals(self) -> tuple:
        if self.is_tensor:
            return (self.original,)
        return tuple(getattr(self, f"original{i}") for i in range(self.ntensors))

    def right_inverse(self, value) -> None:
        """Set the originals so that the parametrized tensor becomes ``value``."""
        with no_grad():
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    value = module.right_inverse(value)
                elif len(self) > 1 or not self.unsafe:
                    raise RuntimeError(
                        f"parametrization {type(module).__name__} does not implement "
                        "right_inverse, so the parametrized tensor cannot be assigned"
                    )
            values = (value,) if self.is_tensor else tuple(value)
            for original, v in zip(self.originals(), values):
                original.copy_(v)

    def forward(self):
        x = self[0](*self.originals())
        for module in list(self)[1:]:
            x = module(x)
        return x


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has any parametrization (or one on ``tensor_name``)."""
    parametrizations = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def _inject_class(module: Module) -> None:
    cls = type(module)
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {})


def _inject_property(module: Module, tensor_name: str) -> None:
    def get(self):
        if _cache is None:
            return self.parametrizations[tensor_name]()
        key = (id(self), tensor_name)
        if key not in _cache:
            _cache[key] = self.parametrizations[tensor_name]()
        return _cache[key]

    def set_(self, value) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(type(module), tensor_name, property(get, set_))


def register_parametrization(
    module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False
) -> Module:
    """Parametrize ``module.<tensor_name>`` by ``parametrization`` (appended to the list when
    the tensor is already parametrized). Unless ``unsafe``, the parametrization must keep the
    tensor's shape and dtype."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            before = getattr(module, tensor_name)
            _check_same("register_parametrization", tensor_name, before, parametrization(before))
        plist.append(parametrization)
        plist.unsafe |= unsafe
        return module
    if tensor_name not in module._parameters and tensor_name not in module._buffers:
        raise ArgumentError(
            f"Module '{module}' does not have a parameter, a buffer, or a parametrized element "
            f"with name '{tensor_name}'"
        )
    original = getattr(module, tensor_name)
    if original is None:
        raise ArgumentError(f"cannot parametrize '{tensor_name}': it is None")
    plist = ParametrizationList([parametrization], original, unsafe=unsafe)
    if not unsafe:
        _check_same("register_parametrization", tensor_name, original, plist())
    delattr(module, tensor_name)
    if not is_parametrized(module):
        _inject_class(module)
        module.parametrizations = ModuleDict()
    _inject_property(module, tensor_name)
    module.parametrizations[tensor_name] = plist
    return module


def _check_same(op: str, name: str, original, new) -> None:
    if not isinstance(new, TensorBase):
        raise ArgumentTypeError(
            f"{op}: a parametrization must return a tensor, got {type(new).__name__}"
        )
    if tuple(new.shape) != tuple(original.shape) or new.dtype != original.dtype:
        raise ShapeError(
            f"the parametrization changes '{name}' from {fmt_shape(original.shape)} "
            f"{original.dtype} to {fmt_shape(new.shape)} {new.dtype}; pass unsafe=True if "
            "that is intended",
            op=op,
        )


def remove_parametrizations(
    module: Module, tensor_name: str, leave_parametrized: bool = True
) -> Module:
    """Undo `register_parametrization` for ``tensor_name``: the tensor becomes a plain parameter
    again, holding its current parametrized value (or, with ``leave_parametrized=False``, its
    original)."""
    if not is_parametrized(module, tensor_name):
        raise ArgumentError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
                original.data = value.detach()
    elif leave_parametrized:
        value = getattr(module, tensor_name)
        original = Parameter(value.detach(), value.requires_grad)
    else:
        raise ArgumentError(
            "Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is "
            "parametrized in terms of a sequence of tensors."
        )
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    if isinstance(original, Parameter):
        module.register_parameter(tensor_name, original)
    else:
        module.register_buffer(tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module).__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class before `register_parametrization` swapped it."""
    return type(module).__bases__[0] if is_parametrized(module) else type(module)


__all__ = [
    "ParametrizationList",
    "cached",
    "is_parametrized",
    "register_parametrization",
    "remove_parametrizations",
    "type_before_parametrizations",
]
