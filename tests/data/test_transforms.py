"""Image transforms against hand computation, PyTorch's padding and torchvision's documented
semantics (torchvision itself is not installed)."""

import numpy as np
import pytest

import ember
from ember.data import transforms as T

try:
    import torch
except ImportError:
    torch = None

TORCH_MISSING = "PyTorch is not installed (pip install torch==2.13.0 from the CPU index)"


def _image(c=2, h=5, w=6, dtype=np.float32):
    return np.arange(c * h * w).reshape(c, h, w).astype(dtype)


# ------------------------------------------------------------------------------ ToTensor
def test_to_tensor_scales_uint8_hwc_to_float_chw():
    rng = np.random.default_rng(0)
    hwc = rng.integers(0, 256, size=(4, 5, 3), dtype=np.uint8)
    out = T.ToTensor()(hwc)
    assert isinstance(out, ember.Tensor) and out.dtype == ember.float32 and out.shape == (3, 4, 5)
    for c in range(3):
        np.testing.assert_allclose(out.numpy()[c], hwc[:, :, c] / 255.0, rtol=1e-6)
    gray = T.ToTensor()(hwc[:, :, 0])
    assert gray.shape == (1, 4, 5)
    assert gray.numpy().max() <= 1.0


def test_to_tensor_keeps_other_dtypes_values():
    hw = np.linspace(0, 7, 12).reshape(3, 4)  # float64 stays float64 and unscaled
    out = T.ToTensor()(hw)
    assert out.dtype == ember.float64
    np.testing.assert_array_equal(out.numpy()[0], hw)
    with pytest.raises(ember.DTypeError, match="ToTensor"):
        T.ToTensor()(ember.ones(1, 2, 2))
    with pytest.raises(ember.ShapeError, match="ToTensor"):
        T.ToTensor()(np.zeros((1, 2, 2, 3)))


# ------------------------------------------------------------------------------ Normalize
def test_normalize_per_channel_by_hand():
    img = _image(3, 2, 2)
    out = T.Normalize(mean=[1.0, 2.0, 3.0], std=[0.5, 2.0, 4.0])(ember.tensor(img))
    assert out.dtype == ember.float32
    expected = np.stack([(img[0] - 1) / 0.5, (img[1] - 2) / 2.0, (img[2] - 3) / 4.0])
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)
    batched = T.Normalize([0.5], [0.25])(img[None])  # (N, C, H, W), one value for all channels
    np.testing.assert_allclose(batched[0], (img - 0.5) / 0.25, rtol=1e-6)
    assert isinstance(batched, np.ndarray) and batched.dtype == np.float32


def test_normalize_refuses_ints_wrong_channels_and_zero_std():
    with pytest.raises(ember.DTypeError, match="floating"):
        T.Normalize([0.0], [1.0])(ember.ones(1, 2, 2, dtype=ember.int64))
    with pytest.raises(ember.ShapeError, match="3 channels"):
        T.Normalize([0.0, 0.0], [1.0, 1.0])(ember.ones(3, 2, 2))
    with pytest.raises(ember.ShapeError, match="zero"):
        T.Normalize([0.0], [0.0])


# ------------------------------------------------------------------------------------ Pad
@pytest.mark.skipif(torch is None, reason=TORCH_MISSING)
@pytest.mark.parametrize(
    "padding, ltrb", [(1, (1, 1, 1, 1)), ((2, 1), (2, 1, 2, 1)), ((1, 0, 3, 2), (1, 0, 3, 2))]
)
@pytest.mark.parametrize(
    "mode, torch_mode", [("constant", "constant"), ("edge", "replicate"), ("reflect", "reflect")]
)
def test_pad_matches_pytorch(padding, ltrb, mode, torch_mode):
    img = _image()
    out = T.Pad(padding, fill=0, padding_mode=mode)(ember.tensor(img))
    left, top, right, bottom = ltrb  # F.pad lists the last dimension first
    ref = torch.nn.functional.pad(
        torch.from_numpy(img)[None], (left, right, top, bottom), mode=torch_mode
    )[0].numpy()
    np.testing.assert_array_equal(out.numpy(), ref)


def test_pad_symmetric_and_fill_by_hand():
    row = np.array([[1.0, 2.0, 3.0]])
    out = T.Pad((2, 0), padding_mode="symmetric")(row)
    np.testing.assert_array_equal(out, [[2, 1, 1, 2, 3, 3, 2]])
    filled = T.Pad(1, fill=9)(np.zeros((2, 2), np.uint8))
    assert filled.dtype == np.uint8
    np.testing.assert_array_equal(filled, [[9, 9, 9, 9], [9, 0, 0, 9], [9, 0, 0, 9], [9] * 4])
    per_channel = T.Pad(1, fill=(5, 7))(np.zeros((2, 1, 1), np.float32))
    np.testing.assert_array_equal(per_channel[0], [[5, 5, 5], [5, 0, 5], [5, 5, 5]])
    np.testing.assert_array_equal(per_channel[1], [[7, 7, 7], [7, 0, 7], [7, 7, 7]])


def test_pad_errors():
    with pytest.raises(ember.ShapeError, match="reflect"):
        T.Pad(3, padding_mode="reflect")(np.zeros((3, 3)))  # reflect needs padding < size
    with pytest.raises(ember.ShapeError, match="padding_mode"):
        T.Pad(1, padding_mode="wrap")
    with pytest.raises(ember.ShapeError, match="1, 2 or 4"):
        T.Pad((1, 2, 3))


# ------------------------------------------------------------------------------- crops
def _windows(padded, th, tw):
    h, w = padded.shape[-2:]
    return {
        (i, j): padded[..., i : i + th, j : j + tw]
        for i in range(h - th + 1)
        for j in range(w - tw + 1)
    }


def test_random_crop_offsets_come_from_the_generator():
    img = _image(1, 6, 7)
    gen = ember.Generator(5)
    crop = T.RandomCrop((3, 4), generator=gen)
    reference = ember.Generator(5).numpy  # a fresh generator's NumPy stream
    seen = set()
    for _ in range(200):  # (a window missed in 200 of 16 equally likely: below 1e-4)
        out = crop(ember.tensor(img))
        i, j = int(reference.integers(0, 6 - 3 + 1)), int(reference.integers(0, 7 - 4 + 1))
        np.testing.assert_array_equal(out.numpy(), img[:, i : i + 3, j : j + 4])
        seen.add((i, j))
    assert len(seen) == 4 * 4  # every window is reachable


def test_random_crop_with_padding_is_a_window_of_the_padded_image():
    img = _image(2, 4, 4)
    padded = np.pad(img, ((0, 0), (2, 2), (2, 2)))
    out = T.RandomCrop(4, padding=2, generator=ember.Generator(0))(img)
    assert out.shape == (2, 4, 4)
    assert any(np.array_equal(out, w) for w in _windows(padded, 4, 4).values())


def test_random_crop_pad_if_needed_pads_both_sides_by_the_shortfall():
    img = _image(1, 3, 3)
    # torchvision pads left and right by the whole shortfall (5 - 3 = 2), then top and bottom
    padded = np.pad(img, ((0, 0), (2, 2), (2, 2)), constant_values=-1)
    crop = T.RandomCrop(5, pad_if_needed=True, fill=-1, generator=ember.Generator(1))
    for _ in range(10):
        out = crop(img)
        assert out.shape == (1, 5, 5)
        assert any(np.array_equal(out, w) for w in _windows(padded, 5, 5).values())
    with pytest.raises(ember.ShapeError, match="larger than the image"):
        T.RandomCrop(5)(img)


def test_random_crop_of_the_full_size_draws_nothing():
    gen = ember.Generator(3)
    before = gen.json_state()
    img = _image(1, 4, 4)
    np.testing.assert_array_equal(T.RandomCrop(4, generator=gen)(img), img)
    assert gen.json_state() == before


@pytest.mark.parametrize(
    "h, w, size, top, left",
    [
        (5, 6, (3, 4), 1, 1),  # round(1.0), round(1.0)
        (6, 7, (3, 2), 2, 2),  # round(1.5) = 2, round(2.5) = 2: Python's round, as torchvision
        (4, 4, 2, 1, 1),
    ],
)
def test_center_crop_offsets(h, w, size, top, left):
    img = _image(2, h, w)
    th, tw = (size, size) if isinstance(size, int) else size
    out = T.CenterCrop(size)(ember.tensor(img))
    np.testing.assert_array_equal(out.numpy(), img[:, top : top + th, left : left + tw])


def test_center_crop_larger_than_the_image_zero_pads():
    img = np.ones((1, 2, 3), np.float32)
    out = T.CenterCrop((5, 4))(img)
    # torchvision pads (left, top, right, bottom) = (0, 1, 1, 2), then crops at (0, 0)
    expected = np.pad(img, ((0, 0), (1, 2), (0, 1)))
    np.testing.assert_array_equal(out, expected)


# -------------------------------------------------------------------------------- flips
def test_flips_with_probability_one_and_zero():
    img = _image(2, 3, 4)
    np.testing.assert_array_equal(T.RandomHorizontalFlip(p=1.0)(img), img[:, :, ::-1])
    np.testing.assert_array_equal(T.RandomVerticalFlip(p=1.0)(img), img[:, ::-1, :])
    np.testing.assert_array_equal(T.RandomHorizontalFlip(p=0.0)(img), img)


def test_flip_decisions_follow_the_generator():
    img = _image(1, 2, 3)
    flip = T.RandomHorizontalFlip(p=0.3, generator=ember.Generator(9))
    reference = ember.Generator(9).numpy
    flips = 0
    for _ in range(200):
        out = flip(ember.tensor(img)).numpy()
        expect_flip = reference.random() < 0.3
        np.testing.assert_array_equal(out, img[:, :, ::-1] if expect_flip else img)
        flips += expect_flip
    assert 30 < flips < 90


def test_random_transforms_default_to_the_default_generator():
    img = _image(1, 6, 6)
    crop = T.RandomCrop(3)
    ember.manual_seed(4)
    a = [crop(img) for _ in range(5)]
    ember.manual_seed(4)
    b = [crop(img) for _ in range(5)]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


# --------------------------------------------------------------------- composition and types
def test_compose_applies_in_order_and_lambda_wraps_functions():
    hwc = np.full((2, 2, 1), 255, np.uint8)
    pipeline = T.Compose([T.ToTensor(), T.Normalize([0.5], [0.5]), T.Lambda(lambda x: x * 2)])
    out = pipeline(hwc)
    np.testing.assert_allclose(out.numpy(), np.full((1, 2, 2), 2.0))
    assert "Normalize" in repr(pipeline)
    with pytest.raises(ember.DTypeError):
        T.Lambda(3)


def test_results_keep_the_input_kind_and_never_share_its_memory():
    for t in (T.CenterCrop(2), T.RandomCrop(2), T.RandomHorizontalFlip(1.0), T.Pad(0)):
        arr = _image(1, 3, 3)
        tensor = ember.tensor(arr.copy())
        out_arr, out_tensor = t(arr), t(tensor)
        assert isinstance(out_arr, np.ndarray) and isinstance(out_tensor, ember.Tensor)
        assert not np.shares_memory(out_arr, arr)
        assert not np.shares_memory(out_tensor.numpy(), tensor.numpy())
    with pytest.raises(ember.ShapeError, match=r"\(H, W\)"):
        T.CenterCrop(2)(np.zeros(4))
