"""PyTorch's placement arguments on the tensor factories: ``device=``, ``memory_format=``,
``pin_memory=`` and ``layout=``.

``ember.zeros(3, device="cpu")`` is how PyTorch code is written; ember runs on the CPU, so the
factories accept these arguments, check them (`ember.devices.check_device`: a GPU device raises
`DeviceError` at the user's line) and pass the rest on. ``memory_format`` lays the result out
in that order (ops/_memory_format.py; ``*_like`` keep a channels-last input's),
``pin_memory=True`` asks for page-locked memory for GPU copies and is refused like a GPU device,
and ``layout`` must be ``ember.strided`` (factories make dense tensors; sparse COO tensors,
layout ``ember.sparse_coo``, come from ``ember.sparse_coo_tensor`` and ``to_sparse``).

`install` wraps the factories once, after every op module has registered, so each factory's own
definition stays about its values; a factory added later is covered by adding its name here.
"""

from __future__ import annotations

import functools

from ..devices import check_device, check_memory_format, preserve_format
from ..errors import ArgumentTypeError, DeviceError
from . import _memory_format

# PyTorch's factories that take ``device=`` (and ``*_like`` that take ``memory_format=``)
FACTORIES = (
    "arange",
    "as_tensor",
    "bartlett_window",
    "blackman_window",
    "empty",
    "empty_like",
    "empty_strided",
    "eye",
    "full",
    "full_like",
    "hamming_window",
    "hann_window",
    "kaiser_window",
    "linspace",
    "logspace",
    "normal",
    "ones",
    "ones_like",
    "rand",
    "rand_like",
    "randint",
    "randint_like",
    "randn",
    "randn_like",
    "randperm",
    "range",
    "scalar_tensor",
    "tensor",
    "tril_indices",
    "triu_indices",
    "zeros",
    "zeros_like",
)


class _Layout:
    """A tensor layout (PyTorch's ``torch.layout``): ``ember.strided``, the layout of dense
    tensors, and ``ember.sparse_coo``, of sparse COO tensors (ops/sparse_tensor.py)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"ember.{self.name}"

    def __reduce__(self):
        return self.name


strided = _Layout("strided")
sparse_coo = _Layout("sparse_coo")


def placement(name: str, kwargs: dict) -> None:
    """Check and remove the placement arguments from a factory's ``kwargs``."""
    if "device" in kwargs:
        check_device(kwargs.pop("device"), f"{name}(device)")
    if "memory_format" in kwargs:
        check_memory_format(kwargs.pop("memory_format"), f"{name}(memory_format)")
    if kwargs.pop("pin_memory", False):
        raise DeviceError(
            "pin_memory=True pins memory for copies to a GPU; ember runs on the CPU only", op=name
        )
    layout = kwargs.pop("layout", None)
    if layout is not None and layout is not strided:
        raise ArgumentTypeError(
            f"{name}: factories make strided (dense) tensors, got layout={layout!r}; make a "
            "sparse tensor with ember.sparse_coo_tensor or x.to_sparse()"
        )


def _wrap(name: str, fn):
    if getattr(fn, "_takes_placement", False):
        return fn

    like = name.endswith("_like")

    @functools.wraps(fn)
    def factory(*args, **kwargs):
        fmt = kwargs.get("memory_format")
        placement(name, kwargs)
        out = fn(*args, **kwargs)
        if like and (fmt is None or fmt is preserve_format) and args:
            # PyTorch's preserve_format: a channels-last input gives a channels-last result
            data = getattr(args[0], "_data", None)
            fmt = _memory_format.preserved(data) if data is not None else None
        elif fmt is not None:
            _memory_format.check_rank(fmt, out.ndim, name)
        return out if fmt is None else _memory_format.relayout(out, fmt)

    factory._takes_placement = True
    return factory


def install(*tables: dict) -> None:
    """Wrap every factory of `FACTORIES` found in ``tables`` (PUBLIC, METHODS, FUNCTIONAL),
    each name once (``empty`` and ``zeros`` may be one function: errors name the one called)."""
    done: dict = {}
    for table in tables:
        for name in FACTORIES:
            fn = table.get(name)
            if fn is not None:
                key = (name, id(fn))
                if key not in done:
                    done[key] = _wrap(name, fn)
                table[name] = done[key]
