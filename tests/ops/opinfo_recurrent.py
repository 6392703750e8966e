"""OpInfos of the whole-layer recurrent ops (ops/recurrent.py: ``lstm_layer``, ``gru_layer``;
ops/recurrent_elman.py: ``rnn_layer``, tanh and relu; internal, no PyTorch function of their
own): every output, the saved cell states and gate activations included, against a
step-by-step composition of PyTorch ops (samples_recurrent.py's twins), forward and reversed,
non-contiguous, zero-size (no steps, no rows) and NaN inputs; gradients through their
``*_grad`` ops."""

import numpy as np

from ember.ops import apply
from ember.ops.recurrent import GRU_LAYER, LSTM_LAYER
from ember.ops.recurrent_elman import RNN_LAYER

from .opinfo import FLOATS, OpInfo, Sample, rng
from .samples_recurrent import torch_elman, torch_gru, torch_lstm

R = rng(2020)


def _lstm_args(steps, rows, hidden):
    return (
        R.standard_normal((steps, rows, 4 * hidden)),
        R.standard_normal((rows, hidden)) * 0.5,
        R.standard_normal((rows, hidden)) * 0.5,
        R.standard_normal((4 * hidden, hidden)) * 0.5,
    )


def _gru_args(steps, rows, hidden):
    return (
        R.standard_normal((steps, rows, 3 * hidden)),
        R.standard_normal((rows, hidden)) * 0.5,
        R.standard_normal((3 * hidden, hidden)) * 0.5,
        R.standard_normal(3 * hidden) * 0.5,
    )


def _elman_args(steps, rows, hidden):
    return (
        R.standard_normal((steps, rows, hidden)),
        R.standard_normal((rows, hidden)) * 0.5,
        R.standard_normal((hidden, hidden)) * 0.5,
    )


def _with_nan(args):
    xg = args[0].copy()
    xg[1, 0, 2] = np.nan
    return (xg, *args[1:])


def _samples(make):
    def samples():
        return [
            Sample(make(4, 3, 5), {"reverse": False}, desc="forward"),
            Sample(make(3, 2, 4), {"reverse": True}, desc="reverse"),
            Sample(make(4, 3, 5), {"reverse": True}, desc="strided", strided=True),
            Sample(make(1, 1, 2), {"reverse": False}, desc="one step, one row"),
            Sample(make(0, 2, 3), {"reverse": False}, desc="no steps"),
            Sample(make(3, 0, 3), {"reverse": True}, desc="no rows"),
            Sample(_with_nan(make(3, 2, 3)), {"reverse": False}, desc="NaN", grad=False),
        ]

    return samples


def _elman_call(relu):
    def call(lib, *args, reverse):
        if lib.name == "ember":
            return apply(RNN_LAYER, *args, reverse=reverse, relu=relu)
        return torch_elman(reverse, relu)(*args)

    return call


def _call(op, twin):
    def call(lib, *args, reverse):
        if lib.name == "ember":
            return apply(op, *args, reverse=reverse)
        return twin(reverse)(*args)

    return call


_HALF = "the whole-layer ops take float32/float64 (the layers run half precision step by step)"

OPS = [
    OpInfo(
        "lstm_layer",
        _samples(_lstm_args),
        call=_call(LSTM_LAYER, torch_lstm),
        spellings=("internal",),
        dtypes=FLOATS,
        dtype_differences={"float16": _HALF, "bfloat16": _HALF},
    ),
    OpInfo(
        "gru_layer",
        _samples(_gru_args),
        call=_call(GRU_LAYER, torch_gru),
        spellings=("internal",),
        dtypes=FLOATS,
        dtype_differences={"float16": _HALF, "bfloat16": _HALF},
    ),
    OpInfo(
        "rnn_layer",
        _samples(_elman_args),
        call=_elman_call(False),
        spellings=("internal",),
        dtypes=FLOATS,
        dtype_differences={"float16": _HALF, "bfloat16": _HALF},
    ),
    OpInfo(
        "rnn_layer",
        _samples(_elman_args),
        call=_elman_call(True),
        spellings=("internal",),
        dtypes=FLOATS,
        dtype_differences={"float16": _HALF, "bfloat16": _HALF},
    ),
]
