"""Tensors of one file that share memory load sharing it, as PyTorch's storages do: ``a`` and
``a[2:4]`` saved together load as an array and a view of it, from ember's format and from
PyTorch's zip files; a view that reaches outside its storage is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.errors import CheckpointError
from ember.io._shared import _root
from ember.io._tree import decode, encode


def _torch_shares(objs):
    return [t.untyped_storage().data_ptr() for t in objs]


def test_a_tensor_and_its_views_load_sharing_memory_as_pytorch(tmp_path):
    t = torch.arange(24.0).reshape(4, 6)
    torch.save([t, t[1:3, ::2], t.t(), t[2]], tmp_path / "t.pt")
    tl = torch.load(tmp_path / "t.pt")
    a = ember.arange(24.0).reshape(4, 6)
    ember.save([a, a[1:3, ::2], a.t(), a[2]], tmp_path / "e.pt")
    for path in ("e.pt", "t.pt"):
        el = ember.load(tmp_path / path)
        for x, y in zip(el, tl):
            np.testing.assert_array_equal(x.numpy(), y.numpy())
        assert len(set(_torch_shares(tl))) == 1  # PyTorch: one storage
        with torch.no_grad():
            tl[0][2, 0] = -1.0
        el[0][2, 0] = -1.0  # a write through the base shows in every view, as PyTorch's
        for x, y in zip(el, tl):
            np.testing.assert_array_equal(x.numpy(), y.numpy())
        with torch.no_grad():
            tl[0][2, 0] = 12.0


def test_halves_load_sharing_memory_and_separate_tensors_do_not(tmp_path):
    a = ember.arange(10.0)
    ember.save({"parts": [a[:5], a[5:]], "other": ember.ones(3)}, tmp_path / "e.pt")
    t = torch.arange(10.0)
    torch.save({"parts": list(t.chunk(2)), "other": torch.ones(3)}, tmp_path / "t.pt")
    tl = torch.load(tmp_path / "t.pt")
    assert (
        tl["parts"][0].untyped_storage().data_ptr() == tl["parts"][1].untyped_storage().data_ptr()
    )
    el = ember.load(tmp_path / "e.pt")
    assert _root(el["parts"][0].numpy()) is _root(el["parts"][1].numpy())  # one buffer
    assert _root(el["parts"][0].numpy()) is not _root(el["other"].numpy())
    np.testing.assert_array_equal(el["parts"][1].numpy(), tl["parts"][1].numpy())


def test_a_single_view_is_saved_as_its_own_values():
    a = ember.arange(1000.0)
    _, arrays = encode({"x": a[2:4]})
    assert sum(v.size for v in arrays.values()) == 2  # not the whole buffer


@pytest.mark.parametrize(
    "view",
    [
        [3, [2], [1]],
        [0, [3], [2]],
        [-1, [2], [1]],
        [0, [2, 2], [1]],
        [0, [2], [-1]],
        "x",
        [0.5, [2], [1]],
    ],
)
def test_a_view_outside_its_storage_is_refused(view):
    structure = {"$tensor": "s", "view": view}
    with pytest.raises(CheckpointError, match="corrupt checkpoint structure"):
        decode(structure, {"s": np.arange(4.0)}, "f.pt")
    good = decode({"$tensor": "s", "view": [2, [2], [1]]}, {"s": np.arange(4.0)}, "f.pt")
    np.testing.assert_array_equal(good.numpy(), [2.0, 3.0])
