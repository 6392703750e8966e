"""Node conformance cases of the attention, resize and recurrent family that ember does not
pass, each with its reason."""

EXPECTED_FAILURES = {
    "test_attention_4d_causal_fp16_expanded": (
        "float16 rounding: two of 192 values differ by one float16 ulp (4.9e-4 at 0.47), above "
        "the case's rtol 1e-3; ember's float16 matmul sums in float32 and rounds once, the "
        "expected values come from NumPy's float16 arithmetic (the unexpanded case passes)"
    ),
}
