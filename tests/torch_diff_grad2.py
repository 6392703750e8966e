"""Second derivatives against PyTorch: random programs of smooth float64 ops (every value
keeps the program's one shape, so any two combine), differentiated once with
``autograd.grad(create_graph=True)`` and the weighted first derivatives differentiated again
with ``backward()``; values, first and second derivatives compared.

``python -m tests.torch_diff_grad2 LO HI`` runs seeds LO..HI-1 and prints each divergence."""

from __future__ import annotations

import random
import sys
import traceback
import warnings

import numpy as np
import torch

import ember
from tests.torch_diff_fuzzing import compare

UNARY = {
    "exp": lambda T, x: (x * 0.5).exp(),
    "sin": lambda T, x: T.sin(x),
    "tanh": lambda T, x: x.tanh(),
    "sigmoid": lambda T, x: T.sigmoid(x),
    "cube": lambda T, x: x**3,
    "softplus": lambda T, x: T.nn.functional.softplus(x),
    "gelu": lambda T, x: T.nn.functional.gelu(x),
    "gelu_tanh": lambda T, x: T.nn.functional.gelu(x, approximate="tanh"),
    "silu": lambda T, x: T.nn.functional.silu(x),
    "mish": lambda T, x: T.nn.functional.mish(x),
    "elu": lambda T, x: T.nn.functional.elu(x + 3),
    "erf": lambda T, x: T.erf(x),
    "smooth_sqrt": lambda T, x: T.sqrt(x * x + 1),
    "log_cosh": lambda T, x: T.log(T.cosh(x)),
    "recip": lambda T, x: 1 / (x * x + 1),
    "atan": lambda T, x: T.atan(x),
    "log_softmax": lambda T, x: T.log_softmax(x, -1),
    "softmax": lambda T, x: T.softmax(x, 0),
    "logsumexp": lambda T, x: T.logsumexp(x, -1, keepdim=True).expand_as(x),
    "var": lambda T, x: x.var(-1, keepdim=True).expand_as(x) + x,
    "std": lambda T, x: (x.std(0, keepdim=True) + 1).expand_as(x) * x,
    "norm": lambda T, x: (x * x + 1).norm(dim=-1, keepdim=True) * x,
    "layer_norm": lambda T, x: T.nn.functional.layer_norm(x, x.shape[-1:]),
    "cumsum": lambda T, x: x.cumsum(-1),
    "cumprod": lambda T, x: (x * 0.3 + 1).cumprod(0),
    "prod": lambda T, x: (x * 0.3 + 1).prod(-1, keepdim=True) * x,
    "logcumsumexp": lambda T, x: T.logcumsumexp(x, -1),
    "transpose_mm": lambda T, x: x @ x.mT @ x,
    "flip_cat": lambda T, x: T.cat([x[:, :1] * 2, x.flip(1)[:, 1:]], 1),
    "roll": lambda T, x: T.roll(x, 1, 0) * x,
    "mean": lambda T, x: x - x.mean(0, keepdim=True),
    "amax": lambda T, x: x * x.amax(-1, keepdim=True),
    "normalize": lambda T, x: T.nn.functional.normalize(x + 3, dim=-1),
    "pow_frac": lambda T, x: (x * x + 1) ** 1.5,
    "sinh": lambda T, x: T.sinh(x * 0.5),
    "log1p": lambda T, x: T.log1p(x * x),
    "hardswish_free": lambda T, x: x * T.sigmoid(x * 1.7),
    "cosine": lambda T, x: (
        T.nn.functional.cosine_similarity(x + 2, x * x + 1, dim=-1).unsqueeze(-1).expand_as(x)
    ),
}

F_LAYERS = {
    "conv1d": lambda T, x: (
        T.nn.functional.conv1d(
            x.unsqueeze(0), T.ones(x.shape[0], x.shape[0], 2, dtype=x.dtype) * 0.3, padding=1
        )[0, :, : x.shape[1]]
        ** 2
    ),
    "avg_pool": lambda T, x: T.nn.functional.avg_pool1d(
        (x * x).unsqueeze(0), 2, 1, padding=1, count_include_pad=False
    )[0, :, : x.shape[1]],
    "max_pool": lambda T, x: T.nn.functional.max_pool1d((x**3).unsqueeze(0), 2, 1, 1)[0][
        :, : x.shape[1]
    ],
    "group_norm": lambda T, x: T.nn.functional.group_norm(x.unsqueeze(0), 1)[0] * x,
    "batch_norm": lambda T, x: T.nn.functional.batch_norm(x, None, None, training=True) * x,
    "instance_norm": lambda T, x: T.nn.functional.instance_norm(x.unsqueeze(0))[0] ** 2,
    "cross_entropy": lambda T, x: (
        T.nn.functional.cross_entropy(x, T.arange(x.shape[0]) % x.shape[1], label_smoothing=0.1) * x
    ),
    "interpolate": lambda T, x: T.nn.functional.interpolate(
        (x * x).unsqueeze(0), scale_factor=2, mode="linear"
    )[0, :, ::2],
    "pad_reflect": lambda T, x: (
        T.nn.functional.pad((x**3).unsqueeze(0), (1, 1), "reflect")[0, :, 1:-1] + x
    ),
    "elu_sq": lambda T, x: T.nn.functional.elu(x) ** 2,
    "celu": lambda T, x: T.nn.functional.celu(x, 0.7) * x,
    "selu": lambda T, x: T.nn.functional.selu(x) * x,
    "softsign": lambda T, x: T.nn.functional.softsign(x) * x,
    "logsigmoid": lambda T, x: T.nn.functional.logsigmoid(x) * x,
    "glu": lambda T, x: T.nn.functional.glu(T.cat([x, x * 2], -1), -1) ** 2,
}
UNARY.update(F_LAYERS)

BINARY = {
    "add": lambda T, a, b: a + b,
    "mul": lambda T, a, b: a * b,
    "div": lambda T, a, b: a / (b * b + 1),
    "sub_alpha": lambda T, a, b: T.sub(a, b, alpha=2),
    "atan2": lambda T, a, b: T.atan2(a, b * b + 1),
    "hypot": lambda T, a, b: T.hypot(a + 2, b + 2),
    "lerp": lambda T, a, b: T.lerp(a, b, T.sigmoid(a)),
    "addcmul": lambda T, a, b: T.addcmul(a, a, b, value=0.5),
    "addcdiv": lambda T, a, b: T.addcdiv(a, b, a * a + 1, value=2),
    "pow": lambda T, a, b: (a * a + 1) ** (b * 0.5),
    "matmul": lambda T, a, b: a @ b.mT @ a,
    "mse": lambda T, a, b: T.nn.functional.mse_loss(a, b) * a,
    "huber": lambda T, a, b: T.nn.functional.huber_loss(a, b * 0.1, delta=5.0) * b,
    "kl": lambda T, a, b: (
        T.nn.functional.kl_div(T.log_softmax(a, -1), T.softmax(b, -1), reduction="batchmean") * a
    ),
    "where": lambda T, a, b: T.where(T.arange(a.shape[-1]) % 2 == 0, a * b, a + b),
    "stack_sum": lambda T, a, b: T.stack([a, b * a]).sum(0),
    "maximum": lambda T, a, b: T.maximum(a, b + 0.25),
    "linear": lambda T, a, b: T.nn.functional.linear(a, b.mT @ b, b[0] if b.dim() else None),
    "bce_logits": lambda T, a, b: T.nn.functional.binary_cross_entropy_with_logits(
        a, T.sigmoid(b), reduction="none"
    ),
}


def check_grad2(seed: int) -> list[str]:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return _check(seed)


def _check(seed: int) -> list[str]:
    rng = random.Random(seed)
    shape = (rng.randint(2, 3), rng.randint(2, 4))
    g = np.random.default_rng(seed)
    arrays = [g.standard_normal(shape) for _ in range(rng.randint(1, 2))]
    log = []
    plan = []
    for _ in range(rng.randint(2, 6)):
        if rng.random() < 0.6:
            name = rng.choice(sorted(UNARY))
            plan.append((name, rng.randrange(100), None))
        else:
            name = rng.choice(sorted(BINARY))
            plan.append((name, rng.randrange(100), rng.randrange(100)))
        log.append(name)
    results = []
    for T in (torch, ember):
        xs = [T.tensor(a, requires_grad=True) for a in arrays]
        pool = list(xs)
        try:
            for name, i, j in plan:
                a = pool[i % len(pool)]
                if j is None:
                    pool.append(UNARY[name](T, a))
                else:
                    pool.append(BINARY[name](T, a, pool[j % len(pool)]))
            w = T.tensor(np.cos(np.arange(np.prod(shape))).reshape(shape))
            loss = sum((p * w).sum() for p in pool[len(xs) :])
            firsts = T.autograd.grad(loss, xs, create_graph=True)
            v = T.tensor(np.sin(np.arange(np.prod(shape)) + 1).reshape(shape))
            sum((f * v).sum() for f in firsts).backward()
        except Exception as exc:  # noqa: BLE001 - compared by type below
            results.append(exc)
            continue
        results.append((loss, firsts, [x.grad for x in xs]))
    t, e = results
    where = f"seed {seed} grad2 {shape} " + " ; ".join(log)
    if isinstance(t, Exception) or isinstance(e, Exception):
        if isinstance(t, Exception) and isinstance(e, type(t)):
            return []
        tb = "".join(traceback.format_exception(e, limit=-3)) if isinstance(e, Exception) else ""
        return [f"{where}: torch {t!r}, ember {e!r}\n{tb}"]
    problems = []
    for label, a, b in (
        ("loss", [t[0]], [e[0]]),
        ("first derivative", t[1], e[1]),
        ("second derivative", t[2], e[2]),
    ):
        for k, (x, y) in enumerate(zip(a, b)):
            if x is None or y is None:
                if (x is None) != (y is None):
                    problems.append(f"{where}: {label} of x{k}: torch {x}, ember {y}")
                continue
            diff = compare(x.detach(), y.detach(), f"{where}: {label} of x{k}")
            if diff:
                problems.append(diff)
    return problems


if __name__ == "__main__":
    lo, hi = int(sys.argv[1]), int(sys.argv[2])
    found = []
    for s in range(lo, hi):
        try:
            found.extend(check_grad2(s))
        except Exception as exc:  # noqa: BLE001
            found.append(f"seed {s}: harness {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    for f in found:
        print(f, "\n")
    print(f"{len(found)} divergences in {hi - lo} programs")
