"""`Module`: the base class of every layer, with PyTorch's registration rules and API.

Assigning a `Parameter`, a `Module` or (after ``register_buffer``) a tensor to an attribute
registers it in ``_parameters`` / ``_modules`` / ``_buffers``; attribute lookup falls back to
those tables. Iteration (``named_parameters``, ``named_modules``, ...) walks them in registration
order, skipping duplicates, so keys and orders match PyTorch's for the same model.

Dtype conversion (``to``, ``double``, ...) rewrites the data of the existing Parameter and buffer
objects instead of replacing them, so optimizers holding the parameters stay valid.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator

import numpy as np

from .. import _meta
from .. import dtypes as dt
from ..autograd import no_grad
from ..devices import channels_last, channels_last_3d, check_device, check_memory_format
from ..devices import device as device_type
from ..errors import ArgumentError, ArgumentTypeError, DeviceError
from ..ops._registry import TensorBase
from ..ops.cast import moved
from ..tensor import Tensor
from . import _state
from ._tables import Table
from ._tables import _changed as _tables_changed
from .hooks import HooksMixin
from .parameter import Buffer, Parameter
from .state_hooks import StateDictHooksMixin


def _addindent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _check_name(module: Module, name, what: str) -> None:
    if not isinstance(name, str):
        raise ArgumentTypeError(f"{what} name should be a string, got {type(name).__name__}")
    if name == "" or "." in name:
        raise KeyError(f'{what} name can\'t be empty or contain ".", got "{name}"')
    if "_parameters" not in module.__dict__:
        raise AttributeError(f"cannot assign {what} before Module.__init__() call")


def _holds_tensors(value) -> bool:
    """A tensor, or a tuple or list holding one: a plain attribute captured code reads as
    state (capture/state.py `tensor_attributes`)."""
    if isinstance(value, Tensor):
        return True
    return isinstance(value, (tuple, list)) and any(isinstance(v, Tensor) for v in value)


# `Module.compile`'s implementation, registered by capture/compiled.py (a layer above this one)
_COMPILE_FORWARD: list = []


# the attributes that hold a Table (a dict whose changes are noted: nn/_tables.py)
_TABLE_SLOTS = frozenset(
    "_parameters _buffers _modules _forward_hooks _forward_hooks_with_kwargs "
    "_forward_hooks_always_called _forward_pre_hooks _forward_pre_hooks_with_kwargs "
    "_backward_hooks _backward_pre_hooks".split()
)


class Module(HooksMixin, StateDictHooksMixin):
    """Base class of all neural-network layers; subclasses define ``forward``."""

    training: bool
    # names of Python attributes (beyond ``training``) whose values a captured graph of this
    # module bakes in: ember.function keys its cache on them, so a change retraces
    # (capture/state.py, capture/call_guard.py); DistributedDataParallel's no_sync flag
    _graph_flags: tuple = ()
    # the layout version of this class's state_dict entries, saved in ``state_dict()._metadata``
    # and given back to `_load_from_state_dict` to migrate older checkpoints (PyTorch's)
    _version: int = 1
    # ``torch.save(module)`` keeps the module's attributes (its class named: loaded back with
    # ``weights_only=False``), as PyTorch pickles a whole model; io/_tree.py reads this flag
    _saved_whole = True

    def __setstate__(self, state: dict) -> None:
        """A module rebuilt from its attributes (``load(weights_only=False)`` of a whole-model
        checkpoint, or pickle): its tables are Tables again and its parameters Parameters."""
        for name, value in state.items():
            if type(value) is dict and name in _TABLE_SLOTS:
                value = Table(value)
            object.__setattr__(self, name, value)
        params = self.__dict__.get("_parameters")
        if params is not None:
            for name, p in list(params.items()):
                if p is not None and not isinstance(p, Parameter):
                    dict.__setitem__(params, name, Parameter(p, requires_grad=p.requires_grad))

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise ArgumentTypeError(
                f"{type(self).__name__}.__init__() got unexpected arguments; Module.__init__ "
                "takes none"
            )
        set_ = object.__setattr__
        set_(self, "training", True)
        set_(self, "_parameters", Table())
        set_(self, "_buffers", Table())
        set_(self, "_non_persistent_buffers_set", set())
        set_(self, "_modules", Table())
        # (hooks too: a captured graph holds what they did, so ember.function's key reads
        # them, and registering or removing one must send a call past its guard)
        set_(self, "_forward_hooks", Table())
        set_(self, "_forward_hooks_with_kwargs", Table())
        set_(self, "_forward_hooks_always_called", Table())
        set_(self, "_forward_pre_hooks", Table())
        set_(self, "_forward_pre_hooks_with_kwargs", Table())
        set_(self, "_backward_hooks", Table())
        set_(self, "_backward_pre_hooks", Table())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing a "forward" method')

    # ------------------------------------------------------------------------ registration
    def register_parameter(self, name: str, param: Parameter | None) -> None:
        _check_name(self, name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise ArgumentTypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(ember.nn.Parameter or None required)"
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        _check_name(self, name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise ArgumentTypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                "(ember.Tensor or None required)"
            )
        if isinstance(tensor, Buffer):  # store a plain tensor sharing the Buffer's memory
            plain = Tensor._wrap(tensor._data)
            plain._vc = tensor._vc
            tensor = plain
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        _check_name(self, name, "module")
        if module is not None and not isinstance(module, Module):
            raise ArgumentTypeError(f"{type(module).__name__} is not a Module subclass")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def __getattr__(self, name: str):
        # reached only when normal lookup fails (every parameter, buffer and submodule read);
        # __dict__.get avoids recursion while copying
        d = self.__dict__
        entries = d.get("_parameters")
        if entries is not None and name in entries:
            return entries[name]
        entries = d.get("_buffers")
        if entries is not None and name in entries:
            return entries[name]
        entries = d.get("_modules")
        if entries is not None and name in entries:
            return entries[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value) -> None:
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, keep="_parameters")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise ArgumentTypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(ember.nn.Parameter or None expected)"
                )
            params[name] = None
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, keep="_modules")
            self._modules[name] = value
        elif name in self.__dict__.get("_modules", ()):
            if value is not None:
                raise ArgumentTypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' "
                    "(ember.nn.Module or None expected)"
                )
            self._modules[name] = None
        elif isinstance(value, Buffer) or name in self.__dict__.get("_buffers", ()):
            if isinstance(value, TensorBase) and not isinstance(value, Tensor):
                # a graph value while a function is captured (``self.center = self.center * m
                # + c * (1 - m)``): held as an attribute, read as the buffer, until the trace
                # ends; each run then sets the buffer to its value (capture/writebacks.py)
                _tables_changed()
                object.__setattr__(self, name, value)
                return
            if value is not None and not isinstance(value, Tensor):
                raise ArgumentTypeError(
                    f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                    "(ember.Tensor or None expected)"
                )
            if isinstance(value, Buffer):
                persistent = value.persistent
            else:
                persistent = name not in self._non_persistent_buffers_set
            self._forget(name, keep="_buffers")
            self.register_buffer(name, value, persistent)
        else:
            if _holds_tensors(value) or _holds_tensors(self.__dict__.get(name)):
                _tables_changed()  # (a captured function reads such attributes as state)
            object.__setattr__(self, name, value)

    def _forget(self, name: str, keep: str) -> None:
        """Drop ``name`` from every table but ``keep``, which the caller is about to assign:
        a reassigned parameter, buffer or child keeps its place in its table, as PyTorch's
        (``setattr(seq, "1", m)`` replaces the second layer of a Sequential in place)."""
        self.__dict__.pop(name, None)
        for table in ("_parameters", "_modules", "_buffers"):
            if table != keep:
                getattr(self, table).pop(name, None)
        if keep != "_buffers":
            self._non_persistent_buffers_set.discard(name)

    def __delattr__(self, name: str) -> None:
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(
            set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules)
        )

    # ------------------------------------------------------------------------ lookup
    def get_submodule(self, target: str) -> Module:
        if target == "":
            return self
        module = self
        walked = []
        for item in target.split("."):
            if item not in module._modules or module._modules[item] is None:
                where = ".".join(walked) or type(self).__name__
                raise AttributeError(f"{where} has no submodule `{item}` (looking up '{target}')")
            module = module._modules[item]
            walked.append(item)
        return module

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Replace (or, unless ``strict``, add) the submodule at dotted path ``target``."""
        if target == "":
            raise ArgumentError("set_submodule: cannot set the module itself (target is empty)")
        path, _, name = target.rpartition(".")
        parent = self.get_submodule(path)
        if strict and name not in parent._modules:
            raise AttributeError(f"{type(parent).__name__} has no submodule `{name}`")
        if not isinstance(module, Module):
            raise ArgumentError(f"set_submodule: {type(module).__name__} is not a Module")
        parent.add_module(name, module)

    def share_memory(self) -> Module:
        """Returns ``self``: ember's tensors live in one process's memory (nothing to move)."""
        return self

    def get_parameter(self, target: str) -> Parameter:
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if module._parameters.get(name) is None:
            raise AttributeError(f"{type(module).__name__} has no parameter `{name}`")
        return module._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        if module._buffers.get(name) is None:
            raise AttributeError(f"{type(module).__name__} has no buffer `{name}`")
        return module._buffers[name]

    # ------------------------------------------------------------------------ iteration
    def _named_members(self, members, prefix: str, recurse: bool, remove_duplicate: bool):
        seen = set()
        modules = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for module_prefix, module in modules:
            for name, value in members(module):
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield (module_prefix + "." if module_prefix else "") + name, value

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        return self._named_members(
            lambda m: m._parameters.items(), prefix, recurse, remove_duplicate
        )

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_modules(
        self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    # ------------------------------------------------------------------------ modes, grads
    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ArgumentError("training mode is expected to be boolean")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad = p.grad.detach()
                with no_grad():
                    p.grad.zero_()

    def apply(self, fn: Callable[[Module], None]) -> Module:
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------------ state dict
    def state_dict(self, *, destination=None, prefix: str = "", keep_vars: bool = False) -> dict:
        """Parameters and persistent buffers by dotted name (detached unless ``keep_vars``);
        its ``_metadata`` attribute holds each module's ``{"version": _version}`` by prefix."""
        out = destination
        if out is None:
            out = OrderedDict()
            out._metadata = OrderedDict()
        return _state.save(self, out, prefix, keep_vars)

    def _save_to_state_dict(self, destination, prefix: str, keep_vars: bool) -> None:
        """Write this module's own entries (parameters, persistent buffers, extra state) into
        ``destination`` under ``prefix``; `state_dict` calls it for each module. A module may
        override it, as PyTorch code does (renaming or converting what it saves), calling
        ``super()._save_to_state_dict(...)`` for the usual entries."""
        _state.save_local(self, destination, prefix, keep_vars)

    def get_extra_state(self):
        """Override (with `set_extra_state`) to add any picklable object to ``state_dict``
        under ``<prefix>_extra_state``, as in PyTorch."""
        raise RuntimeError(
            "Reached a code path in Module.get_extra_state() that should never be called: "
            "override get_extra_state() in a module to save extra state"
        )

    get_extra_state._default_extra_state = True

    def set_extra_state(self, state) -> None:
        """Receives what `get_extra_state` returned, from ``load_state_dict``."""
        raise RuntimeError(
            "Reached a code path in Module.set_extra_state() that should never be called: "
            "override set_extra_state() in a module whose state_dict has _extra_state"
        )

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy ``state_dict`` into this module's tensors; returns ``(missing_keys,
        unexpected_keys)``. Raises `ember.StateDictError` (loading nothing) on unknown or
        missing keys when ``strict``, and on a wrong shape or a non-tensor value always."""
        return _state.load(self, state_dict, strict=strict, assign=assign)

    # ------------------------------------------------------------------------ conversion
    def _apply_floating(self, dtype: dt.DType) -> Module:
        with no_grad():
            for module in self.modules():
                tensors = list(module._parameters.values()) + list(module._buffers.values())
                for t in tensors:
                    if t is None or not t.dtype.is_floating_point or t.dtype is dtype:
                        continue
                    t.data = t.to(dtype)
                    if t.grad is not None:
                        t.grad = t.grad.detach().to(dtype)
        return self

    def to(self, *args, **kwargs) -> Module:
        """``to(dtype)``, ``to("cpu")``, ``to(tensor)``, ``to(device, dtype)``,
        ``to(memory_format=)``: floating-point parameters and buffers are converted; devices
        other than the CPU raise `DeviceError`; a memory format lays out the parameters and
        buffers of its rank (4 for channels_last) in its order, as PyTorch's."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        fmt = kwargs.pop("memory_format", None)
        check_memory_format(fmt, "Module.to(memory_format)")
        if fmt is not None:
            self._lay_out(fmt)
        if kwargs:
            raise ArgumentTypeError(f"Module.to() got unexpected arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                dtype = a.dtype
            elif isinstance(a, device_type) or (isinstance(a, str) and not _is_dtype_name(a)):
                device = a
            elif isinstance(a, int) and not isinstance(a, bool):
                device = a  # to(0) is cuda:0 in PyTorch
            elif a is not None:
                dtype = a
        if device is not None:
            self._move(check_device(device, "Module.to(device)"))
        if dtype is None:
            return self
        dtype = dt.as_dtype(dtype)
        if not dtype.is_floating_point:
            raise ArgumentTypeError(
                f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}"
            )
        return self._apply_floating(dtype)

    def _apply(self, fn: Callable, recurse: bool = True) -> Module:
        """PyTorch's ``Module._apply``: ``fn`` of each parameter (and its gradient) becomes that
        Parameter's data, so optimizers holding it stay valid; each buffer is replaced by ``fn``
        of it (gradients off throughout). ``recurse``: the submodules' too, children first."""
        if recurse:
            for child in self.children():
                child._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                new = fn(p)
                if not isinstance(new, Tensor):
                    raise ArgumentTypeError(
                        f"Module._apply: the function returned {type(new).__name__} for a "
                        "parameter, not a tensor"
                    )
                p.data = new
                if p.grad is not None:
                    p.grad = fn(p.grad).detach()
            for name, b in list(self._buffers.items()):
                if b is not None:
                    self._buffers[name] = fn(b)
        return self

    def _move(self, target) -> None:
        """Parameters and buffers onto the device ``target``: onto the meta device as meta
        copies; from it to the CPU refused (a meta tensor has no data to copy)."""
        tensors = (
            t for m in self.modules() for t in (*m._parameters.values(), *m._buffers.values())
        )
        if target.type == "meta" or any(t is not None and t.is_meta for t in tensors):
            self._apply(lambda t: moved(t, target, "Module.to"))

    def compile(self, **kwargs) -> None:
        """PyTorch's ``Module.compile``: this module's forward compiled in place by
        ``ember.compile`` with these keyword arguments (``fullgraph``, ``dynamic``, ``backend``,
        ``mode``, ``options``, ``disable``); the module stays itself (its state_dict keys, unlike
        ``ember.compile(module)``'s wrapper's, are unchanged), its hooks run around the
        compiled forward."""
        _COMPILE_FORWARD[0](self, **kwargs)

    def to_empty(self, *, device, recurse: bool = True) -> Module:
        """Parameters and buffers replaced by uninitialized ones of the same shapes and dtypes
        on ``device`` (the CPU, or the meta device; `DeviceError` otherwise), as PyTorch's: how
        a model built on the meta device gets memory (zeros here: ember never hands out
        uninitialized memory), for its ``reset_parameters`` or a checkpoint to fill."""
        target = check_device(device, "Module.to_empty(device)")

        def empty(t: Tensor) -> Tensor:
            shape, np_dtype = tuple(t.shape), t._data.dtype
            if target.type == "meta":
                return Tensor._wrap(_meta.stand_in(shape, np_dtype))
            return Tensor._wrap(np.zeros(shape, np_dtype))

        return self._apply(empty, recurse=recurse)

    def type(self, dst_type) -> Module:
        """Every parameter and buffer cast to ``dst_type`` (a dtype or a tensor type name,
        integer types included), as PyTorch's ``Module.type``."""
        return self._apply(lambda t: t.type(dst_type))

    def _lay_out(self, fmt) -> None:
        rank = {channels_last: 4, channels_last_3d: 5}.get(fmt)
        for module in self.modules():
            for t in list(module._parameters.values()) + list(module._buffers.values()):
                if t is not None and (rank is None or t.ndim == rank):
                    with no_grad():
                        t.data = t.to(memory_format=fmt)

    def float(self) -> Module:
        return self._apply_floating(dt.float32)

    def double(self) -> Module:
        return self._apply_floating(dt.float64)

    def half(self) -> Module:
        return self._apply_floating(dt.float16)

    def bfloat16(self) -> Module:
        return self._apply_floating(dt.bfloat16)

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self, device=None) -> Module:
        """Refused with `DeviceError`: ember runs on the CPU only."""
        raise DeviceError(
            "ember runs on the CPU only, so a module cannot move to a GPU; use .cpu() or "
            ".to('cpu') (both return the module), and pick the device with "
            "ember.cuda.is_available()",
            op="Module.cuda",
        )

    # ------------------------------------------------------------------------ repr
    def extra_repr(self) -> str:
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [
            f"({name}): " + _addindent(repr(module), 2) for name, module in self._modules.items()
        ]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"


def _is_dtype_name(text: str) -> bool:
    try:
        dt.as_dtype(text)
    except (TypeError, ValueError, KeyError):
        return False
    return True
