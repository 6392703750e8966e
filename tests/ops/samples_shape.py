"""Conformance samples for ops/shape.py and ops/creation.py."""

import numpy as np

import ember

from .harness import Sample, rng

r = rng(3)
A = r.standard_normal((2, 3, 4))
M = r.standard_normal((4, 5))


def torch():
    import torch as t

    return t


def F():
    import torch.nn.functional as f

    return f


SAMPLES = [
    Sample("reshape", lambda a: a.reshape(6, -1) * 1, (A,), torch_fn=lambda a: a.reshape(6, -1)),
    Sample(
        "view/flatten",
        lambda a: (a.view(2, 12), a.flatten(1), ember.flatten(a)),
        (A,),
        torch_fn=lambda a: (a.view(2, 12), a.flatten(1), torch().flatten(a)),
    ),
    Sample(
        "squeeze/unsqueeze",
        lambda a: (a.unsqueeze(1).squeeze(), a[None].squeeze(0), a.unsqueeze(-1)),
        (A,),
        torch_fn=lambda a: (a.unsqueeze(1).squeeze(), a[None].squeeze(0), a.unsqueeze(-1)),
    ),
    Sample(
        "broadcast_to",
        lambda a: ember.broadcast_to(a, (5, 4, 5)),
        (r.standard_normal((4, 1)),),
        torch_fn=lambda a: torch().broadcast_to(a, (5, 4, 5)),
    ),
    Sample(
        "expand",
        lambda a: a.expand(3, -1, 5),
        (r.standard_normal((4, 1)),),
        torch_fn=lambda a: a.expand(3, -1, 5),
    ),
    Sample("permute", lambda a: a.permute(2, 0, 1), (A,), torch_fn=lambda a: a.permute(2, 0, 1)),
    Sample(
        "transpose/T",
        lambda a, m: (a.transpose(0, 2), m.T, ember.transpose(a)),
        (A, M),
        torch_fn=lambda a, m: (a.transpose(0, 2), m.T, a.transpose(-2, -1)),
    ),
    Sample(
        "movedim",
        lambda a: ember.movedim(a, 0, -1),
        (A,),
        torch_fn=lambda a: torch().movedim(a, 0, -1),
    ),
    Sample(
        "flip",
        lambda a: (a.flip(0), ember.flip(a, (1, 2))),
        (A,),
        torch_fn=lambda a: (a.flip(0), torch().flip(a, (1, 2))),
    ),
    Sample(
        "concat",
        lambda a, b: ember.concat([a, b], 1),
        (M, r.standard_normal((4, 2))),
        torch_fn=lambda a, b: torch().cat([a, b], 1),
    ),
    Sample(
        "concat/promote",
        lambda a, b: ember.cat([a, b.float()]),
        (M.astype(np.float32), np.ones((1, 5))),
        grad=False,
        float32=False,
        torch_fn=lambda a, b: torch().cat([a, b.float()]),
    ),
    Sample(
        "stack",
        lambda a, b: ember.stack([a, b], -1),
        (M, M * 2),
        torch_fn=lambda a, b: torch().stack([a, b], -1),
    ),
    Sample(
        "split", lambda a: ember.split(a, 2, 2), (A,), torch_fn=lambda a: torch().split(a, 2, 2)
    ),
    Sample(
        "split/sections",
        lambda a: a.split([1, 3], -1),
        (A,),
        torch_fn=lambda a: a.split([1, 3], -1),
    ),
    Sample(
        "split/unused-output",
        lambda a: a.split([1, 3], -1)[1],
        (A,),
        torch_fn=lambda a: a.split([1, 3], -1)[1],
    ),
    Sample("chunk", lambda a: ember.chunk(a, 3, 2), (A,), torch_fn=lambda a: a.chunk(3, 2)),
    Sample("unbind", lambda a: ember.unbind(a, 1), (A,), torch_fn=lambda a: a.unbind(1)),
    Sample(
        "tile",
        lambda a: ember.tile(a, (2, 1, 3)),
        (A,),
        torch_fn=lambda a: torch().tile(a, (2, 1, 3)),
    ),
    Sample("repeat", lambda m: m.repeat(2, 1, 2), (M,), torch_fn=lambda m: m.repeat(2, 1, 2)),
    Sample(
        "repeat_interleave",
        lambda m: m.repeat_interleave(2, 1),
        (M,),
        torch_fn=lambda m: m.repeat_interleave(2, 1),
    ),
    Sample(
        "tril/triu",
        lambda m: (ember.tril(m), ember.triu(m, 1), m.tril(-1)),
        (M,),
        torch_fn=lambda m: (torch().tril(m), torch().triu(m, 1), m.tril(-1)),
    ),
]

IMG = r.standard_normal((1, 2, 4, 5))
for mode in ("constant", "reflect", "replicate", "circular"):
    for pads in ((1, 2), (2, 1, 1, 3)):
        # PyTorch pads one dimension in non-constant modes only for 2-D or 3-D inputs
        image = IMG[0] if len(pads) == 2 else IMG
        SAMPLES.append(
            Sample(
                f"pad/{mode}/{pads}",
                lambda x, p=pads, m=mode: ember.nn.functional.pad(x, p, m),
                (image,),
                torch_fn=lambda x, p=pads, m=mode: F().pad(x, p, m),
            )
        )
SAMPLES.append(
    Sample(
        "pad/constant-value",
        lambda x: ember.nn.functional.pad(x, (1, 1), value=2.5),
        (IMG,),
        torch_fn=lambda x: F().pad(x, (1, 1), value=2.5),
    )
)


def _pad_vjp(lib, x, gy, pads, mode):
    """The gradient of pad(x) against cotangent gy, kept differentiable (tests pad_backward)."""
    with lib.enable_grad():  # finite differences call this under no_grad
        x = x.detach().requires_grad_()
        out = lib.nn.functional.pad(x, pads, mode)
        return lib.autograd.grad(out, x, gy, create_graph=True)[0]


for mode in ("reflect", "replicate", "circular"):
    pads = (2, 1, 1, 3)
    SAMPLES.append(
        Sample(
            f"pad_backward/{mode}",
            lambda x, gy, p=pads, m=mode: _pad_vjp(ember, x, gy, p, m),
            (IMG, r.standard_normal((1, 2, 8, 8))),
            torch_fn=lambda x, gy, p=pads, m=mode: _pad_vjp(torch(), x, gy, p, m),
            nondiff=(0,),
        )
    )

SAMPLES += [
    Sample(
        "creation",
        lambda a: (
            ember.zeros(2, 3) + a,
            ember.ones((2, 3)),
            ember.full((2,), 7),
            ember.zeros_like(a),
            ember.full_like(a, 3.0),
        ),
        (r.standard_normal((2, 3)),),
        grad=False,
        torch_fn=lambda a: (
            torch().zeros(2, 3, dtype=a.dtype) + a,
            torch().ones((2, 3)),
            torch().full((2,), 7),
            torch().zeros_like(a),
            torch().full_like(a, 3.0),
        ),
    ),
    Sample(
        "arange/linspace/eye",
        lambda: (
            ember.arange(5),
            ember.arange(1, 2, 0.25),
            ember.linspace(0, 1, 5),
            ember.eye(3, 4),
        ),
        (),
        grad=False,
        torch_fn=lambda: (
            torch().arange(5),
            torch().arange(1, 2, 0.25),
            torch().linspace(0, 1, 5),
            torch().eye(3, 4),
        ),
    ),
    Sample(
        "view_dtype",
        lambda a: (a.view(ember.int64), a.float().view(ember.float16), a.view(ember.uint8)),
        (A,),
        grad=False,
        float32=False,
        torch_fn=lambda a: (
            a.view(torch().int64),
            a.float().view(torch().float16),
            a.view(torch().uint8),
        ),
    ),
]
