"""Every op of the registry through ``ember.onnx.export``: each conformance sample
(tests/ops/samples_*.py) is captured (its forward and, where it has gradients, its traced
gradient, which holds the ops' backward ops), written to ONNX (checker and shape inference
included), run by onnxruntime and compared with ember. Ops with no ONNX form are listed in
`NO_ONNX` with the reason, and must be refused with an `OnnxError` naming them."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import ember
from ember.errors import OnnxError
from ember.ops import REGISTRY

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from ember.onnx.exporter import to_model  # noqa: E402

from ..ops.harness import diff_indices  # noqa: E402
from ..ops.test_conformance import _DRAWS, _VALUE_SHAPED, SAMPLES, _captured  # noqa: E402

# the last test of this file checks what its other tests reached: under pytest-xdist (the
# suite's default) they all run in one worker, in file order (--dist loadgroup)
pytestmark = pytest.mark.xdist_group("test_export_ops")

_RANDOM = "ember's generators' streams cannot be reproduced by ONNX's Random* ops"
_LINALG = "ONNX has no matrix decompositions, inverses or solvers (Det is its one linalg op)"
_SPECIAL = "ONNX has no special functions beyond Erf"
_POLYNOMIAL = "a degree per element needs a data-dependent Loop of the recurrence: not written"
_COLLECTIVE = "ONNX has no collectives: a model file runs in one process"

_EAGER_CDIST = "cdist's eager ops: a captured cdist keeps the composite, which exports"
_COMPLEX = "complex values: no ONNX form over real and imaginary pairs (refused by name)"
NO_ONNX = {
    "check": "ONNX has no operator that raises: dropping the check would export another program",
    "host_print": "ONNX has no operator that prints: dropping it would export another program",
    "linspace": "a symbolic count's values rounded as PyTorch's (one fused multiply-add each) "
    "that ONNX's Range and Mul would round twice (a concrete count exports as a constant)",
    "eig": _COMPLEX,
    "eig_backward": _COMPLEX,
    "lu_factor": "LAPACK's getrf (row pivoting with a data-dependent loop) has no ONNX operator",
    "lu_permutation": "a loop of data-dependent row swaps; ONNX has no such operator",
    "view_dtype": "ONNX's BitCast is opset 26, past the default 20: not written",
    "random_bernoulli": _RANDOM,
    "random_bernoulli_scalar": _RANDOM,
    "random_multinomial": _RANDOM,
    "random_rrelu_slopes": _RANDOM,
    "random_normal": _RANDOM,
    "random_randint": _RANDOM,
    "random_randperm": _RANDOM,
    "random_uniform": _RANDOM,
    "random_binomial": _RANDOM,
    "random_poisson": _RANDOM,
    "cholesky": _LINALG,
    "cholesky_solve": _LINALG,
    "eigh": _LINALG,
    "eigvalsh": _LINALG,
    "inv": _LINALG,
    "linalg_svd": _LINALG,
    "matrix_exp": _LINALG,
    "pinv": _LINALG,
    "qr": _LINALG,
    "slogdet": _LINALG,
    "solve": _LINALG,
    "solve_triangular": _LINALG,
    "svd": _LINALG,
    "svdvals": _LINALG,
    "geqrf": _LINALG,
    "ldl_factor": _LINALG,
    "ldl_solve": _LINALG,
    "digamma": _SPECIAL,
    "erfinv": _SPECIAL,
    "i0": _SPECIAL,
    "i1": _SPECIAL,
    "lgamma": _SPECIAL,
    "log_ndtr": _SPECIAL,
    "polygamma": _SPECIAL,
    "special_i0e": _SPECIAL,
    "special_i1e": _SPECIAL,
    "special_ndtri": _SPECIAL,
    "special_erfcx": _SPECIAL,
    "special_airy_ai": _SPECIAL,
    "special_bessel_j0": _SPECIAL,
    "special_bessel_j1": _SPECIAL,
    "special_bessel_y0": _SPECIAL,
    "special_bessel_y1": _SPECIAL,
    "special_modified_bessel_i0": _SPECIAL,
    "special_modified_bessel_i1": _SPECIAL,
    "special_modified_bessel_k0": _SPECIAL,
    "special_modified_bessel_k1": _SPECIAL,
    "special_scaled_modified_bessel_k0": _SPECIAL,
    "special_scaled_modified_bessel_k1": _SPECIAL,
    "special_spherical_bessel_j0": _SPECIAL,
    "special_zeta": _SPECIAL,
    "igamma": _SPECIAL,
    "igammac": _SPECIAL,
    "special_chebyshev_polynomial_t": _POLYNOMIAL,
    "special_chebyshev_polynomial_u": _POLYNOMIAL,
    "special_chebyshev_polynomial_v": _POLYNOMIAL,
    "special_chebyshev_polynomial_w": _POLYNOMIAL,
    "special_shifted_chebyshev_polynomial_t": _POLYNOMIAL,
    "special_shifted_chebyshev_polynomial_u": _POLYNOMIAL,
    "special_shifted_chebyshev_polynomial_v": _POLYNOMIAL,
    "special_shifted_chebyshev_polynomial_w": _POLYNOMIAL,
    "special_hermite_polynomial_h": _POLYNOMIAL,
    "special_hermite_polynomial_he": _POLYNOMIAL,
    "special_laguerre_polynomial_l": _POLYNOMIAL,
    "special_legendre_polynomial_p": _POLYNOMIAL,
    "copysign": "the sign of other is its sign bit (-0.0 and -NaN are negative), which "
    "comparisons cannot see; only BitCast (opset 26, past the default 20) reads it: not written",
    "signbit": "comparisons cannot see a float's sign bit (-0.0 and -NaN compare like 0.0 and "
    "NaN); only BitCast (opset 26, past the default 20) reads it: not written",
    "cdist_direct": _EAGER_CDIST,
    "cdist_direct_backward": _EAGER_CDIST,
    "ctc_loss": "ONNX has no CTC loss",
    "all_reduce": _COLLECTIVE,
    "all_reduce_start": _COLLECTIVE,
    "all_reduce_wait": _COLLECTIVE,
    "broadcast": _COLLECTIVE,
    "ctc_loss_backward": "ONNX has no CTC loss",
    "unique": "its result's size depends on the data (capture refuses it too)",
    "nonzero": "its result's size depends on the data (capture refuses it too)",
    # (composable from Range, comparisons with the splits, ScatterND and Gather: not written)
    "varlen_attention": "no ONNX form written (a block-diagonal mask from the row splits would "
    "express it); padded attention exports",
    "varlen_attention_grad": "a gradient op (inference graphs never hold it); no ONNX form",
    "unique_consecutive": "its result's size depends on the data (capture refuses it too)",
    "gcd": "ONNX has no gcd, and Euclid's algorithm needs a data-dependent Loop: not written",
    "lcm": "ONNX has no lcm (nor gcd, which it needs)",
    "nextafter": "stepping a float's bit pattern needs BitCast (opset 26, past the default 20)",
    "frexp_exponent": "reading a float's exponent bits needs BitCast (opset 26, past the "
    "default 20)",
    "histogram": "ONNX has no histogram (its bins need a scatter-add by computed bin index, "
    "not written)",
    "histogramdd": "ONNX has no histogram (as histogram: a scatter-add by computed bin index, "
    "not written)",
}

# ops exported, but refused (with `OnnxError`) for some attributes ONNX cannot express
PARTIAL = {
    "avg_pool": "divisor_override: AveragePool divides by the window's size",
    "avg_pool_backward": "ceil_mode, or a divisor that varies by window (count_include_pad=False "
    "with padding): ConvTranspose spreads one constant kernel",
    "adaptive_max_pool": "input sizes that are not multiples of the output's (windows of "
    "varying size)",
    "pad": "circular mode before opset 19 (Pad's wrap mode)",
    "pad_backward": "reflect, replicate and circular modes (their copies' gradients summed)",
    "bitwise_left_shift": "signed integers: ONNX's BitShift shifts unsigned types",
    "bitwise_right_shift": "signed integers: ONNX's BitShift shifts unsigned types",
    "select_index": "median, nanmedian and mode: ONNX's TopK orders NaN and ties its own way",
    "erfc": "float64: ONNX has Erf only (1 - erf(x) loses erfc's tail); the closed form written "
    "(Numerical Recipes' erfcc) holds float32's precision only",
    "index": "a bool mask, a graph constant's too (a traced function's NumPy mask): the exporter "
    "writes GatherND of integer indices and does not read a constant mask's values",
}

_SEEN: set[str] = set()


def _float32(array):
    if isinstance(array, np.ndarray) and array.dtype == np.float64:
        return array.astype(np.float32)
    return array


def _cases(sample):
    """(label, function, tensors) for the sample's forward and its gradient."""
    call, tensors, positions = _captured(sample)
    tensors = [ember.tensor(_float32(t.numpy())) for t in tensors]
    yield "forward", call, tensors
    if not sample.grad:
        return
    diff = [k for k, i in enumerate(positions) if i in diff_indices(sample, sample.inputs)]
    if not diff:
        return

    def objective(*ts):
        out = call(*ts)
        total = 0.0
        for o in out if isinstance(out, tuple) else (out,):
            if o.dtype.is_floating_point:
                total = total + (o * o).sum()
        return total

    yield "gradient", ember.grad(objective, argnums=tuple(diff)), tensors


def _ops_of(model_graph) -> set:
    return {n.op.name for n in model_graph.call_nodes()}


def _computes_complex(graph) -> bool:
    return any(v.dtype.is_complex for n in graph.nodes for v in (*n.inputs, *n.outputs))


def _pairs(array):
    """A complex array as the exported file holds it: real and imaginary parts on a last axis."""
    if np.iscomplexobj(array):
        return np.stack([array.real, array.imag], axis=-1)
    return array


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _flat(o)]
    return [out]


# (draws: onnxruntime's differ; a setitem through a constant mask exports its gradient with a
# masked index that the optimized graph makes, not one the traced function names)
_SKIP = _DRAWS + _VALUE_SHAPED + ("poisson", "binomial", "index_put/setitem-mask")


@pytest.mark.parametrize("sample", [s for s in SAMPLES if not s.name.startswith(_SKIP)], ids=str)
def test_sample_exports_and_runs(sample):
    for label, fn, tensors in _cases(sample):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                # the reference interpreter's results: the expected values, free of the
                # suite's checks of generated code (float32 here, float64 there)
                traced = ember.trace(fn, *tensors, opt_level=0, executor="interpreter")
            except Exception:  # (the capture's own limits are tested elsewhere)
                continue
            ops = _ops_of(traced.captured_graph)
            try:
                model = to_model(fn, *tensors)
            except OnnxError as error:
                if _computes_complex(traced.captured_graph) and "complex" in str(error):
                    # (an op whose rule reads no complex pairs: refused naming it)
                    assert " at " in str(error), f"the refusal names no line: {error}"
                    continue
                named = re.match(r"(\w+):", str(error))
                op = named.group(1) if named else None
                listed = op in NO_ONNX or (op in PARTIAL and "has no ONNX form" in str(error))
                assert op in ops and listed, (
                    f"{sample.name} ({label}) was refused for an op not listed: {error}"
                )
                assert " at " in str(error), f"the refusal names no line: {error}"
                continue
            expected = [_pairs(o.numpy()) for o in _flat(traced(*tensors))]
        _SEEN.update(ops)
        session = ort.InferenceSession(model.SerializeToString())
        feed = {i.name: _pairs(t.numpy()) for i, t in zip(session.get_inputs(), tensors)}
        got = session.run(None, feed)
        assert len(got) == len(expected), f"{sample.name} ({label})"
        for k, (g, want) in enumerate(zip(got, expected)):
            assert g.dtype == want.dtype, f"{sample.name} ({label}) output {k}"
            assert g.shape == want.shape, f"{sample.name} ({label}) output {k}"
            np.testing.assert_allclose(
                g, want, rtol=2e-4, atol=2e-5, err_msg=f"{sample.name} ({label}) output {k}"
            )


def test_every_op_exports_or_is_listed():
    """Runs after the samples (a lone run of this test has nothing to check)."""
    if not _SEEN:
        pytest.skip("run with the sample tests")
    listed_and_exported = sorted(set(NO_ONNX) & _SEEN)
    assert not listed_and_exported, f"listed in NO_ONNX yet exported: {listed_and_exported}"
    assert not set(NO_ONNX) - set(REGISTRY), "NO_ONNX names ops that do not exist"
    missing = sorted(set(REGISTRY) - _SEEN - set(NO_ONNX) - _UNSAMPLED)
    assert not missing, f"ops neither exported by a sample nor listed in NO_ONNX: {missing}"


# ops no sample's forward or traced gradient exports (eager code's one-op forms, fused nodes,
# the even case of adaptive pooling, cummax and cummin alone): test_export.py (fused nodes)
# and test_export_semantics.py export them directly
_UNSAMPLED = {
    "fused_elementwise",
    "fused_reduce",
    "fused_epilogue",
    "gelu",
    "gelu_tanh",
    "hardtanh",
    "softmax_cross_entropy",
    "softmax_cross_entropy_backward",
    "nll_loss",
    "nll_loss_backward",
    "adaptive_max_pool",
    "select_index",
    "as_strided_view",  # (tests/test_sem58_as_strided.py exports it against onnxruntime)
    # complex values (written as real/imaginary pairs): no sample takes complex tensors;
    # test_onnx50_fft.py exports these against onnxruntime
    "complex",
    "conj",
    "fft_c2c",
    "imag",
    "real",
    "view_as_complex",
}


@pytest.mark.parametrize("fn", [lambda x: (x**3).real, lambda x: x.log().real])
def test_complex_values_are_refused_naming_the_op(fn):
    """Ops whose rules read no complex pairs (ops/_onnx_complex.py) refuse them by name."""
    x = ember.randn(4, dtype=ember.complex64)
    with pytest.raises(OnnxError, match=r"^\w+: .*(complex64|no ONNX form)"):
        to_model(fn, x)
