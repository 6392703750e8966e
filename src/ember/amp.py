"""``ember.amp``: automatic mixed precision's entry points, with PyTorch's names (``torch.amp``).

`autocast` computes each op in the precision its policy says (PyTorch's CPU lists): products,
convolutions and attention in the region's dtype (bfloat16 by default, or float16); losses,
linear algebra, FFTs and a few others in float32; cat, stack and index_copy in the widest of
their operands' dtypes; everything else in its operands' dtypes. The policy is a rule of each
op (ops/_rules.py ``autocast``; composites declare it with ops/_autocast.py's ``autocasts``);
this module only opens and closes regions. Casts are ordinary ``cast`` ops, so the tape records
them and each parameter's gradient arrives in its own dtype, and a captured function
(``ember.function``, ``ember.compile``, ``ember.trace``) holds them as graph nodes; the autocast
state a captured function is called in is part of its cache key. The passes drop casts that
change nothing (transforms/simplify.py, by the cast's ``noop`` and ``compose`` rules; CSE merges
repeated ones).

Where PyTorch lets an op through (softmax, log_softmax, layer_norm, relu, gelu, sum, mean, exp,
log, cumsum, batch_norm, max_pool2d, embedding, dropout, ...), ember does too: they compute in
their operands' dtype, so ``softmax`` of a bfloat16 product is bfloat16, as in PyTorch 2.13 on
the CPU (the issue's text asked for float32 there; PyTorch's lists win, tests/amp/ checks
every op's dtype against torch). Where PyTorch raises (``cat`` of bfloat16 and float16 under
bfloat16 autocast), ember raises too.

Backward passes run with autocast off: each VJP computes in the dtypes its forward recorded.

`GradScaler` is dynamic loss scaling that multiplies the loss, unscales the gradients before the
step, skips steps whose gradients overflowed and adapts the scale, with PyTorch's state_dict.
Inside a captured step (``ember.function``/``ember.compile``) its scale and growth tracker are
state the step reads and writes, and the overflow check and the skip are graph values (a
select), so the step is captured once.

Autocast for a device ember does not drive (``"cuda"``, ``"mps"``, ...) warns and disables
itself, as PyTorch does when that device is absent. ``ember.cuda.amp`` (``torch.cuda.amp``'s
deprecated spelling) holds the same two names for CUDA.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from . import dtypes as dt
from .errors import EmberError, user_stacklevel
from .grad_mode import no_grad
from .ops import _autocast as _ac
from .ops import api as E
from .ops._registry import TensorBase, building_graph
from .tensor import Tensor

__all__ = [
    "GradScaler",
    "autocast",
    "custom_bwd",
    "custom_fwd",
    "get_autocast_dtype",
    "is_autocast_available",
    "is_autocast_enabled",
]

_GPU_TYPES = ("cuda", "mps", "xpu", "hpu", "xla", "mtia", "meta")


def _device_type(device) -> str:
    text = str(getattr(device, "type", device))
    return text.split(":")[0]


def is_autocast_available(device_type: str) -> bool:
    """True for ``"cpu"``: the one device ember computes on."""
    return _device_type(device_type) == "cpu"


def is_autocast_enabled(device_type: str = "cpu") -> bool:
    """Whether this thread is inside an enabled autocast region for ``device_type`` (the CPU
    when not given: PyTorch's legacy no-argument form asks about CUDA, which ember lacks)."""
    return _device_type(device_type) == "cpu" and _ac.region() is not None


def get_autocast_dtype(device_type: str = "cpu"):
    """The dtype autocast casts to for ``device_type`` (bfloat16 for the CPU unless a region
    set another; GPU types answer float16, as PyTorch's defaults)."""
    return _ac.local.dtype if _device_type(device_type) == "cpu" else dt.float16


def is_autocast_cpu_enabled() -> bool:
    """PyTorch's older spelling of ``is_autocast_enabled("cpu")``."""
    return is_autocast_enabled("cpu")


def get_autocast_cpu_dtype():
    """PyTorch's older spelling of ``get_autocast_dtype("cpu")``."""
    return get_autocast_dtype("cpu")


def set_autocast_enabled(device_type, enabled=None) -> None:
    """``torch.set_autocast_enabled(device_type, enabled)``: turn this thread's autocast on or
    off without a region (what ``autocast.__enter__`` does, for code that manages the state
    itself); on, it computes in the current autocast dtype. The legacy one-argument form is
    CUDA's, which ember does not drive: a no-op, as any device type but the CPU."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    if _device_type(device_type) != "cpu":
        return
    current = _ac.region()
    if enabled and current is None:
        _ac.set_region(_ac.Region(_ac.local.dtype, _ac.local.cache_enabled))
    elif not enabled and current is not None:
        _ac.set_region(None)


def set_autocast_dtype(device_type, dtype) -> None:
    """``torch.set_autocast_dtype(device_type, dtype)``: the dtype autocast computes in from
    now on, in an enabled region too; another device type than the CPU: a no-op."""
    if _device_type(device_type) != "cpu":
        return
    dtype = dt.as_dtype(dtype)
    _ac.local.dtype = dtype
    current = _ac.region()
    if current is not None:
        _ac.set_region(_ac.Region(dtype, current.cache))


def set_autocast_cpu_enabled(enabled: bool) -> None:
    """PyTorch's older spelling of ``set_autocast_enabled("cpu", enabled)``."""
    set_autocast_enabled("cpu", bool(enabled))


def set_autocast_cpu_dtype(dtype) -> None:
    """PyTorch's older spelling of ``set_autocast_dtype("cpu", dtype)``."""
    set_autocast_dtype("cpu", dtype)


def autocast_increment_nesting() -> int:
    """One more open autocast region (this thread's count, returned), as PyTorch's: code that
    manages the state itself clears the cast cache when `autocast_decrement_nesting` says 0."""
    _ac.local.nesting += 1
    return _ac.local.nesting


def autocast_decrement_nesting() -> int:
    _ac.local.nesting -= 1
    return _ac.local.nesting


def is_autocast_cache_enabled() -> bool:
    return _ac.local.cache_enabled


def clear_autocast_cache() -> None:
    _ac.clear_cache()


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Whether autocast regions opened later (without their own ``cache_enabled``) keep the
    casts of their parameters, as ``torch.set_autocast_cache_enabled``; per thread."""
    _ac.local.cache_enabled = bool(enabled)


class autocast:
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``; a context
    manager and a decorator, its state per thread; regions nest and ``enabled=False`` inside
    one turns it off until it ends. ``dtype`` None: the current autocast dtype (bfloat16 at
    first); the CPU takes bfloat16 and float16, another dtype warns and disables, as PyTorch.
    ``cache_enabled`` None: the current setting (on at first)."""

    def __init__(self, device_type, dtype=None, enabled: bool = True, cache_enabled=None):
        kind = _device_type(device_type)
        if kind != "cpu" and kind not in _GPU_TYPES:
            raise EmberError(
                f"expected a device type such as 'cpu' or 'cuda', got {device_type!r}",
                op="ember.autocast",
            )
        self.device = self.device_type = kind
        self.fast_dtype = get_autocast_dtype(kind) if dtype is None else dt.as_dtype(dtype)
        self._cache_enabled = (
            _ac.local.cache_enabled if cache_enabled is None else bool(cache_enabled)
        )
        enabled = bool(enabled)
        if enabled and kind != "cpu":
            warnings.warn(
                f"User provided device_type of {kind!r}, but it is not available (ember runs "
                "on the CPU only). Disabling autocast.",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
            enabled = False
        if enabled and self.fast_dtype not in _ac.SUPPORTED:
            warnings.warn(
                "In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                "CPU Autocast only supports dtypes of ember.bfloat16, ember.float16 currently.",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
            enabled = False
        self._enabled = enabled
        self._saved: list = []  # one entry per entry into the region (a decorator recurses)

    @property
    def enabled(self) -> bool:
        return self._enabled

    def __enter__(self):
        if self.device_type != "cpu":
            return self
        local = _ac.local
        region = _ac.Region(self.fast_dtype, self._cache_enabled) if self._enabled else None
        self._saved.append((_ac.set_region(region), local.dtype, local.cache_enabled))
        local.dtype, local.cache_enabled = self.fast_dtype, self._cache_enabled
        local.nesting += 1
        return self

    def __exit__(self, *exc):
        if self.device_type != "cpu":
            return False
        local = _ac.local
        local.nesting -= 1
        if local.nesting == 0:
            _ac.clear_cache()  # the weight casts live as long as the outermost region
        region, local.dtype, local.cache_enabled = self._saved.pop()
        _ac.set_region(region)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return wrapper


def custom_fwd(fwd=None, *, device_type: str = "cpu", cast_inputs=None):
    """For an ``autograd.Function``'s ``forward``, as ``torch.amp.custom_fwd``: it records the
    autocast state for `custom_bwd`; with ``cast_inputs`` (a dtype) inside an enabled region,
    it casts the float tensor arguments to it and runs the forward with autocast off."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        region = _ac.region() if _device_type(device_type) == "cpu" else None
        ctx._fwd_used_autocast = region
        if cast_inputs is None or region is None:
            return fwd(*args, **kwargs)
        target = dt.as_dtype(cast_inputs)

        def cast(a):
            if isinstance(a, Tensor) and a.dtype in (dt.float32, dt.float16, dt.bfloat16):
                return a.to(target)
            return a

        with _ac.suspended():
            return fwd(*map(cast, args), **{k: cast(v) for k, v in kwargs.items()})

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str = "cpu"):
    """For an ``autograd.Function``'s ``backward``, as ``torch.amp.custom_bwd``: it runs in the
    autocast state its forward ran in."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        region = getattr(args[0], "_fwd_used_autocast", None)
        previous = _ac.set_region(region)
        try:
            return bwd(*args, **kwargs)
        finally:
            _ac.set_region(previous)

    return decorate_bwd


class GradScaler:
    """Dynamic loss scaling, as ``torch.amp.GradScaler``: ``scaler.scale(loss).backward()``,
    then ``scaler.step(optimizer)`` (which unscales the gradients unless `unscale_` already
    did, and skips the step when any gradient is inf or NaN), then ``scaler.update()`` (scale
    times ``backoff_factor`` after an overflow, times ``growth_factor`` after
    ``growth_interval`` clean steps). Disabled (``enabled=False``, or a device ember does not
    drive) every method passes through.

    The scale and the growth tracker are 0-d tensors (float32 and int32, as PyTorch's), updated
    in place, so a captured training step (``ember.function``/``ember.compile`` of a function
    that reaches the scaler through its closure, globals or arguments) reads and writes them
    as state, and captures once: there the overflow flag is a graph value, `step` runs the
    optimizer's update and keeps each parameter and buffer's old value where the flag is set
    (a select), and `update` computes the new scale with selects. Eagerly, `step` skips the
    optimizer's update in Python, as PyTorch. The factors and the interval are baked into a
    captured step. One difference remains in a captured step: a skipped step that would have
    been an optimizer's first leaves the buffers it created at zero where PyTorch creates them
    on the next step (the same state for optimizers whose fresh state is zeros: SGD without
    dampening, Adam, AdamW, RMSprop, Adagrad, Adadelta, Adamax, RAdam)."""

    def __init__(
        self,
        device="cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ):
        self._device = _device_type(device)
        if enabled and self._device != "cpu":
            warnings.warn(
                f"GradScaler is enabled for {self._device!r}, but that device is not available "
                "(ember runs on the CPU only). Disabling.",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
            enabled = False
        if growth_factor <= 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError("The backoff factor must be < 1.0.")
        self._enabled = bool(enabled)
        self._init_scale = float(init_scale)
        self._scale = _eager_tensor(np.array(init_scale, np.float32))
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = _eager_tensor(np.array(0, np.int32))
        self._per_optimizer: dict[int, dict] = {}  # id(optimizer) -> {"unscaled", "found_inf"}

    # ------------------------------------------------------------------ the scale
    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return float(self._scale.item()) if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, value: float) -> None:
        self._growth_factor = float(value)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, value: float) -> None:
        self._backoff_factor = float(value)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, value: int) -> None:
        self._growth_interval = int(value)

    def _get_growth_tracker(self) -> int:
        return int(self._growth_tracker.item()) if self._enabled else 0

    def scale(self, outputs):
        """``outputs`` (a tensor, or lists/tuples/dicts of them) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, TensorBase):  # (an eager tensor, or a captured one)
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if isinstance(outputs, dict):
            return {k: self.scale(v) for k, v in outputs.items()}
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    # ------------------------------------------------------------------ the step
    def _state(self, optimizer) -> dict:
        return self._per_optimizer.setdefault(id(optimizer), {"unscaled": False, "stepped": False})

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place (to clip them, say), and note
        whether any is inf or NaN (a 0-d bool tensor). Once per optimizer per step."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["unscaled"]:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update()."
            )
        if state["stepped"]:
            raise RuntimeError("unscale_() is being called after step().")
        with no_grad():
            inverse = E.reciprocal(self._scale.double()).float()  # PyTorch's, in float32
            found_inf = E.zeros((), dtype=dt.bool_)
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.grad.mul_(inverse.to(p.grad.dtype))
                    found_inf = E.logical_or(found_inf, E.logical_not(E.all(E.isfinite(p.grad))))
        state["unscaled"], state["found_inf"] = True, found_inf

    def step(self, optimizer, *args, **kwargs):
        """Unscale (unless done) and step ``optimizer`` unless a gradient overflowed; returns
        what ``optimizer.step`` returned, or None when the step was skipped (captured: what
        it returned, the skip being a select of the old values)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state["stepped"]:
            raise RuntimeError("step() has already been called since the last update().")
        if not state["unscaled"]:
            self.unscale_(optimizer)
        state["stepped"] = True
        if building_graph():
            return _select_step(optimizer, state["found_inf"], args, kwargs)
        if bool(state["found_inf"].item()):
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None) -> None:
        """Adapt the scale to the steps since the last update (or set ``new_scale``)."""
        if not self._enabled:
            return
        with no_grad():
            if new_scale is not None:
                if isinstance(new_scale, TensorBase):
                    self._scale.copy_(new_scale.reshape(()).float())
                else:
                    value = float(new_scale)
                    if not math.isfinite(value) or value <= 0:
                        raise ValueError(
                            f"new_scale must be a positive finite number, got {new_scale}"
                        )
                    self._scale.fill_(value)
            else:
                found = [s["found_inf"] for s in self._per_optimizer.values() if "found_inf" in s]
                if not found:
                    raise AssertionError("No inf checks were recorded prior to update.")
                self._update_scale(functools.reduce(E.logical_or, found))
        self._per_optimizer.clear()

    def _update_scale(self, found_inf) -> None:
        """PyTorch's ``_amp_update_scale_``, in selects: after an overflow the scale backs off
        and the tracker restarts; else the tracker counts, and at the interval the scale grows
        (unless growing overflows float32) and the tracker restarts."""
        scale, tracker = self._scale, self._growth_tracker
        counted = tracker + 1
        grows = counted >= self._growth_interval
        grown = scale * self._growth_factor
        grown = E.where(E.logical_and(grows, E.isfinite(grown)), grown, scale)
        new_scale = E.where(found_inf, scale * self._backoff_factor, grown)
        new_tracker = E.where(E.logical_or(found_inf, grows), E.zeros_like(counted), counted)
        scale.copy_(new_scale)
        tracker.copy_(new_tracker.to(tracker.dtype))

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._get_growth_tracker(),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved "
                "from a disabled instance of GradScaler."
            )
        scale = state_dict["scale"]
        tracker = state_dict["_growth_tracker"]
        with no_grad():
            self._scale.fill_(float(scale.item() if isinstance(scale, Tensor) else scale))
            self._growth_tracker.fill_(
                int(tracker.item() if isinstance(tracker, Tensor) else tracker)
            )
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])


def _eager_tensor(array) -> Tensor:
    return Tensor._wrap(array)


def _select_step(optimizer, found_inf, args, kwargs):
    """``optimizer.step`` while a graph is captured, its effect undone where ``found_inf``:
    every parameter and state buffer takes back its value from before the step; buffers the
    step created start at zero (see `GradScaler`)."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    held = [p for p in params if p.grad is not None]
    before = {}
    with no_grad():
        for p in held:
            before[id(p)] = (p, p.clone())
            for value in optimizer.state.get(p, {}).values():
                if isinstance(value, TensorBase):
                    before[id(value)] = (value, value.clone())
    result = optimizer.step(*args, **kwargs)
    with no_grad():
        for p in held:
            for value in optimizer.state.get(p, {}).values():
                if isinstance(value, TensorBase) and id(value) not in before:
                    value.copy_(E.where(found_inf, E.zeros_like(value), value))
        for t, old in before.values():
            t.copy_(E.where(found_inf, old, t))
    return result


class _DeviceAmp:
    """``ember.cuda.amp`` / ``ember.cpu.amp``: PyTorch's deprecated per-device spellings of
    `autocast` and `GradScaler`. The CUDA ones disable themselves with a warning (ember drives
    no GPU); the CPU ones warn as ``torch.cpu.amp`` does (a FutureWarning) and work."""

    def __init__(self, device: str, deprecated: bool):
        self._device, self._deprecated = device, deprecated

    def _warn(self, name: str) -> None:
        if self._deprecated:
            warnings.warn(
                f"`torch.{self._device}.amp.{name}(args...)` is deprecated. Please use "
                f"`torch.amp.{name}('{self._device}', args...)` instead.",
                FutureWarning,
                stacklevel=user_stacklevel(),
            )

    def autocast(self, enabled: bool = True, dtype=None, cache_enabled: bool = True):
        self._warn("autocast")
        return autocast(self._device, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    def GradScaler(  # noqa: N802 (PyTorch's name)
        self,
        init_scale=2.0**16,
        growth_factor=2.0,
        backoff_factor=0.5,
        growth_interval=2000,
        enabled=True,
    ):
        self._warn("GradScaler")
        return GradScaler(
            self._device, init_scale, growth_factor, backoff_factor, growth_interval, enabled
        )


cuda_amp = _DeviceAmp("cuda", deprecated=False)
cpu_amp = _DeviceAmp("cpu", deprecated=True)
