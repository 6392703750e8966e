"""Where ember is known to differ from PyTorch on op_db's samples (tests/ops/
test_torch_opinfo.py): per mode, OpInfo name -> the reason."""

_CHUNKED = (
    "PyTorch's LinearCrossEntropyOptions (a chunked evaluation) is not in ember, which refuses "
    "it by name; options=None computes the same loss whole"
)

FLOAT32 = {
    "nn.functional.linear_cross_entropy.chunked": _CHUNKED,
    "nn.functional.linear_cross_entropy.chunked_none": _CHUNKED,
}

FLOAT64_GRAD = {
    **FLOAT32,
    "as_strided_scatter": (
        "PyTorch's gradient of the input is wrong: non-zero at positions src overwrites (the "
        "result does not depend on them there) and zero at some it keeps; ember's is the "
        "derivative"
    ),
    "special.bessel_j0": (
        "PyTorch's float64 values are up to 2e-7 from Cephes' (scipy.special.j0); ember's are "
        "scipy's"
    ),
    "special.bessel_y1": (
        "PyTorch's float64 values are up to 3e-7 from Cephes' (scipy.special.y1); ember's are "
        "scipy's"
    ),
}

EXPECTED = {"float32": FLOAT32, "float64-grad": FLOAT64_GRAD}
