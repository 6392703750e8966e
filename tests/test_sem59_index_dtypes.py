"""Index tensors of every integer dtype (and bool) in the indexed ops, against PyTorch 2.13:
which dtypes each op takes (gather, scatter*, index_select, index_add and index_reduce int32
and int64; take, take_along_dim, put, index_copy and index_fill int64 only; ``x[i]`` int64,
int32 and uint8/bool masks) and the words it refuses the others with (ops/_index_dtypes.py).
ember's NumPy kernels index with any integer array, so without these checks an int16 or
uint32 index was taken silently where PyTorch refuses it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

DTYPES = ["int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64", "bool"]


def _ops(m):
    x = m.arange(6.0).reshape(2, 3)

    def pair(i):
        return i.reshape(1, -1)[:, :2].expand(2, 2)

    return {
        "gather": lambda i: m.gather(x, 1, pair(i)),
        "scatter": lambda i: x.scatter(1, pair(i), m.ones(2, 2)),
        "scatter_value": lambda i: x.scatter(1, pair(i), 1.0),
        "scatter_add": lambda i: x.scatter_add(1, pair(i), m.ones(2, 2)),
        "scatter_reduce": lambda i: x.scatter_reduce(1, pair(i), m.ones(2, 2), "sum"),
        "index_select": lambda i: x.index_select(1, i),
        "index_add": lambda i: x.index_add(1, i, m.ones(2, 2)),
        "index_copy": lambda i: x.index_copy(1, i, m.ones(2, 2)),
        "index_fill": lambda i: x.index_fill(1, i, 1.0),
        "index_reduce": lambda i: x.index_reduce(1, i, m.ones(2, 2), "prod"),
        "take": lambda i: m.take(x, i),
        "take_along_dim": lambda i: m.take_along_dim(x, pair(i), 1),
        "put": lambda i: x.put(i, m.ones(2)),
        "getitem": lambda i: x[i],
        "getitem_columns": lambda i: x[:, i],
        "embedding": lambda i: m.nn.functional.embedding(i, x),
    }


def _outcome(fn, index):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(index)
    except Exception as error:  # (the outcome compared is the error's class and words)
        return None, error
    return np.asarray(out.detach().numpy() if hasattr(out, "detach") else out), None


@pytest.mark.parametrize("op", list(_ops(torch)))
def test_index_dtypes_as_pytorch(op):
    t_fn, e_fn = _ops(torch)[op], _ops(ember)[op]
    for name in DTYPES:
        values = [1, 0]
        t_val, t_err = _outcome(t_fn, torch.tensor(values, dtype=getattr(torch, name)))
        e_val, e_err = _outcome(e_fn, ember.tensor(values, dtype=getattr(ember, name)))
        assert (t_err is None) == (e_err is None), (op, name, t_err, e_err)
        if t_err is None:
            np.testing.assert_array_equal(e_val, t_val, err_msg=f"{op} {name}")
            continue
        torch_words = str(t_err).splitlines()[0]
        if "shape of the mask" in torch_words:  # (a byte mask of the wrong shape: ember's words)
            assert "mask" in str(e_err)
            continue
        assert isinstance(e_err, RuntimeError), (op, name, e_err)
        if isinstance(t_err, IndexError):
            assert isinstance(e_err, IndexError), (op, name, e_err)
        if "masked_fill_" in torch_words:  # (index_put's byte mask: PyTorch fails deeper down)
            continue
        # PyTorch's own words, its dtype names included ('Short', 'UInt32'), but for its
        # tensor type names ('CPUUInt16Type', 'torch.ShortTensor'), which ember has not
        words = torch_words.split(" (while")[0]
        if any(k in words.split(" but got")[-1] for k in ("Type", "torch.")):
            words = words.split(" but got")[0]
        assert words in str(e_err), (
            op,
            name,
            torch_words,
            str(e_err),
        )


def test_refusals_name_the_ember_dtype_and_the_users_line():
    with pytest.raises(RuntimeError) as info:
        ember.arange(3.0).index_select(0, ember.tensor([0], dtype=ember.uint16))
    text = str(info.value)
    assert "index_select(): Expected dtype int32 or int64 for index" in text
    assert "ember.uint16" in text and "test_sem59_index_dtypes.py" in text


def test_byte_index_is_a_mask_with_pytorchs_warning():
    for m in (torch, ember):
        x = m.arange(6.0).reshape(2, 3)
        with pytest.warns(UserWarning, match="indexing with dtype torch.uint8 is now deprecated"):
            out = x[m.tensor([0, 1], dtype=m.uint8)]
        np.testing.assert_array_equal(np.asarray(out.numpy()), [[3.0, 4.0, 5.0]])


def test_empty_index_of_another_dtype_reads_nothing_as_pytorch():
    # (PyTorch's gather and scatter check no dtype for an empty index: nothing is read)
    for m in (torch, ember):
        x = m.arange(6.0).reshape(2, 3)
        empty = m.zeros((2, 0), dtype=m.int16)
        assert tuple(m.gather(x, 1, empty).shape) == (2, 0)
        np.testing.assert_array_equal(np.asarray(x.scatter(1, empty, 1.0).numpy()), x.numpy())


def test_int32_indices_still_index_and_differentiate():
    x = ember.arange(6.0, requires_grad=True)
    tx = torch.arange(6.0, requires_grad=True)
    i32 = [4, 0, 4]
    ember.gather(x, 0, ember.tensor(i32, dtype=ember.int32)).sum().backward()
    torch.gather(tx, 0, torch.tensor(i32, dtype=torch.int32)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
