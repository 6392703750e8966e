"""Image transforms with torchvision's semantics, for images in (..., C, H, W) or (H, W) layout.

Each transform is a callable object. It takes an ember Tensor or a NumPy array and returns the
same kind (except `ToTensor`, which makes a Tensor), computing in NumPy on the data: transforms
are part of the input pipeline and record no autograd history. Results never share memory with
the input, so a dataset's stored images cannot be changed through a transformed sample.

Random transforms take an optional ``generator``; without one they draw from
`ember.data.current_generator()`: ember's default generator, or inside a DataLoader the batch's
own generator (so prefetching and resuming reproduce the same augmentations).

torchvision details kept: `Pad`'s 1/2/4-element padding forms and its modes constant, edge,
reflect (padding < size) and symmetric; `RandomCrop` pads by ``padding`` first, and with
``pad_if_needed`` pads *both* sides of a too-small dimension by the whole shortfall; `CenterCrop`
rounds offsets with Python's round() and zero-pads images smaller than the crop; `ToTensor`
divides uint8 images by 255 and leaves other dtypes' values alone.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import DTypeError, ShapeError
from ..random import Generator
from ..tensor import Tensor
from .rng import current_generator

__all__ = [
    "Compose",
    "ToTensor",
    "Normalize",
    "Pad",
    "RandomCrop",
    "CenterCrop",
    "RandomHorizontalFlip",
    "RandomVerticalFlip",
    "Lambda",
]

_PAD_MODES = {
    "constant": "constant",
    "edge": "edge",
    "reflect": "reflect",
    "symmetric": "symmetric",
}


def _unwrap(img, op: str) -> tuple[np.ndarray, bool]:
    if isinstance(img, Tensor):
        arr, is_tensor = img.numpy(force=True), True
    elif isinstance(img, np.ndarray):
        arr, is_tensor = img, False
    else:
        raise DTypeError(
            f"expects an ember Tensor or a NumPy array image, got {type(img).__name__}", op=op
        )
    if arr.ndim < 2:
        raise ShapeError(
            f"expects an image of shape (..., C, H, W) or (H, W), got shape {arr.shape}", op=op
        )
    return arr, is_tensor


def _rewrap(arr: np.ndarray, is_tensor: bool):
    arr = np.ascontiguousarray(arr)
    return Tensor(arr) if is_tensor else arr


def _pair(size, op: str) -> tuple[int, int]:
    if isinstance(size, numbers.Integral):
        pair = (int(size), int(size))
    elif isinstance(size, Sequence) and len(size) in (1, 2):
        pair = (int(size[0]), int(size[-1]))
    else:
        raise ShapeError(f"size must be an int or a (height, width) pair, got {size!r}", op=op)
    if min(pair) <= 0:
        raise ShapeError(f"size must be positive, got {size!r}", op=op)
    return pair


def _ltrb(padding, op: str) -> tuple[int, int, int, int]:
    """torchvision's padding forms: p (all sides), (left/right, top/bottom) or (l, t, r, b)."""
    if isinstance(padding, numbers.Integral):
        values = (padding,) * 4
    elif isinstance(padding, Sequence) and len(padding) in (1, 2, 4):
        p = [int(x) for x in padding]
        values = (p[0],) * 4 if len(p) == 1 else (p * 2 if len(p) == 2 else p)
    else:
        raise ShapeError(f"padding must be an int or have 1, 2 or 4 elements: {padding!r}", op=op)
    if min(values) < 0:
        raise ShapeError(f"padding must be non-negative, got {padding!r}", op=op)
    return tuple(int(v) for v in values)


def pad_array(arr: np.ndarray, ltrb, fill=0, padding_mode: str = "constant") -> np.ndarray:
    """Pad the last two dimensions by (left, top, right, bottom) (a NumPy helper for `Pad`)."""
    if padding_mode not in _PAD_MODES:
        raise ShapeError(
            f"padding_mode must be one of {sorted(_PAD_MODES)}, got {padding_mode!r}", op="Pad"
        )
    left, top, right, bottom = ltrb
    h, w = arr.shape[-2:]
    if padding_mode in ("reflect", "symmetric"):
        limit_h, limit_w = (h - 1, w - 1) if padding_mode == "reflect" else (h, w)
        if max(top, bottom) > limit_h or max(left, right) > limit_w:
            raise ShapeError(
                f"{padding_mode} padding {tuple(ltrb)} (left, top, right, bottom) is too large "
                f"for an image of height {h} and width {w}"
                + ("; reflect padding must be smaller than the size" if limit_h < h else ""),
                op="Pad",
            )
    widths = [(0, 0)] * (arr.ndim - 2) + [(top, bottom), (left, right)]
    if padding_mode != "constant":
        return np.pad(arr, widths, mode=_PAD_MODES[padding_mode])
    if isinstance(fill, numbers.Real):
        return np.pad(arr, widths, mode="constant", constant_values=np.asarray(fill, arr.dtype))
    fill = list(fill)  # one value per channel (dimension -3)
    if arr.ndim < 3 or len(fill) != arr.shape[-3]:
        raise ShapeError(
            f"a per-channel fill needs one value per channel: got {len(fill)} values for an "
            f"image of shape {arr.shape}",
            op="Pad",
        )
    out = np.pad(arr, widths, mode="constant")
    border = np.ones(out.shape[-2:], dtype=bool)
    border[top : top + h, left : left + w] = False
    for c, value in enumerate(fill):
        out[..., c, :, :][..., border] = value
    return out


class Compose:
    """Apply transforms one after another."""

    def __init__(self, transforms: Sequence[Callable]):
        self.transforms = list(transforms)

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self) -> str:
        body = "".join(f"\n    {t!r}" for t in self.transforms)
        return f"Compose({body}\n)"


class ToTensor:
    """An (H, W, C) or (H, W) NumPy image to a (C, H, W) Tensor; uint8 values are divided by 255
    into float32, other dtypes keep their values and dtype (torchvision's ToTensor)."""

    def __call__(self, pic) -> Tensor:
        if not isinstance(pic, np.ndarray):
            raise DTypeError(
                f"expects a NumPy array of shape (H, W, C) or (H, W), got {type(pic).__name__}; "
                "for tensors already in (C, H, W) layout leave ToTensor out",
                op="ToTensor",
            )
        if pic.ndim not in (2, 3):
            raise ShapeError(f"expects (H, W, C) or (H, W), got shape {pic.shape}", op="ToTensor")
        chw = pic[None] if pic.ndim == 2 else pic.transpose(2, 0, 1)
        if chw.dtype == np.uint8:
            return Tensor(chw.astype(np.float32) / np.float32(255))
        return Tensor(np.array(chw, order="C"))

    def __repr__(self) -> str:
        return "ToTensor()"


class Normalize:
    """``(x - mean[c]) / std[c]`` per channel of a (..., C, H, W) float image."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], inplace: bool = False):
        self.mean = [float(m) for m in np.atleast_1d(mean)]
        self.std = [float(s) for s in np.atleast_1d(std)]
        if any(s == 0 for s in self.std):
            raise ShapeError(
                f"std has a zero, which would divide by zero: {self.std}", op="Normalize"
            )
        self.inplace = inplace  # accepted for torchvision compatibility; results are new arrays

    def __call__(self, img):
        arr, is_tensor = _unwrap(img, "Normalize")
        if arr.dtype.kind != "f" and str(arr.dtype) != "bfloat16":
            raise DTypeError(
                f"expects a floating-point image, got {arr.dtype}; convert first (ToTensor)",
                op="Normalize",
            )
        if arr.ndim < 3:
            raise ShapeError(f"expects (..., C, H, W), got shape {arr.shape}", op="Normalize")
        channels = arr.shape[-3]
        for name, values in (("mean", self.mean), ("std", self.std)):
            if len(values) not in (1, channels):
                raise ShapeError(
                    f"{name} has {len(values)} values but the image has {channels} channels "
                    f"(shape {arr.shape})",
                    op="Normalize",
                )
        mean = np.asarray(self.mean, dtype=arr.dtype).reshape(-1, 1, 1)
        std = np.asarray(self.std, dtype=arr.dtype).reshape(-1, 1, 1)
        return _rewrap((arr - mean) / std, is_tensor)

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean}, std={self.std})"


class Pad:
    """Pad the borders: ``padding`` is p, (left/right, top/bottom) or (left, top, right, bottom);
    ``padding_mode`` is constant (with ``fill``: a number or one per channel), edge, reflect or
    symmetric."""

    def __init__(self, padding, fill=0, padding_mode: str = "constant"):
        self.padding = _ltrb(padding, "Pad")
        if padding_mode not in _PAD_MODES:
            raise ShapeError(
                f"padding_mode must be one of {sorted(_PAD_MODES)}, got {padding_mode!r}", op="Pad"
            )
        self.fill, self.padding_mode = fill, padding_mode

    def __call__(self, img):
        arr, is_tensor = _unwrap(img, "Pad")
        return _rewrap(pad_array(arr, self.padding, self.fill, self.padding_mode), is_tensor)

    def __repr__(self) -> str:
        return f"Pad(padding={self.padding}, fill={self.fill}, padding_mode={self.padding_mode!r})"


def _crop(arr: np.ndarray, top: int, left: int, height: int, width: int) -> np.ndarray:
    return arr[..., top : top + height, left : left + width]


class RandomCrop:
    """Crop a random (height, width) window, after optional padding (see `Pad`)."""

    def __init__(
        self,
        size,
        padding=None,
        pad_if_needed: bool = False,
        fill=0,
        padding_mode: str = "constant",
        generator: Generator | None = None,
    ):
        self.size = _pair(size, "RandomCrop")
        self.padding = None if padding is None else _ltrb(padding, "RandomCrop")
        self.pad_if_needed, self.fill, self.padding_mode = pad_if_needed, fill, padding_mode
        self.generator = generator

    def __call__(self, img):
        arr, is_tensor = _unwrap(img, "RandomCrop")
        if self.padding is not None:
            arr = pad_array(arr, self.padding, self.fill, self.padding_mode)
        th, tw = self.size
        if self.pad_if_needed and arr.shape[-1] < tw:
            short = tw - arr.shape[-1]
            arr = pad_array(arr, (short, 0, short, 0), self.fill, self.padding_mode)
        if self.pad_if_needed and arr.shape[-2] < th:
            short = th - arr.shape[-2]
            arr = pad_array(arr, (0, short, 0, short), self.fill, self.padding_mode)
        top, left = self.get_params(arr.shape[-2:], self.size, self.generator)
        return _rewrap(_crop(arr, top, left, th, tw), is_tensor)

    @staticmethod
    def get_params(image_size, output_size, generator: Generator | None = None) -> tuple[int, int]:
        """(top, left) of a uniformly random crop of ``output_size`` from ``image_size``."""
        h, w = image_size
        th, tw = output_size
        if h < th or w < tw:
            raise ShapeError(
                f"crop size {(th, tw)} is larger than the image size {(h, w)}; pass padding= or "
                "pad_if_needed=True",
                op="RandomCrop",
            )
        if (h, w) == (th, tw):
            return 0, 0
        gen = current_generator(generator).numpy
        return int(gen.integers(0, h - th + 1)), int(gen.integers(0, w - tw + 1))

    def __repr__(self) -> str:
        return f"RandomCrop(size={self.size}, padding={self.padding})"


class CenterCrop:
    """Crop the central (height, width) window, zero-padding images smaller than it."""

    def __init__(self, size):
        self.size = _pair(size, "CenterCrop")

    def __call__(self, img):
        arr, is_tensor = _unwrap(img, "CenterCrop")
        th, tw = self.size
        h, w = arr.shape[-2:]
        if th > h or tw > w:
            ltrb = (
                (tw - w) // 2 if tw > w else 0,
                (th - h) // 2 if th > h else 0,
                (tw - w + 1) // 2 if tw > w else 0,
                (th - h + 1) // 2 if th > h else 0,
            )
            arr = pad_array(arr, ltrb, 0, "constant")
            h, w = arr.shape[-2:]
        top, left = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
        return _rewrap(_crop(arr, top, left, th, tw), is_tensor)

    def __repr__(self) -> str:
        return f"CenterCrop(size={self.size})"


class _RandomFlip:
    axis = -1

    def __init__(self, p: float = 0.5, generator: Generator | None = None):
        if not 0.0 <= p <= 1.0:
            raise ShapeError(f"p must be a probability in [0, 1], got {p}", op=type(self).__name__)
        self.p, self.generator = float(p), generator

    def __call__(self, img):
        arr, is_tensor = _unwrap(img, type(self).__name__)
        # one draw per call whatever p is, as torchvision does, so streams stay aligned
        if current_generator(self.generator).numpy.random() < self.p:
            return _rewrap(np.flip(arr, axis=self.axis), is_tensor)
        return _rewrap(arr.copy(), is_tensor)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(p={self.p})"


class RandomHorizontalFlip(_RandomFlip):
    """Mirror left-right (the last dimension) with probability ``p``."""

    axis = -1


class RandomVerticalFlip(_RandomFlip):
    """Mirror top-bottom (dimension -2) with probability ``p``."""

    axis = -2


class Lambda:
    """Apply a user function as a transform."""

    def __init__(self, lambd: Callable):
        if not callable(lambd):
            raise DTypeError(f"expects a callable, got {type(lambd).__name__}", op="Lambda")
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)

    def __repr__(self) -> str:
        return f"Lambda({getattr(self.lambd, '__name__', repr(self.lambd))})"
