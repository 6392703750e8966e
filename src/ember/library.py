"""``ember.library``: PyTorch's ``torch.library.custom_op`` API, for programs that define their
own operators.

``@custom_op("mylib::name", mutates_args=())`` turns a function of tensors into an operator:
called, it runs the function with gradients off (an operator is opaque to autograd, as in
PyTorch), and ``register_autograd(backward, setup_context=...)`` gives it a gradient: the call
then goes through an `ember.autograd.Function` made of the three, so eager autograd and
captured graphs (`ember.function`, `ember.compile`) use the registered backward.
``register_kernel("cpu")`` replaces the implementation (ember runs on the CPU: another device's
kernel is kept and never runs); ``register_fake`` records the shape function (ember captures
by running the implementation, which must then be made of ember ops; one that leaves them,
through ``.numpy()``, makes `ember.compile` run the caller eagerly, as a graph break does).
Each op is also ``ember.ops.<namespace>.<name>`` (PyTorch's ``torch.ops``).
Calling an operator that mutates an argument not listed in ``mutates_args`` is not checked.
"""

from __future__ import annotations

import functools
import inspect

from ._missing import module_getattr
from .errors import ArgumentError, AutogradError
from .ops import _registry

__all__ = ["CustomOpDef", "custom_op", "register_autograd", "register_fake", "register_kernel"]

# qualified name ("mylib::twice") -> its CustomOpDef
_OPS: dict = {}


class CustomOpDef:
    """What `custom_op` returns: a callable operator (see the module docstring)."""

    def __init__(self, name: str, fn, mutates_args):
        if not isinstance(name, str) or name.count("::") != 1 or not all(name.split("::")):
            raise ArgumentError(
                f"a custom op's name is 'namespace::name', got {name!r}", op="custom_op"
            )
        if mutates_args != "unknown" and not isinstance(mutates_args, (tuple, list, set)):
            raise ArgumentError(
                "mutates_args must name the arguments the op writes (a tuple; () for none), "
                f"or be 'unknown', got {mutates_args!r}",
                op="custom_op",
            )
        self._name = name
        self._init_fn = fn
        self._kernel = fn
        self._other_kernels: dict = {}
        self._fake = None
        self._backward = None
        self._setup_context = None
        self._function = None  # the autograd.Function, made once the backward is known
        self._mutates = mutates_args
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"<CustomOpDef({self._name})>"

    # ------------------------------------------------------------------------- registration
    def register_kernel(self, device_types, fn=None):
        """The implementation for ``device_types`` ("cpu", or a sequence); usable as a
        decorator. Other devices' kernels are kept (ember runs on the CPU only)."""
        one = isinstance(device_types, str) or device_types is None
        types = (device_types,) if one else tuple(device_types)

        def register(kernel):
            for device in types:
                if device in (None, "cpu"):
                    self._kernel = kernel
                    self._function = None
                else:
                    self._other_kernels[device] = kernel
            return kernel

        return register if fn is None else register(fn)

    def register_fake(self, fn=None, /):
        """The shape function (kept; see the module docstring); usable as a decorator."""

        def register(fake):
            self._fake = fake
            return fake

        return register if fn is None else register(fn)

    def register_autograd(self, backward, /, *, setup_context=None):
        """``backward(ctx, *grads)`` returns one gradient per argument; ``setup_context(ctx,
        inputs, output)`` saves what it needs (``ctx.save_for_backward``)."""
        if not callable(backward) or (setup_context is not None and not callable(setup_context)):
            raise ArgumentError("register_autograd takes functions", op="custom_op")
        self._backward = backward
        self._setup_context = setup_context
        self._function = None

    # --------------------------------------------------------------------------------- call
    def __call__(self, *args, **kwargs):
        if self._backward is None:
            from .grad_mode import no_grad

            with no_grad():  # (opaque to autograd until a backward is registered)
                return self._kernel(*args, **kwargs)
        if self._function is None:
            self._function = self._make_function()
        return self._function.apply(*args, **kwargs)

    def _make_function(self):
        from .autograd_function import Function

        kernel, backward, setup = self._kernel, self._backward, self._setup_context
        name = self._name

        def forward(*args, **kwargs):
            return kernel(*args, **kwargs)

        forward.__signature__ = inspect.signature(kernel)

        def setup_context(ctx, inputs, output):
            if setup is not None:
                setup(ctx, inputs, output)

        def run_backward(ctx, *grads):
            try:
                return backward(ctx, *grads)
            except TypeError as exc:
                raise AutogradError(f"the backward of {name} failed: {exc}", op=name) from exc

        attrs = {
            "forward": staticmethod(forward),
            "setup_context": staticmethod(setup_context),
            "backward": staticmethod(run_backward),
        }
        return type(name.replace("::", "_"), (Function,), attrs)


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None):
    """``@ember.library.custom_op("mylib::name", mutates_args=())``: the function as an
    operator (see the module docstring); also ``custom_op(name, fn, mutates_args=...)``."""

    def wrap(function):
        op = CustomOpDef(name, function, mutates_args)
        if device_types is not None:
            op.register_kernel(device_types, function)
        _OPS[name] = op
        namespace, short = name.split("::")
        _registry.CUSTOM_NAMESPACES.setdefault(namespace, {})[short] = op  # (ember.ops.<ns>)
        return op

    return wrap if fn is None else wrap(fn)


def _op(target) -> CustomOpDef:
    op = _OPS.get(target) if isinstance(target, str) else target
    if not isinstance(op, CustomOpDef):
        raise ArgumentError(f"{target!r} is no custom op made by ember.library.custom_op")
    return op


def register_fake(op, fn=None, /):
    """``torch.library.register_fake(op, fn)``: `CustomOpDef.register_fake`."""
    return _op(op).register_fake(fn)


def register_autograd(op, backward, /, *, setup_context=None):
    """``torch.library.register_autograd(op, backward, setup_context=...)``."""
    _op(op).register_autograd(backward, setup_context=setup_context)


def register_kernel(op, device_types, fn=None, /):
    """``torch.library.register_kernel(op, device_types, fn)``."""
    return _op(op).register_kernel(device_types, fn)


__getattr__ = module_getattr(__name__, globals())
