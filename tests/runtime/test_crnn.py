"""kernels/crnn.py against the NumPy reference kernels of ops/recurrent.py: the whole-layer
LSTM / GRU forward and backward over random sizes (hidden sizes past the micro-kernel's panel
width and block depth, batches that are not a multiple of its row tile), both directions,
float32 and float64, non-contiguous operands, and the pre-packed recurrent product alone;
on one thread, shared by two threads, and one step per call."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from ember.kernels import ccompile, crnn
from ember.ops import recurrent

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

r = np.random.default_rng(2026)


def _tol(dtype, depth: int) -> dict:
    """A few roundings per term of a sum of ``depth`` products, plus the vector exp's and
    tanh's few ulps, carried through the steps: k * eps * sqrt(depth) relative to the scale."""
    eps = np.finfo(dtype).eps
    return {"rtol": 64 * eps * np.sqrt(depth), "atol": 64 * eps * np.sqrt(depth)}


def _close(got, want, dtype, depth, what):
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    tol = _tol(dtype, depth)
    np.testing.assert_allclose(got, want, rtol=tol["rtol"], atol=tol["atol"] * scale, err_msg=what)


def _product(a: np.ndarray, b: np.ndarray, gates: int) -> np.ndarray:
    """a @ b by crnn's packed product (b: k x gates*H, packed by blocks of units; every panel
    computed, then the blocked result read back into the plain layout)."""
    rows, (k, n) = a.shape[0], b.shape
    hidden = n // gates
    if crnn._packed_functions(a.dtype) is None:
        pytest.skip("ember's micro-kernel does not run the products here (kernels/cgemm.py)")
    product = crnn._Product(b, rows, hidden, gates)
    nr, units = 3 * (64 // a.itemsize), product.units
    blocks = product.ldr // (gates * units)
    product.rec[:] = np.nan
    panels = crnn._packed_functions(a.dtype)[1]
    call = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p, ctypes.c_long, ctypes.c_long,
                                    ctypes.c_void_p, ctypes.c_long, ctypes.c_long,
                                    ctypes.c_void_p, ctypes.c_long])(panels)  # fmt: skip
    a = np.ascontiguousarray(a)
    call(a.ctypes.data, rows, k, product.bp.ctypes.data, 0, product.ldr // nr,
         product.rec.ctypes.data, product.ldr)  # fmt: skip
    tiles = product.rec.reshape(rows, blocks, gates, units)  # (block, gate, unit in the block)
    plain = tiles.transpose(0, 2, 1, 3).reshape(rows, gates, blocks * units)
    if np.isfinite(a).all():  # (the panels' zero columns past H: zero sums)
        assert np.all(plain[:, :, hidden:] == 0)
    out = plain[:, :, :hidden]
    return out.reshape(rows, n)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows,k,gates,hidden", [(1, 3, 1, 5), (7, 200, 4, 50), (32, 256, 4, 256),
                                                 (13, 401, 3, 97)])  # fmt: skip
def test_packed_product_matches_numpy(dtype, rows, k, gates, hidden):
    a = r.standard_normal((rows, k)).astype(dtype)
    w = r.standard_normal((k, gates * hidden)).astype(dtype)
    _close(_product(a, w, gates), a @ w, dtype, k, "product")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", range(1, 10))
@pytest.mark.parametrize("k,gates,hidden", [(1, 1, 1), (2, 1, 47), (5, 1, 49), (257, 4, 256)])
@pytest.mark.parametrize("layout", ["row-major", "transposed", "strided"])
def test_few_rows_product_matches_numpy(dtype, rows, k, gates, hidden, layout):
    """Fewer rows than the micro-kernel's tile run the few-rows kernel: every row count up to
    the tile (blocks of up to four rows and their remainders) and past it, odd and even depths
    (a single row sums even and odd terms apart), widths around a panel's, and the weight
    packed in place from a transposed or strided view."""
    n = gates * hidden
    a = r.standard_normal((rows, k)).astype(dtype)
    if layout == "transposed":
        w = r.standard_normal((n, k)).astype(dtype).T
    elif layout == "strided":
        w = r.standard_normal((2 * k, 3 * n)).astype(dtype)[::2, ::3]
    else:
        w = r.standard_normal((k, n)).astype(dtype)
    _close(_product(a, w, gates), a @ w, dtype, k, "product")


def test_few_rows_product_propagates_nan_and_inf():
    a = r.standard_normal((3, 64)).astype(np.float32)
    w = r.standard_normal((64, 100)).astype(np.float32)
    a[1, 5] = np.nan
    w[7, 60] = np.inf
    out = _product(a, w, 1)
    with np.errstate(invalid="ignore"):
        want = a @ w
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(out), np.isinf(want))
    finite = np.isfinite(want)
    _close(out[finite], want[finite], np.float32, 64, "finite entries")


# (steps, rows, hidden): one block of units and several (the last one partial), fewer rows
# than the micro-kernel's tile and more, a single step
SIZES = [(5, 3, 4), (4, 9, 70), (3, 16, 200), (1, 2, 100)]


@pytest.fixture(params=["auto", "threads", "stepwise", "one-thread"])
def path(request, monkeypatch):
    """How the layer runs: as `_parts` decides; every step shared by two threads whatever its
    size; one C call per step with the product on ember's GEMM between them (where ember's
    micro-kernel does not run the products); the pool set to one thread."""
    from ember.kernels import cpool

    if request.param == "threads":
        monkeypatch.setattr(crnn, "_parts", lambda rows, k, n, itemsize, blocks: min(2, blocks))
        monkeypatch.setattr(crnn._Split, "parts", lambda self, shape, shared: shared)
    elif request.param == "stepwise":
        monkeypatch.setattr(crnn, "_packed_functions", lambda dtype: None)
    elif request.param == "one-thread":
        threads = cpool.get_num_threads()
        cpool.set_num_threads(1)
        request.addfinalizer(lambda: cpool.set_num_threads(threads))
    return request.param


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("steps,rows,hidden", SIZES)
def test_lstm_layer_kernels_match_the_reference(dtype, reverse, steps, rows, hidden, path):
    def n(*shape, scale=1.0):
        return (r.standard_normal(shape) * scale).astype(dtype)

    scale = 1 / np.sqrt(hidden)
    # xg non-contiguous (every other gate row of a wider array)
    xg = n(steps, rows, 8 * hidden)[:, :, ::2]
    h0, c0, w = n(rows, hidden), n(rows, hidden), n(4 * hidden, hidden, scale=scale)
    got = crnn.lstm_forward(xg, h0, c0, w, reverse)
    want = recurrent._lstm_kernel(xg, h0, c0, w, reverse=reverse)
    for k, (g, e) in enumerate(zip(got, want)):
        _close(g, e, dtype, hidden * steps, f"forward output {k}")
    y, _, _, cs, acts = want
    grads = [n(*a.shape) for a in want]
    got = crnn.lstm_backward(*grads, y, acts, cs, h0, c0, w, reverse)
    want = recurrent._lstm_grad_kernel(*grads, y, acts, cs, h0, c0, w, reverse=reverse)
    for k, (g, e) in enumerate(zip(got, want)):
        _close(g, e, dtype, 4 * hidden * steps * rows, f"backward output {k}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("steps,rows,hidden", SIZES)
def test_gru_layer_kernels_match_the_reference(dtype, reverse, steps, rows, hidden, path):
    def n(*shape, scale=1.0):
        return (r.standard_normal(shape) * scale).astype(dtype)

    scale = 1 / np.sqrt(hidden)
    xg = n(steps, rows, 3 * hidden)
    h0, w, b = n(rows, hidden), n(3 * hidden, hidden, scale=scale), n(3 * hidden)
    w_strided = np.asfortranarray(w)  # a layout the GEMM reads transposed
    got = crnn.gru_forward(xg, h0, w_strided, b, reverse)
    want = recurrent._gru_kernel(xg, h0, w, b, reverse=reverse)
    for k, (g, e) in enumerate(zip(got, want)):
        _close(g, e, dtype, hidden * steps, f"forward output {k}")
    y, _, acts = want
    grads = [n(*a.shape) for a in want]
    got = crnn.gru_backward(*grads, y, acts, h0, w_strided, reverse)
    want = recurrent._gru_grad_kernel(*grads, y, acts, h0, w, reverse=reverse)
    for k, (g, e) in enumerate(zip(got, want)):
        _close(g, e, dtype, 3 * hidden * steps * rows, f"backward output {k}")


def test_nan_propagates_like_the_reference():
    xg = r.standard_normal((3, 2, 8)).astype(np.float32)
    xg[1, 0, 5] = np.nan
    h0 = c0 = np.zeros((2, 2), np.float32)
    w = r.standard_normal((8, 2)).astype(np.float32)
    got = crnn.lstm_forward(xg, h0, c0, w, False)
    want = recurrent._lstm_kernel(xg, h0, c0, w, reverse=False)
    for g, e in zip(got, want):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(e))


def test_declines_what_it_does_not_run():
    xg = np.zeros((2, 1, 4), np.float16)
    h0 = np.zeros((1, 1), np.float16)
    assert crnn.lstm_forward(xg, h0, h0, np.zeros((4, 1), np.float16), False) is None
    empty = np.zeros((0, 1, 4), np.float32)
    h0 = np.zeros((1, 1), np.float32)
    assert crnn.lstm_forward(empty, h0, h0, np.zeros((4, 1), np.float32), False) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows,hidden", [(1, 256), (3, 130), (16, 200)])
def test_results_do_not_depend_on_the_threads(dtype, rows, hidden, monkeypatch):
    """One thread or two: every output bit for bit the same (each value computed by the same
    arithmetic in the same order), so choosing the split by measured time changes no result."""
    xg = r.standard_normal((4, rows, 4 * hidden)).astype(dtype)
    h0, c0 = r.standard_normal((2, rows, hidden)).astype(dtype)
    w = (r.standard_normal((4 * hidden, hidden)) / np.sqrt(hidden)).astype(dtype)
    monkeypatch.setattr(crnn, "_split", crnn._Split())
    results = []
    for parts in (1, 2):
        monkeypatch.setattr(crnn, "_parts", lambda *args, parts=parts: parts)
        out = crnn.lstm_forward(xg, h0, c0, w, False)
        y, _, _, cs, acts = out
        grads = [np.ones_like(a) for a in out]
        results.append(out + crnn.lstm_backward(*grads, y, acts, cs, h0, c0, w, False))
    for k, (one, two) in enumerate(zip(*results)):
        np.testing.assert_array_equal(one, two, err_msg=f"output {k}")


def test_split_is_chosen_by_measured_time():
    split = crnn._Split()
    shape = ("f", 4, 256, 16, 256, 2)
    assert split.parts(shape, 1) == 1  # not worth sharing by the pool's rule: never tried
    seen = []
    for seconds_alone, seconds_shared in [(3.0, 2.0), (2.5, 4.0), (2.8, 2.6)]:
        for _ in range(2):
            parts = split.parts(shape, 2)
            seen.append(parts)
            split.record(shape, parts, 2, seconds_alone if parts == 1 else seconds_shared)
    assert sorted(seen) == [1, 1, 1, 2, 2, 2]  # alternating until each way ran TRIES times
    assert split.parts(shape, 2) == 2  # best shared 2.0 < best alone 2.5
    split.record(shape, 1, 2, 0.1)  # (decided: later times change nothing)
    assert split.parts(shape, 2) == 2
    other = ("f", 4, 256, 1, 256, 2)
    for _ in range(2 * split.TRIES):
        parts = split.parts(other, 2)
        split.record(other, parts, 2, 1.0 if parts == 1 else 3.0)
    assert split.parts(other, 2) == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fill", [0.0, 0.5])
def test_broadcast_gradients(dtype, fill, path):
    """A captured graph hands the gradients of the outputs no one read as broadcast zeros: the
    loop reads zeros without the arrays being made; a broadcast of another value is read as
    given."""
    steps, rows, hidden = 4, 9, 70
    xg = r.standard_normal((steps, rows, 4 * hidden)).astype(dtype)
    h0, c0 = r.standard_normal((2, rows, hidden)).astype(dtype)
    w = (r.standard_normal((4 * hidden, hidden)) / np.sqrt(hidden)).astype(dtype)
    y, h_n, c_n, cs, acts = recurrent._lstm_kernel(xg, h0, c0, w, reverse=False)
    gy = r.standard_normal(y.shape).astype(dtype)
    grads = [gy] + [np.broadcast_to(np.asarray(fill, dtype), a.shape) for a in (h_n, c_n, cs, acts)]
    got = crnn.lstm_backward(*grads, y, acts, cs, h0, c0, w, False)
    want = recurrent._lstm_grad_kernel(*grads, y, acts, cs, h0, c0, w, reverse=False)
    for k, (g, e) in enumerate(zip(got, want)):
        _close(g, e, dtype, 4 * hidden * steps * rows, f"lstm backward output {k}")
    xg = xg[:, :, : 3 * hidden].copy()
    b = r.standard_normal(3 * hidden).astype(dtype)
    w = w[: 3 * hidden]
    y, h_n, acts = recurrent._gru_kernel(xg, h0, w, b, reverse=True)
    grads = [gy] + [np.broadcast_to(np.asarray(fill, dtype), a.shape) for a in (h_n, acts)]
    got = crnn.gru_backward(*grads, y, acts, h0, w, True)
    want = recurrent._gru_grad_kernel(*grads, y, acts, h0, w, reverse=True)
    for k, (g, e) in enumerate(zip(got, want)):
        _close(g, e, dtype, 3 * hidden * steps * rows, f"gru backward output {k}")
