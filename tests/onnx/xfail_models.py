"""Model cases ember does not pass, each with its reason (tests/onnx/test_model_conformance.py)."""

EXPECTED_FAILURES: dict[str, str] = {}

# Cases whose expected values hold only where every rounding falls alike: they run, and where
# ember's result differs the test checks what does not depend on rounding, then xfails (not
# strict: which way the rounding falls depends on the GEMM kernels this machine's calibration
# picks).
ILL_CONDITIONED: dict[str, str] = {
    "real/test_resnet50": (
        "its untrained weights blow the activations up to 3e17 on the test's input and the "
        "logits to 1.3e19, all equal in exact arithmetic; float32 GEMM blocks round them "
        "differently (2e-6 relative, within K * eps for K = 2048), and softmax turns differences "
        "of 1e12 into different probabilities, where the expected output is uniform"
    ),
    "real/test_squeezenet": (
        "its untrained weights make the logits 9.5e9 on the test's input, all equal in exact "
        "arithmetic; summed in another order (NumPy's single-threaded BLAS under "
        "OMP_NUM_THREADS=1 against ember's C convolutions) they differ by one float32 ulp, "
        "2048, and softmax turns that into different probabilities, where the expected output "
        "is uniform"
    ),
}
