"""OpInfo entries of the quantization functions (ops/quantize.py): PyTorch's fake quantizers.
``x / scale`` stays 0.05 from a half (PyTorch multiplies by the inverse scale, ember divides:
they can round apart within a rounding error of a half). The quantize / dequantize functions
return what PyTorch keeps in a quantized tensor type ember does not have; the conformance
samples (samples_quantize.py) compare them with ``int_repr()`` and ``dequantize()``."""

import numpy as np

from .opinfo import OpInfo, Sample, rng

r = rng(43)


def _off_ties(x, scale):
    v = x / scale
    frac = v - np.floor(v)
    return np.where(np.abs(frac - 0.5) < 0.05, np.floor(v) + 0.3, v) * scale


_SC = np.array([0.02, 0.05, 0.1], np.float32)


def _per_tensor():
    x = _off_ties(r.standard_normal((3, 5)) * 4, 0.1)
    return [
        Sample((x, 0.1, 10, 0, 255), desc="uint8 range, clamped both sides"),
        Sample((x, 0.1, 0, -128, 127), desc="int8 range"),
        Sample((_off_ties(r.standard_normal((2, 3, 4)), 0.05), 0.05, 3, -7, 7), desc="narrow"),
        Sample((np.zeros((0, 3)), 0.1, 0, 0, 255), desc="empty"),
    ]


def _per_channel():
    x = _off_ties(r.standard_normal((2, 3, 4)) * 3, _SC.reshape(1, 3, 1).astype(np.float64))
    z = np.array([0, 5, 128], np.int32)
    return [Sample((x, _SC, z, 1, 0, 255), nondiff=(1,), desc="axis 1")]


def _call_channel(lib, x, s, z, axis, lo, hi):
    # PyTorch requires float32 scales and int zero points
    return lib.mod.fake_quantize_per_channel_affine(x, s.float(), z.int(), axis, lo, hi)


OPS = [
    OpInfo("fake_quantize_per_tensor_affine", _per_tensor, dtypes=("float32", "float64")),
    OpInfo("fake_quantize_per_channel_affine", _per_channel, call=_call_channel,
           dtypes=("float32", "float64")),
]  # fmt: skip

NO_TORCH = {
    "T:quantize_per_tensor": "PyTorch returns a quantized tensor (a type ember lacks); "
    "samples_quantize.py compares ember's uint8/int8 result with its int_repr()",
    "T:quantize_per_channel": "as quantize_per_tensor: compared with int_repr() in "
    "samples_quantize.py",
    "T:dequantize": "PyTorch's is a method of its quantized tensor type; samples_quantize.py "
    "compares with it",
}
_QTENSOR = "a quantized tensor's (ops/qtensor.py): tests/test_sem56_quantized.py compares it "
NO_TORCH.update(
    {
        f"{kind}:{name}": _QTENSOR + "with PyTorch's quantized tensors"
        for kind, name in [
            ("M", "dequantize"),
            ("M", "int_repr"),
            ("M", "q_scale"),
            ("M", "q_zero_point"),
            ("M", "q_per_channel_scales"),
            ("M", "q_per_channel_zero_points"),
            ("M", "q_per_channel_axis"),
            ("M", "qscheme"),
            ("T", "_make_per_tensor_quantized_tensor"),
            ("T", "_make_per_channel_quantized_tensor"),
        ]
    }
)
_CSR = "sparse CSR matrices (ops/sparse_csr.py): tests/test_sem56_sparse_csr.py compares them"
NO_TORCH.update({"M:to_sparse_csr": _CSR, "T:sparse_csr_tensor": _CSR})

_SEE = "conformance samples (samples_quantize.py) compare it with PyTorch's quantized tensors"
INTERNAL = {
    "quantize_per_tensor": _SEE,
    "quantize_per_channel": _SEE,
    "dequantize_per_tensor": _SEE,
    "dequantize_per_channel": _SEE,
    "quantized_linear": "int8 inference (no PyTorch function without packed weights): "
    "tests/quantization checks it against the dequantized float product and the C kernel",
    "quantized_conv2d": "as quantized_linear (tests/quantization)",
    "fake_quantize_backward": "the fake quantizers' straight-through gradient; its own VJP "
    "is checked by finite differences in samples_quantize.py",
}
