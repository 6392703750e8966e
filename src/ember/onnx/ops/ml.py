"""The ai.onnx.ml preprocessing and linear models that scikit-learn pipelines export as
(skl2onnx): Scaler, Normalizer and LinearRegressor, as onnxruntime computes them (outputs
float32; a vector input is one row)."""

from __future__ import annotations

import numpy as np

from ... import dtypes as dt
from .._convert import converter
from ._common import E
from .misc import post_transform

_ML = "ai.onnx.ml"
_TRANSFORMS = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}


def _features(ctx, x):
    """The input as float32 (float64 kept for the arithmetic, as onnxruntime's double kernels
    compute), and its feature count (the last dimension)."""
    x = ctx.tensor(x)
    if len(x.shape) not in (1, 2):
        raise ctx.error(f"the input must be [N, F] or [F], got shape {tuple(x.shape)}")
    if not x.dtype.is_floating_point or x.dtype.itemsize < 4:
        x = E.cast(x, dt.float32)
    return x, int(x.shape[-1])


def _floats(ctx, name: str, default, count: int) -> np.ndarray:
    values = np.asarray(ctx.attr(name, default), dtype=np.float64).reshape(-1)
    if values.size not in (1, count):
        raise ctx.error(f"{name} has {values.size} values; it needs 1 or {count} (the features)")
    return values


@converter("Scaler", 1, domain=_ML)
def _scaler(ctx, x):
    x, count = _features(ctx, x)
    offset = _floats(ctx, "offset", [0.0], count)
    scale = _floats(ctx, "scale", [1.0], count)
    dtype = x.dtype
    y = (x - E.tensor(offset.astype(dtype.np))) * E.tensor(scale.astype(dtype.np))
    return E.cast(y, dt.float32)


@converter("Normalizer", 1, domain=_ML)
def _normalizer(ctx, x):
    x, _ = _features(ctx, x)
    norm = ctx.attr("norm", "MAX")
    if norm == "MAX":
        by = E.amax(x, -1, True)
    elif norm == "L1":
        by = E.sum(E.abs(x), -1, True)
    elif norm == "L2":
        by = E.sqrt(E.sum(x * x, -1, True))
    else:
        raise ctx.error(f"unknown norm {norm!r} (MAX, L1 or L2)")
    zero = by == 0  # (a row of zeros stays zeros, as in onnxruntime)
    y = E.where(zero, E.zeros_like(x), x / E.where(zero, E.ones_like(by), by))
    return E.cast(y, dt.float32)


@converter("LinearRegressor", 1, domain=_ML)
def _linear_regressor(ctx, x):
    x, count = _features(ctx, x)
    targets = int(ctx.attr("targets", 1))
    coefficients = np.asarray(ctx.attr("coefficients", []), dtype=np.float64).reshape(-1)
    if targets < 1 or coefficients.size != targets * count:
        raise ctx.error(
            f"coefficients has {coefficients.size} values; {targets} targets of {count} "
            f"features need {targets * count}"
        )
    intercepts = np.asarray(ctx.attr("intercepts", [0.0] * targets), dtype=np.float64)
    if intercepts.size not in (1, targets):
        raise ctx.error(f"intercepts has {intercepts.size} values; it needs {targets}")
    dtype = x.dtype.np
    weight = E.tensor(coefficients.reshape(targets, count).T.astype(dtype))
    rows = x if len(x.shape) == 2 else E.reshape(x, (1, count))
    y = E.matmul(rows, weight) + E.tensor(intercepts.reshape(-1).astype(dtype))
    transform = ctx.attr("post_transform", "NONE")
    if transform not in _TRANSFORMS:
        raise ctx.error(f"unknown post_transform {transform!r} ({', '.join(_TRANSFORMS)})")
    code = _TRANSFORMS[transform]
    if targets == 1 and code != _TRANSFORMS["PROBIT"]:
        code = 0  # onnxruntime transforms a single target by PROBIT only (the others: none)
    return E.cast(post_transform(ctx, y, code), dt.float32)
