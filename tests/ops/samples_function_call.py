"""Conformance samples for ops/function_call.py's ``autograd_function`` node.

``Function.apply`` runs eagerly on the tape's own node; ``staged_apply`` goes through the node
a captured graph records even eagerly, so its shape rule, its kernel (the forward's outputs
passed through) and its VJP (the Function's backward, saved tensors rebound to the operands)
are checked like any other op's, against the same Function written for PyTorch.
"""

import ember
from ember.autograd_function import staged_apply

from .harness import Sample, rng, torch

r = rng(13)
X = r.standard_normal((2, 3))
W = r.standard_normal((3, 4))


def _functions(lib):
    class ScaledTanh(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, scale):
            y = (x @ w).tanh() * scale
            ctx.scale = scale
            ctx.save_for_backward(x, w, y)
            return y, (x @ w).argmax(-1)

        @staticmethod
        def backward(ctx, gy, gi):
            x, w, y = ctx.saved_tensors
            gz = gy * (ctx.scale - y * y / ctx.scale)
            return gz @ w.T, x.T @ gz, None

    class Twice(lib.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2.0, x.sum()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.shape = inputs[0].shape

        @staticmethod
        def backward(ctx, g, gs):
            return g * 2.0 + gs.expand(ctx.shape)

    return ScaledTanh, Twice


E_TANH, E_TWICE = _functions(ember)
T_TANH, T_TWICE = _functions(torch) if torch is not None else (None, None)

SAMPLES = [
    Sample(
        "autograd_function/saved-and-int-output",
        lambda x, w: staged_apply(E_TANH, x, w, 1.5),
        (X, W),
        torch_fn=None if torch is None else lambda x, w: T_TANH.apply(x, w, 1.5),
    ),
    Sample(
        "autograd_function/setup-context",
        lambda x: staged_apply(E_TWICE, x),
        (X,),
        torch_fn=None if torch is None else T_TWICE.apply,
    ),
]
