"""Devices and memory formats, with PyTorch's names: ``ember.device``, the default device, and
``ember.channels_last`` / ``contiguous_format`` / ``preserve_format``.

ember runs on the CPU only. ``ember.device("cpu")`` (and ``"cpu:0"``, ``("cpu", 0)``) is the one
device that holds data; ``ember.device("meta")`` is PyTorch's meta device, tensors with a shape
and a dtype and no data (_meta.py). Every ``device=`` argument accepts these, a string naming
one, or None. A device ember does not have (``"cuda"``, ``"mps"``, ``"xla"``, ...) raises
`DeviceError` naming the argument, so a program written for a GPU fails at the line that asks for
one instead of running somewhere else silently.

Memory formats lay out an eager tensor's elements as PyTorch's do:
``x.to(memory_format=ember.channels_last)`` keeps the shape and values and changes the strides
(ops/_memory_format.py); ops read any layout, and a captured graph's values are row-major.
"""

from __future__ import annotations

from .errors import DeviceError

__all__ = [
    "channels_last",
    "channels_last_3d",
    "check_device",
    "check_memory_format",
    "contiguous_format",
    "device",
    "get_default_device",
    "is_device_string",
    "is_meta",
    "memory_format",
    "preserve_format",
    "set_default_device",
]

# device types PyTorch knows: asking for one of them is a clear "ember has no such device",
# anything else is an invalid device string (as torch.device("foo") is)
_OTHER_TYPES = ("cuda", "mps", "xla", "xpu", "hip", "ipu", "hpu", "mtia", "vulkan")
_OWN_TYPES = ("cpu", "meta")


def _refuse(kind: str, op: str, value) -> DeviceError:
    return DeviceError(
        f"ember runs on the CPU only and has no {kind!r} device (got {value!r}). Use 'cpu' (or "
        "leave the device out); code that picks a device can test ember.cuda.is_available(), "
        "which is False",
        op=op,
    )


class device:  # noqa: N801  (PyTorch's spelling)
    """``ember.device("cpu")``, ``ember.device("cpu", 0)``, ``ember.device("cpu:0")``.

    Compares equal to another ``ember.device`` of the same type and index and to the strings
    ``"cpu"`` (and ``"cpu:<index>"`` when it has that index). ``str(ember.device("cpu"))`` is
    ``"cpu"``, as in PyTorch; a device type other than ``"cpu"`` raises `DeviceError`.
    """

    def __init__(self, type, index: int | None = None):  # noqa: A002  (PyTorch's argument name)
        if isinstance(type, device):
            if index is not None:
                raise TypeError("ember.device(device, index): give the index in the string")
            self._type, self._index = type._type, type._index
            return
        if isinstance(type, int) and not isinstance(type, bool):
            raise _refuse("cuda", "ember.device", type)  # torch.device(0) is cuda:0
        if not isinstance(type, str):
            raise TypeError(f"ember.device() takes a string such as 'cpu', got {type!r}")
        text = type.strip()
        kind, sep, rest = text.partition(":")
        if sep:
            if index is not None:
                raise TypeError(f"ember.device({type!r}, {index}): the index is given twice")
            if not rest.isdigit():
                raise ValueError(f"invalid device string {type!r}: the index must be an int")
            index = int(rest)
        if kind not in _OWN_TYPES:
            if kind in _OTHER_TYPES:
                raise _refuse(kind, "ember.device", text)
            raise ValueError(
                f"invalid device string {type!r}: expected 'cpu' or 'meta' (ember's device types)"
            )
        if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
            raise TypeError(f"device index must be an int, got {index!r}")
        if index is not None and index < 0:
            raise ValueError(f"device index must not be negative, got {index}")
        self._type, self._index = kind, index

    @property
    def type(self) -> str:
        return self._type

    @property
    def index(self) -> int | None:
        return self._index

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except (ValueError, TypeError, DeviceError):  # "cuda", "foo": not this device
                return False
        if not isinstance(other, device):
            return NotImplemented
        return (self._type, self._index) == (other._type, other._index)

    def __hash__(self) -> int:
        return hash((self._type, self._index))

    def __str__(self) -> str:
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __repr__(self) -> str:
        if self._index is None:
            return f"device(type={self._type!r})"
        return f"device(type={self._type!r}, index={self._index})"

    def __reduce__(self):
        return (device, (self._type, self._index))

    # ``with ember.device("cpu"):`` sets the default device for factories, as in PyTorch
    def __enter__(self):
        self._previous = get_default_device()
        set_default_device(self)
        return self

    def __exit__(self, *exc):
        set_default_device(self._previous)
        return False


CPU = device("cpu")
META = device("meta")
_default = CPU


def check_device(value, what: str = "device") -> device:
    """``value`` (a device, a string, an int, or None) as the `device` it names, the CPU for
    None; raises `DeviceError` for a device ember does not have, naming ``what`` (the argument,
    e.g. ``"zeros(device=)"``)."""
    if value is None:
        return _default
    if isinstance(value, device):
        return value
    try:
        return device(value)
    except DeviceError:
        kind = str(value).partition(":")[0] if isinstance(value, str) else "cuda"
        raise _refuse(kind, what, value) from None


def is_device_string(text: str) -> bool:
    """Whether ``text`` names a device type (``"cpu"``, ``"cuda:1"``, ``"mps"``), as opposed to
    a dtype's name."""
    kind = text.strip().partition(":")[0]
    return kind in _OWN_TYPES or kind in _OTHER_TYPES


def is_meta(value) -> bool:
    """Whether a ``device=`` argument (None: the default device) names the meta device."""
    if value is None:
        return _default._type == "meta"
    if isinstance(value, device):
        return value._type == "meta"
    return isinstance(value, str) and value.strip().partition(":")[0] == "meta"


def get_default_device() -> device:
    """The device factories use when given none: the CPU unless set to the meta device."""
    return _default


def set_default_device(value) -> None:
    """Accepts ``"cpu"`` / ``ember.device("cpu")`` / None (the CPU) and the meta device; any
    other device raises `DeviceError`, since ember has no other."""
    global _default
    _default = CPU if value is None else check_device(value, "set_default_device(device)")


class memory_format:  # noqa: N801  (PyTorch's spelling)
    """A memory format (``ember.channels_last``, ...): accepted where PyTorch takes one (see the
    module docstring)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"ember.{self.name}"

    def __reduce__(self):
        return self.name  # pickles as the module-level singleton


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")


def check_memory_format(value, what: str = "memory_format") -> None:
    """Raise TypeError unless ``value`` is None or one of the memory formats."""
    if value is not None and not isinstance(value, memory_format):
        raise TypeError(
            f"{what} must be an ember memory format such as ember.channels_last, got {value!r}"
        )
