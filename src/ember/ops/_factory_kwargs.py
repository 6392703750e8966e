"""PyTorch's placement arguments on the tensor factories: ``device=``, ``memory_format=``,
``pin_memory=`` and ``layout=``.

``ember.zeros(3, device="cpu")`` is how PyTorch code is written; ember runs on the CPU, so the
factories accept these arguments, check them (`ember.devices.check_device`: a GPU device raises
`DeviceError` at the user's line) and pass the rest on. ``memory_format`` lays the result out
in that order (ops/_memory_format.py; ``*_like`` keep a channels-last input's),
``pin_memory=True`` asks for page-locked memory for GPU copies and is refused like a GPU device,
and ``layout`` must be ``ember.strided`` (factories make dense tensors; sparse COO tensors,
layout ``ember.sparse_coo``, come from ``ember.sparse_coo_tensor`` and ``to_sparse``).

``device="meta"`` (or the meta device as the default, ``with ember.device("meta"):``, or a meta
input of a ``*_like`` given no device) makes a meta tensor (ember/_meta.py): the factory runs
with `_meta.creating` open, so its ops, random draws included, make stand-ins and draw nothing;
one that builds its array directly gets a stand-in of its shape and dtype instead.

`install` wraps the factories once, after every op module has registered, so each factory's own
definition stays about its values; a factory added later is covered by adding its name here.
"""

from __future__ import annotations

import functools

from .. import _meta
from ..devices import check_device, check_memory_format, is_meta, preserve_format
from ..errors import ArgumentTypeError, DeviceError
from . import _memory_format
from ._registry import eager_constant

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
sparse_csr = _Layout("sparse_csr")  # (ops/sparse_csr.py)


def placement(name: str, kwargs: dict) -> None:
    """Check and remove the placement arguments from a factory's ``kwargs``."""
    if "device" in kwargs:
        check_device(kwargs.pop("device"), f"{name}(device)")
    _check_rest(name, kwargs)


def _check_rest(name: str, kwargs: dict) -> None:
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
        device = kwargs.pop("device", None)
        check_device(device, f"{name}(device)")
        _check_rest(name, kwargs)
        if _wants_meta(like, device, args):
            return _meta_factory(fn, args, kwargs)
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


def _wants_meta(like: bool, device, args) -> bool:
    if device is None and like and args:  # (a *_like takes its input's device)
        return _meta.is_meta(getattr(args[0], "_data", None))
    return is_meta(device)


def _meta_factory(fn, args, kwargs):
    """The factory's result as a meta tensor: made by its ops as stand-ins, or (a factory that
    builds its array itself) replaced by a stand-in of the same shape and dtype."""
    with _meta.creating():
        out = fn(*args, **kwargs)
    if _meta.is_meta(getattr(out, "_data", None)):
        return out
    meta = eager_constant(_meta.stand_in(tuple(out.shape), out._data.dtype))
    return meta.requires_grad_() if out.requires_grad else meta


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
