"""Stop 55's eager shortcuts against PyTorch on both sides of each condition: inference
batch norm read off its arrays, hardtanh/ReLU6 with float bounds straight to the op, a
convolution's padding pairs, a small linear layer on its weight's transpose."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _pair(shape, dtype=np.float32, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return ember.tensor(a), torch.tensor(a)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "sliced"])
def test_inference_batch_norm_matches_torch(dtype, layout):
    x, tx = _pair((2, 3, 5, 4), dtype)
    if layout == "channels_last":
        x = x.contiguous(memory_format=ember.channels_last)
        tx = tx.contiguous(memory_format=torch.channels_last)
    elif layout == "sliced":
        x, tx = x[:, :, ::2], tx[:, :, ::2]
    stats = [_pair((3,), dtype, seed) for seed in (1, 2, 3, 4)]
    (m, tm), (v, tv), (w, tw), (b, tb) = stats
    v, tv = v.abs() + 0.1, tv.abs() + 0.1
    got = F.batch_norm(x, m, v, w, b, False, 0.1, 1e-3)
    want = TF.batch_norm(tx, tm, tv, tw, tb, False, 0.1, 1e-3)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_inference_batch_norm_other_operands_take_the_checked_path():
    x, tx = _pair((2, 3, 4))
    m, tm = _pair((6,), np.float32, 1)  # strided statistics: views of every other value
    v, tv = _pair((6,), np.float32, 2)
    m, tm, v, tv = m[::2], tm[::2], v[::2].abs() + 0.5, tv[::2].abs() + 0.5
    got = F.batch_norm(x, m, v, None, None, False)
    want = TF.batch_norm(tx, tm, tv, None, None, False)
    assert got.dtype == ember.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    wide = ember.zeros(3, dtype=ember.float64)  # float64 statistics beside float32 data
    with pytest.raises(ember.errors.EmberError, match="mixed dtype"):  # as PyTorch
        F.batch_norm(x, wide, wide + 1, None, None, False)
    with pytest.raises(ember.errors.EmberError):
        F.batch_norm(x, ember.zeros(4), ember.ones(4), None, None, False)  # 4 channels != 3
    meta = F.batch_norm(ember.empty((2, 3, 4), device="meta"), m.float(), v.float())
    assert meta.device.type == "meta" and meta.shape == (2, 3, 4)


def test_inference_batch_norm_module_gradient_matches_torch():
    bn, tbn = ember.nn.BatchNorm2d(3).eval(), torch.nn.BatchNorm2d(3).eval()
    a = np.random.default_rng(5).standard_normal((2, 3, 4, 4)).astype(np.float32)
    x, tx = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (bn(x) * 3).sum().backward()
    (tbn(tx) * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(bn.weight.grad.numpy(), tbn.weight.grad.numpy(), rtol=1e-4)


@pytest.mark.parametrize(
    "bounds", [(-1.0, 1.0), (0.0, 6.0), (0, 6), (0.5, 0.5), (-0.0, 0.0), (1, 2.5)]
)
@pytest.mark.parametrize("inplace", [False, True])
def test_hardtanh_matches_torch(bounds, inplace):
    # (no NaN: ember's gradient there is 0 where PyTorch's passes g, the op's documented rule)
    a = np.array([-7.0, -1.0, -0.0, 0.0, 0.25, 0.5, 1.0, 6.0, 9.0], np.float32)
    x, tx = ember.tensor(a.copy(), requires_grad=True), torch.tensor(a.copy(), requires_grad=True)
    lo, hi = bounds
    y = F.hardtanh(x * 1, lo, hi, inplace=inplace)
    ty = TF.hardtanh(tx * 1, lo, hi, inplace=inplace)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    assert np.array_equal(np.signbit(y.detach().numpy()), np.signbit(ty.detach().numpy()))
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_hardtanh_refusals_and_integers():
    x = ember.tensor([1.0, 2.0])
    with pytest.raises(ember.errors.EmberError):
        F.hardtanh(x, 2.0, 1.0)
    # a NaN bound gives NaN, as PyTorch's (no refusal)
    np.testing.assert_array_equal(
        F.hardtanh(x, float("nan"), 1.0).numpy(),
        TF.hardtanh(torch.tensor([1.0, 2.0]), float("nan"), 1.0).numpy(),
    )
    i, ti = ember.tensor([-3, 0, 4, 9]), torch.tensor([-3, 0, 4, 9])
    np.testing.assert_array_equal(F.relu6(i).numpy(), TF.relu6(ti).numpy())
    assert F.relu6(i).dtype == ember.int64
    r6, tr6 = ember.nn.ReLU6(inplace=True), torch.nn.ReLU6(inplace=True)
    a = np.array([-1.0, 3.0, 8.0], np.float64)
    y, ty = r6(ember.tensor(a.copy())), tr6(torch.tensor(a.copy()))
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    assert y.dtype == ember.float64


@pytest.mark.parametrize("padding", [0, 1, (1, 2), "same", "valid"])
def test_convolution_padding_matches_torch(padding):
    x, tx = _pair((1, 2, 6, 7), np.float64)
    w, tw = _pair((3, 2, 3, 2), np.float64, 1)
    got = F.conv2d(x, w, None, 1, padding)
    want = TF.conv2d(tx, tw, None, 1, padding)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    with pytest.raises(ember.errors.EmberError):
        F.conv2d(x, w, None, 2, "same")


@pytest.mark.parametrize("transposed", [False, True])
def test_small_linear_matches_torch(transposed):
    a = np.random.default_rng(2).standard_normal((16, 8)).astype(np.float32)
    w = ember.tensor(a.T.copy().T if transposed else a)  # a column-major weight
    tw = torch.tensor(a)
    assert w._data.flags.c_contiguous is not transposed
    x, tx = _pair((1, 8), np.float32, 3)
    b, tb = _pair((16,), np.float32, 4)
    with ember.no_grad():
        got = F.linear(x, w, b)
    np.testing.assert_allclose(got.numpy(), TF.linear(tx, tw, tb).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.float16, np.int64, np.uint8, np.int32]
)
def test_weak_scalars_kept_per_value_match_torch(dtype):
    a = np.array([0, 1, 3, 7], dtype)
    if a.dtype.kind != "f":
        values = [2, -1, 300, 0]
    else:  # (1e30 overflows float16 where PyTorch's half kernels compute it in float32)
        values = [2, -1, 300, 0.5, -0.0, 0.0, float("nan")] + [1e30] * (a.itemsize > 2)
    for value in values * 2:  # the second round reads the kept arrays
        x, tx = ember.tensor(a), torch.tensor(a)
        for got, want in (
            (x + value, tx + value),
            (value - x, value - tx),
            (x * value, tx * value),
        ):
            assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
            np.testing.assert_array_equal(got.numpy(), want.numpy())
            assert np.array_equal(np.signbit(got.numpy()), np.signbit(want.numpy()))
            got.add_(1)  # a result is the caller's to write
        x.mul_(value)
        tx.mul_(value)
        np.testing.assert_array_equal(x.numpy(), tx.numpy())


def test_weak_scalars_in_gradients_and_captures():
    a = np.array([0.5, -2.0, 3.0])
    x = ember.tensor(a, requires_grad=True)
    ((x * 3.0 + 1.5) * (2.0 - x)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3.0 * (2.0 - a) - (3.0 * a + 1.5))
    f = ember.function(lambda t: t * 3.0 + 1.5)
    for _ in range(2):
        np.testing.assert_array_equal(f(ember.tensor(a)).numpy(), a * 3.0 + 1.5)
    m = ember.empty((2,), device="meta") * 3.0
    assert m.device.type == "meta"


def test_charges_stay_with_their_thread():
    import threading

    from ember.kernels import conv_plan

    record: dict = {}
    seen = {}

    def held(key) -> bool:  # (the kind's cache: it keeps what it was charged for)
        return True

    def other():
        seen["record"] = conv_plan._local.record
        conv_plan.charge(("eager55",), 3, held)  # (no record in this thread: dropped)
        seen["held"] = conv_plan.held_bytes()

    with conv_plan.charged_to(record):
        conv_plan.charge(("eager55",), 5, held)
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
    assert record == {("eager55",): 5}
    assert seen == {"record": None, "held": 0}
    assert conv_plan._local.record is None
