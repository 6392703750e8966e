"""``torch.nn.modules.utils``: the tuple helpers layers use for their size arguments
(``_single``, ``_pair``, ``_triple``, ``_quadruple``, ``_ntuple``), ``_reverse_repeat_tuple``
and ``consume_prefix_in_state_dict_if_present``, as PyTorch defines them."""

from __future__ import annotations

import collections.abc
from itertools import repeat

from ...errors import ArgumentError


def _ntuple(n: int, name: str = "parse"):
    def parse(x):
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n: int) -> tuple:
    """``t`` reversed with each element repeated ``n`` times: (1, 2) -> (2, 2, 1, 1)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults):
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ArgumentError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size) :])]


def consume_prefix_in_state_dict_if_present(state_dict: dict, prefix: str) -> None:
    """Strip ``prefix`` from the keys that have it, in place (a DataParallel checkpoint's
    ``module.``); the renamed entries move to the end, and metadata keys are renamed too, as
    in PyTorch."""
    keys = list(state_dict.keys())
    for key in keys:
        if key.startswith(prefix):
            state_dict[key[len(prefix) :]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in list(metadata.keys()):
            if len(key) == 0:
                continue
            if key == prefix.replace(".", "") or key.startswith(prefix):
                metadata[key[len(prefix) :]] = metadata.pop(key)
