"""``as_strided`` as a view of part of a storage, against PyTorch 2.13: windows at a
``storage_offset`` (before or after a slice's own elements, over a transposed tensor's
memory), in-place writes through them seen by the base and the base's writes seen through
them, views of the window, ``as_strided_``, gradients (overlapping windows summed, a history
written in place through the window), captured programs, and PyTorch's refusals."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _write_through(m):
    base = m.arange(12.0)
    v = base.as_strided((2, 2), (3, 1), 4)
    v.mul_(10)
    return base, v


def _transposed_write(m):
    base = m.arange(12.0).reshape(3, 4)
    v = base.as_strided((2, 3), (1, 2), 1)
    v[0, 1] = -5
    v.add_(1)
    return base, v, v.storage_offset(), v.stride(), v.is_contiguous()


def _before_a_slice(m):
    base = m.arange(20.0)
    s = base[5:]
    v = s.as_strided((3,), (2,), 2)  # (elements 2, 4, 6 of the storage: mostly before s)
    v.zero_()
    return base, v.storage_offset()


def _base_write_seen(m):
    base = m.arange(12.0)
    v = base.as_strided((2, 2), (3, 1), 4)
    base[5] = 100
    return v


def _over_transposed(m):
    base = m.arange(12.0).reshape(3, 4).t()
    v = base.as_strided((2, 2), (1, 4), 1)
    return v, v.storage_offset()


def _nested(m):
    base = m.arange(24.0)
    w = base.as_strided((4, 3), (6, 1), 2).as_strided((2,), (7,), 3)
    w.fill_(-1)
    return base


def _view_of_window(m):
    base = m.arange(12.0)
    w = base.as_strided((2, 3), (4, 1), 1)[:, 1:]
    w.mul_(-1)
    return base, w.storage_offset()


def _function_form(m):
    base = m.arange(12.0)
    m.as_strided(base, (2, 2), (3, 1), 4).copy_(m.ones(2, 2))
    return base


def _shares_memory(m):
    base = m.arange(12.0)
    v = base.as_strided((2, 2), (3, 1), 4)
    return v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr(), (
        v.data_ptr() - base.data_ptr()
    )


def _grad(m):
    x = m.arange(12.0, requires_grad=True)
    (x.as_strided((2, 2), (3, 1), 4) * m.tensor([[1.0, 2], [3, 4]])).sum().backward()
    return x.grad


def _grad_overlapping(m):
    x = m.arange(6.0, requires_grad=True)
    (x.as_strided((3, 3), (1, 1)) ** 2).sum().backward()
    return x.grad


def _grad_through_in_place(m):
    w = m.arange(12.0, requires_grad=True)
    b = w * 1
    b.as_strided((2, 2), (3, 1), 4).mul_(2)
    (b * m.arange(12.0)).sum().backward()
    return w.grad


def _grad_over_transposed(m):
    w = m.arange(12.0, requires_grad=True)
    v = w.reshape(3, 4).t().as_strided((2, 2), (1, 4), 1)
    (v * m.tensor([[1.0, 2], [3, 4]])).sum().backward()
    return w.grad


def _in_place_method(m):
    x = m.arange(12.0)
    x.as_strided_((3, 2), (2, 1), 1)
    return x, x.storage_offset(), x.stride()


def _repeats_and_empties(m):
    x = m.arange(4.0)
    return (
        x.as_strided((2, 3), (0, 1), 1),
        m.arange(10).as_strided((3,), (3,), 1),
        tuple(x.as_strided((0, 3), (1, 1)).shape),
    )


def _compiled(m):
    def f(x):
        b = x * 1
        b.as_strided((2, 2), (3, 1), 4).add_(100)
        return b, x[5:].as_strided((3,), (2,), 2) * 2

    # (ember's captured program against PyTorch's eager values: inductor would take a minute)
    return (m.compile(f) if m is ember else f)(m.arange(20.0))


CASES = {
    f.__name__.lstrip("_"): f
    for f in (
        _write_through, _transposed_write, _before_a_slice, _base_write_seen, _over_transposed,
        _nested, _view_of_window, _function_form, _shares_memory, _grad, _grad_overlapping,
        _grad_through_in_place, _grad_over_transposed, _in_place_method, _repeats_and_empties,
        _compiled,
    )
}  # fmt: skip


def _plain(v):
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    if hasattr(v, "detach"):
        return v.detach().numpy().tolist()
    return v


@pytest.mark.parametrize("case", sorted(CASES))
def test_as_strided_as_pytorch(case):
    assert _plain(CASES[case](ember)) == _plain(CASES[case](torch))


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.arange(6.0).as_strided((3, 3), (2, 1), 2),  # (past the storage's end)
        lambda m: m.arange(6.0).as_strided((3,), (-1,), 2),
        lambda m: m.arange(6.0).as_strided((3,), (1, 1)),
    ],
)
def test_refusals(call):
    for m in (torch, ember):
        with pytest.raises(RuntimeError):
            call(m)


def test_numpy_kernel_copies_a_non_contiguous_operand():
    """A graph value's array may be laid out otherwise: the kernel windows its row-major
    elements (a copy), the view's value either way."""
    from ember.ops.strided import AS_STRIDED_VIEW

    a = np.arange(12.0).reshape(3, 4)
    got = AS_STRIDED_VIEW.kernel(a.T, size=(2, 2), stride=(3, 1), offset=1)
    np.testing.assert_array_equal(got, np.ascontiguousarray(a.T).reshape(-1)[[[1, 2], [4, 5]]])


def test_onnx_export_against_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime")

    class Windows(ember.nn.Module):
        def forward(self, x):
            return x.as_strided((3, 4), (2, 1), 1) * 2 + x[4:].as_strided((3, 4), (1, 3), 2)

    x = ember.tensor(np.arange(20, dtype=np.float32))
    path = str(tmp_path / "windows.onnx")
    ember.onnx.export(Windows(), (x,), path)
    session = ort.InferenceSession(path)
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_array_equal(got, Windows()(x).numpy())
