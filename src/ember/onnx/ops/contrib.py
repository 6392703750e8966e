"""ONNX Runtime's contrib operators that its graph optimizer writes into a saved model.

A model saved by onnxruntime with ``SessionOptions.optimized_model_filepath`` (and the
transformer optimizers built on it) holds fused nodes of the ``com.microsoft`` domain: FusedConv
and FusedGemm (a Conv or Gemm and its activation), FusedMatMul (MatMul with transposes and a
scale), Gelu, BiasGelu, FastGelu, QuickGelu, SkipLayerNormalization and
SkipSimplifiedLayerNormalization; and, registered by onnxruntime in the default domain from
version 1 whatever the model's opset, LayerNormalization and SimplifiedLayerNormalization.
Each is written here in ember ops after ONNX Runtime's contrib operator documentation, reusing
the standard converters (Conv, Gemm, LayerNormalization). The blocked-layout nodes of
``com.microsoft.nchwc`` (ORT_ENABLE_ALL on x86) are read by contrib_nchwc.py.
"""

from __future__ import annotations

from .._convert import converter
from ._common import E, F, axis
from .nn import _conv, _gemm
from .nn_norm import _as, _layer_norm, _stash

_MS = "com.microsoft"

# LayerNormalization as onnxruntime registers it in the default domain (its contrib schema,
# version 1): the same operator as ONNX's opset 17 one, found in models of older opsets
converter("LayerNormalization", 1)(_layer_norm)


def _activation(ctx, y, name: str, params):
    """FusedConv's / FusedGemm's activation ``name`` with its parameters."""
    if name in ("", None):
        return y
    if name == "Relu":
        return F.relu(y)
    if name == "Tanh":
        return E.tanh(y)
    if name == "Sigmoid":
        return E.sigmoid(y)
    if name == "LeakyRelu":
        return F.leaky_relu(y, float(params[0]) if params else 0.01)
    if name == "Clip":
        lo, hi = (float(params[0]), float(params[1])) if len(params) >= 2 else (None, None)
        return E.clamp(y, lo, hi)
    if name == "HardSigmoid":
        alpha = float(params[0]) if params else 0.2
        beta = float(params[1]) if len(params) > 1 else 0.5
        return E.clamp(y * alpha + beta, 0.0, 1.0)
    if name == "HardSwish":  # the nchwc Conv's (MLAS's activations)
        return y * E.clamp(y * (1.0 / 6.0) + 0.5, 0.0, 1.0)
    raise ctx.error(f"activation {name!r} is not one ONNX Runtime's fused nodes take")


@converter("FusedConv", 1, domain=_MS)
def _fused_conv(ctx, x, w, bias=None, z=None):
    y = _conv(ctx, x, w, bias)
    if z is not None:
        y = y + ctx.tensor(z, y.dtype)
    params = [float(p) for p in ctx.attr("activation_params", [])]
    return _activation(ctx, y, _text(ctx.attr("activation", "")), params)


@converter("FusedGemm", 1, domain=_MS)
def _fused_gemm(ctx, a, b, c=None):
    y = _gemm(ctx, a, b, c)
    name = _text(ctx.attr("activation", ""))
    params = [ctx.attr("activation_alpha", None), ctx.attr("activation_beta", None)]
    return _activation(ctx, y, name, [p for p in params if p is not None])


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _batch_transposed(t):
    """transBatchA/B: the first dimension moved behind the other batch dimensions
    ([B0, B1, ..., M, K] read as [B1, ..., B0, M, K])."""
    if t.ndim < 3:
        return t
    order = (*range(1, t.ndim - 1), 0, t.ndim - 1)
    return E.permute(t, order)


@converter("FusedMatMul", 1, domain=_MS)
def _fused_matmul(ctx, a, b):
    a, b = ctx.tensor(a), ctx.tensor(b)
    if ctx.attr("transBatchA", 0):
        a = _batch_transposed(a)
    if ctx.attr("transBatchB", 0):
        b = _batch_transposed(b)
    if ctx.attr("transA", 0) and a.ndim >= 2:
        a = E.transpose(a, -1, -2)
    if ctx.attr("transB", 0) and b.ndim >= 2:
        b = E.transpose(b, -1, -2)
    y = E.matmul(a, b)
    alpha = float(ctx.attr("alpha", 1.0))
    return y if alpha == 1.0 else y * alpha


@converter("Gelu", 1, domain=_MS)
def _gelu(ctx, x):
    return F.gelu(ctx.tensor(x))


@converter("BiasGelu", 1, domain=_MS)
def _bias_gelu(ctx, x, bias):
    x = ctx.tensor(x)
    return F.gelu(x + ctx.tensor(bias, x.dtype))


@converter("FastGelu", 1, domain=_MS)
def _fast_gelu(ctx, x, bias=None):
    x = ctx.tensor(x)
    if bias is not None:
        x = x + ctx.tensor(bias, x.dtype)
    return F.gelu(x, approximate="tanh")


@converter("QuickGelu", 1, domain=_MS)
def _quick_gelu(ctx, x):
    x = ctx.tensor(x)
    return x * E.sigmoid(x * float(ctx.attr("alpha", 1.702)))


def _rms(ctx, x, first: int, eps: float):
    """(x / rms(x) over the dimensions from ``first``, 1 / rms) in the stash type."""
    stash = _stash(ctx, x)
    xs = x if stash == x.dtype else E.cast(x, stash)
    inv = E.rsqrt(E.mean(xs * xs, tuple(range(first, x.ndim)), keepdim=True) + eps)
    return xs * inv, inv


@converter("SimplifiedLayerNormalization", 1)
def _simplified_layer_norm(ctx, x, scale):
    """ONNX Runtime's RMS normalization (default domain, its contrib schema)."""
    x, scale = ctx.tensor(x), ctx.tensor(scale)
    first = axis(ctx.attr("axis", -1), x.ndim, ctx)
    normalized, inv = _rms(ctx, x, first, float(ctx.attr("epsilon", 1e-5)))
    y = _as(ctx, normalized, x) * _as(ctx, scale, x)
    return (y, inv) if ctx.output_used(1) else y


def _skip_sum(ctx, x, skip, bias):
    x = ctx.tensor(x)
    total = x + ctx.tensor(skip, x.dtype)
    return total if bias is None else total + ctx.tensor(bias, x.dtype)


@converter("SkipLayerNormalization", 1, domain=_MS)
def _skip_layer_norm(ctx, x, skip, gamma, beta=None, bias=None):
    """LayerNorm(x + skip + bias) * gamma + beta over the last dimension; outputs: the result,
    the mean and 1 / std (optional), and the sum before normalization (optional)."""
    total = _skip_sum(ctx, x, skip, bias)
    eps = float(ctx.attr("epsilon", 1e-12))
    stash = _stash(ctx, total)
    xs = total if stash == total.dtype else E.cast(total, stash)
    mean = E.mean(xs, -1, keepdim=True)
    centred = xs - mean
    inv = E.rsqrt(E.mean(centred * centred, -1, keepdim=True) + eps)
    y = _as(ctx, centred * inv, total) * ctx.tensor(gamma, total.dtype)
    if beta is not None:
        y = y + ctx.tensor(beta, total.dtype)
    return _skip_outputs(ctx, y, mean, inv, total)


@converter("SkipSimplifiedLayerNormalization", 1, domain=_MS)
def _skip_simplified_layer_norm(ctx, x, skip, gamma, bias=None):
    """RMSNorm(x + skip + bias) * gamma; outputs as SkipLayerNormalization's (no mean)."""
    total = _skip_sum(ctx, x, skip, bias)
    normalized, inv = _rms(ctx, total, total.ndim - 1, float(ctx.attr("epsilon", 1e-12)))
    y = _as(ctx, normalized, total) * ctx.tensor(gamma, total.dtype)
    return _skip_outputs(ctx, y, None, inv, total)


def _skip_outputs(ctx, y, mean, inv, total):
    if not any(ctx.output_used(i) for i in (1, 2, 3)):
        return y
    if mean is None and ctx.output_used(1):
        raise ctx.error("SkipSimplifiedLayerNormalization has no mean output")
    mean = E.zeros_like(inv) if mean is None else mean
    return y, mean, inv, total
