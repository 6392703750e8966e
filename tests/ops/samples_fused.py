"""Conformance samples for ops/fused.py: ``fused_elementwise`` and ``fused_reduce`` nodes built
by hand (the fusion pass makes them from graphs; tests/transforms/test_fuse.py covers that and
the C loops). The nodes have no VJP (fusion runs after differentiation), so gradients are not
checked here."""

import numpy as np

import ember
from ember.ops._registry import REGISTRY, apply
from ember.ops.fused import FUSED, FUSED_EPILOGUE, FUSED_REDUCE
from ember.ops.program import Const, Input, Instr, Program, Temp
from ember.types import TensorType

from .harness import Sample, rng

r = rng(12)
X = r.standard_normal((3, 4))
W = r.standard_normal(4)


def _op(name):
    return REGISTRY[name]


def _swish_scaled(x, w):
    """(x * sigmoid(1.702 * x)) * w: a constant, a broadcast row, one output."""
    k = Const(1.702, x.dtype)
    program = Program(
        (
            Instr(_op("mul"), (k, Input(0))),
            Instr(_op("sigmoid"), (Temp(0),)),
            Instr(_op("mul"), (Input(0), Temp(1))),
            Instr(_op("mul"), (Temp(2), Input(1))),
        )
    )
    out = TensorType(tuple(x.shape), x.dtype)
    return apply(FUSED, x, w, program=program, outputs=(3,), out_types=(out,))[0]


def _two_outputs(x, w):
    """tanh(x) and tanh(x) + w, where x > w: a comparison and a select inside."""
    program = Program(
        (
            Instr(_op("tanh"), (Input(0),)),
            Instr(_op("add"), (Temp(0), Input(1))),
            Instr(_op("gt"), (Input(0), Input(1))),
            Instr(_op("where"), (Temp(2), Temp(1), Temp(0))),
        )
    )
    out = TensorType(tuple(x.shape), x.dtype)
    return apply(FUSED, x, w, program=program, outputs=(0, 3), out_types=(out, out))


def _centered_square_sums(x, w):
    """d = x - w and the row sums of d * d and the row max of d: ``fused_reduce``, with a
    full-shape output beside two reductions over the last axis."""
    program = Program(
        (
            Instr(_op("sub"), (Input(0), Input(1))),
            Instr(_op("mul"), (Temp(0), Temp(0))),
            Instr(_op("sum"), (Temp(1),), (("axes", (1,)), ("keepdims", True))),
            Instr(_op("max"), (Temp(0),), (("axes", (1,)), ("keepdims", False))),
        )
    )
    rows = x.shape[0]
    types = (
        TensorType(tuple(x.shape), x.dtype),
        TensorType((rows, 1), x.dtype),
        TensorType((rows,), x.dtype),
    )
    return apply(FUSED_REDUCE, x, w, program=program, outputs=(0, 2, 3), out_types=types)


def _torch_centered_square_sums(x, w):
    d = x - w
    return d, (d * d).sum(1, keepdim=True), d.amax(1)


def _linear_tanh_plus(x, w):
    """tanh(x @ W^T + b) + x: ``fused_epilogue`` of a linear layer, reading x again by rows."""
    weight = ember.tensor(np.linspace(-1, 1, 16).reshape(4, 4), dtype=x.dtype)
    program = Program((Instr(_op("tanh"), (Input(0),)), Instr(_op("add"), (Temp(0), Input(1)))))
    out = TensorType(tuple(x.shape), x.dtype)
    return apply(
        FUSED_EPILOGUE,
        x,
        weight,
        w,
        x,
        producer=_op("linear"),
        producer_attrs=(),
        n_producer=3,
        slot=0,
        program=program,
        outputs=(1,),
        out_types=(out,),
    )[0]


def _torch_linear_tanh_plus(x, w):
    import torch

    weight = torch.tensor(np.linspace(-1, 1, 16).reshape(4, 4), dtype=x.dtype)
    return torch.tanh(torch.nn.functional.linear(x, weight, w)) + x


def _torch_swish_scaled(x, w):
    import torch

    return (x * torch.sigmoid(1.702 * x)) * w


def _torch_two_outputs(x, w):
    import torch

    t = torch.tanh(x)
    return t, torch.where(x > w, t + w, t)


SAMPLES = [
    Sample("fused_elementwise/swish", _swish_scaled, (X, W), _torch_swish_scaled, grad=False),
    Sample("fused_elementwise/select", _two_outputs, (X, W), _torch_two_outputs, grad=False),
    Sample(
        "fused_epilogue/linear-tanh",
        _linear_tanh_plus,
        (X, W),
        _torch_linear_tanh_plus,
        grad=False,
    ),
    Sample(
        "fused_reduce/centered",
        _centered_square_sums,
        (X, W),
        _torch_centered_square_sums,
        grad=False,
    ),
]
