"""The converters, one module per family of ONNX operators (each registers its converters with
``onnx._convert.converter`` when imported)."""

from . import (  # noqa: F401
    contrib,
    contrib_attention,
    contrib_nchwc,
    contrib_quant,
    control,
    elementwise,
    gradient,
    indexing,
    misc,
    ml,
    nn,
    nn_extra,
    nn_norm,
    nn_pool,
    nn_softmax,
    quant,
    recurrent,
    reduce,
    scan,
    sequence,
    shape,
    spectral,
    text,
    training,
)
