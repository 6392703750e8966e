"""Training-step time of ember (eager and ``ember.function``) against PyTorch and JAX, same run.

Cases (float32, all from the same initial weights and data):
* mlp: batch 128, 784-512-512-10, ReLU, cross-entropy, SGD (lr 0.01)
* cnn: batch 64, 1x28x28, conv3x3 32 - ReLU - maxpool2 - conv3x3 64 - ReLU - maxpool2 - fc 128 -
  ReLU - fc 10, cross-entropy, SGD (lr 0.01, momentum 0.9)
* gpt: one pre-LayerNorm GPT block, batch 8, seq 128, d_model 256, 4 heads, MLP 1024 with exact
  GELU: x = x + proj(causal_attention(qkv(ln1(x)))); x = x + fc2(gelu(fc1(ln2(x)))); loss = mean
  of squares of the output, AdamW (lr 1e-3, weight decay 0.01). The block's source is written
  once (``ember.models.gpt_block_class``) and instantiated over ember.nn and over torch.nn.

Columns, measured interleaved in the same run (each round re-warms every side; medians):
* ember: the eager step (zero_grad, forward, loss.backward(), opt.step()).
* ember fn: the same step function wrapped in ``ember.function``. While that feature is missing or
  fails, the column shows ``-`` and a line under the row gives the reason.
* torch: PyTorch eager, the same step.
* compile: PyTorch with ``torch.compile`` applied to the forward + loss (AOTAutograd compiles its
  backward too) and, separately, to ``opt.step``; ``loss.backward()`` between them stays a graph
  break, so the whole step is compiled in two pieces. Skipped with the reason if compiling fails.
* jax jit: a pure-JAX twin of the model, loss and optimizer update (``jax.value_and_grad`` inside
  one ``jax.jit``). Skipped with install instructions when JAX is not installed.

Ratios: ember / torch, and ember fn / torch, / compile, / jax jit (below 1: ember is faster).
Before timing, the script checks that every side's first-step loss agrees with ember eager's (so
all sides do the same work), and that ``ember.function`` reproduces three eager steps on a
separately built, identically initialized model. First-call (trace/compile) times are printed
under each row.

    pip install -e '.[bench]'      # torch and jax[cpu]
    python benchmarks/train_step.py [--cases mlp,cnn,gpt] [--steps 50] [--warmup 3] [--rounds 5]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import ember
from ember import models, nn

CASES = ("mlp", "cnn", "gpt")
SIDES = ("ember", "ember fn", "torch", "compile", "jax jit")


@dataclass
class Case:
    name: str
    build: Callable[[], nn.Module]  # the ember model; called after ember.manual_seed(0)
    x: np.ndarray
    y: np.ndarray | None  # class labels for cross-entropy; None: loss = mean(out ** 2)
    optimizer: str  # "sgd" or "adamw"
    momentum: float = 0.0


def _cases(names: list[str]):
    rng = np.random.default_rng(0)
    made = {
        "mlp": lambda: Case(
            "mlp",
            lambda: models.mlp(784, 512, 10),
            rng.standard_normal((128, 784)).astype(np.float32),
            rng.integers(0, 10, 128),
            "sgd",
        ),
        "cnn": lambda: Case(
            "cnn",
            lambda: models.cnn(1, 28, 10),
            rng.standard_normal((64, 1, 28, 28)).astype(np.float32),
            rng.integers(0, 10, 64),
            "sgd",
            0.9,
        ),
        "gpt": lambda: Case(
            "gpt",
            lambda: models.GPTBlock(),
            rng.standard_normal((8, 128, 256)).astype(np.float32),
            None,
            "adamw",
        ),
    }
    for name in names:
        yield made[name]()


# ----------------------------------------------------------------------------- ember


def _ember_step(case: Case, model):
    if case.optimizer == "adamw":
        opt = ember.optim.AdamW(model.parameters(), lr=1e-3)
    else:
        opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=case.momentum)
    xs = ember.tensor(case.x, dtype=ember.float32)
    ys = None if case.y is None else ember.tensor(case.y)

    def step():
        opt.zero_grad()
        out = model(xs)
        loss = (out * out).mean() if ys is None else nn.functional.cross_entropy(out, ys)
        loss.backward()
        opt.step()
        return loss

    return step


def _ember_function_step(case: Case):
    """``ember.function`` of the eager step, on its own identically initialized model."""
    ember.manual_seed(0)
    return ember.function(_ember_step(case, case.build()))


# ----------------------------------------------------------------------------- torch


def _torch_model(case: Case, ember_model, weights: dict):
    import torch

    if case.name == "gpt":
        model = models.gpt_block_class(torch.nn, torch.nn.functional)()
    else:
        layers = []
        for layer in ember_model:
            kind = type(layer).__name__
            if kind == "Linear":
                layers.append(torch.nn.Linear(layer.in_features, layer.out_features))
            elif kind == "Conv2d":
                layers.append(
                    torch.nn.Conv2d(
                        layer.in_channels,
                        layer.out_channels,
                        layer.kernel_size,
                        padding=layer.padding,
                    )
                )
            elif kind == "MaxPool2d":
                layers.append(torch.nn.MaxPool2d(layer.kernel_size))
            elif kind == "ReLU":
                layers.append(torch.nn.ReLU())
            elif kind == "Flatten":
                layers.append(torch.nn.Flatten())
            else:
                raise TypeError(f"{case.name}: no PyTorch twin for {kind}")
        model = torch.nn.Sequential(*layers)
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in weights.items()})
    return model


def torch_step(forward_loss, opt, compiled: bool):
    """A PyTorch training step (zero_grad, ``forward_loss()``, backward, ``opt.step()``),
    with the loss and the optimizer step under ``torch.compile`` when ``compiled``."""
    import torch

    opt_step = opt.step
    if compiled:
        # opt.step's profiler hook: dynamo warns that it skips it; harmless, and it splits the table
        logging.getLogger("torch._dynamo.variables.ctx_manager").setLevel(logging.ERROR)
        forward_loss = torch.compile(forward_loss)
        opt_step = torch.compile(opt.step)

    def step():
        opt.zero_grad()
        loss = forward_loss()
        loss.backward()
        opt_step()
        return loss

    return step


def _torch_step(case: Case, model, compiled: bool = False):
    import torch

    if case.optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=case.momentum)
    xs = torch.from_numpy(case.x)
    ys = None if case.y is None else torch.from_numpy(case.y)

    def forward_loss():
        out = model(xs)
        return (out * out).mean() if ys is None else torch.nn.functional.cross_entropy(out, ys)

    return torch_step(forward_loss, opt, compiled)


# ----------------------------------------------------------------------------- jax


def _pair(value) -> tuple[int, int]:
    return tuple(value) if isinstance(value, tuple | list) else (value, value)


def _jax_forward(case: Case, ember_model):
    """``forward(params, x)`` in JAX, params keyed like the ember state_dict."""
    import jax
    import jax.numpy as jnp

    def layer_norm(p, prefix, x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * p[f"{prefix}.weight"] + p[f"{prefix}.bias"]

    def linear(p, prefix, x):
        return x @ p[f"{prefix}.weight"].T + p[f"{prefix}.bias"]

    if case.name == "gpt":
        heads = ember_model.heads

        def forward(p, x):
            b, t, d = x.shape
            qkv = linear(p, "qkv", layer_norm(p, "ln1", x)).reshape(b, t, 3, heads, d // heads)
            q, k, v = qkv.transpose(2, 0, 3, 1, 4)
            scores = q @ k.swapaxes(-1, -2) / np.sqrt(d // heads)
            causal = jnp.tril(jnp.ones((t, t), dtype=bool))
            att = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1) @ v
            x = x + linear(p, "proj", att.transpose(0, 2, 1, 3).reshape(b, t, d))
            hid = jax.nn.gelu(linear(p, "fc1", layer_norm(p, "ln2", x)), approximate=False)
            return x + linear(p, "fc2", hid)

        return forward

    layers = []
    for index, layer in enumerate(ember_model):
        kind = type(layer).__name__
        if kind == "Linear":
            layers.append(lambda p, x, i=index: linear(p, str(i), x))
        elif kind == "Conv2d":
            pad = [(n, n) for n in _pair(layer.padding)]

            def conv(p, x, i=index, pad=pad):
                y = jax.lax.conv_general_dilated(
                    x, p[f"{i}.weight"], (1, 1), pad, dimension_numbers=("NCHW", "OIHW", "NCHW")
                )
                return y + p[f"{i}.bias"][None, :, None, None]

            layers.append(conv)
        elif kind == "MaxPool2d":
            window = (1, 1, *_pair(layer.kernel_size))
            layers.append(
                lambda p, x, w=window: jax.lax.reduce_window(
                    x, -jnp.inf, jax.lax.max, w, w, "VALID"
                )
            )
        elif kind == "ReLU":
            layers.append(lambda p, x: jax.nn.relu(x))
        elif kind == "Flatten":
            layers.append(lambda p, x: x.reshape(x.shape[0], -1))
        else:
            raise TypeError(f"{case.name}: no JAX twin for {kind}")

    def forward(p, x):
        for apply in layers:
            x = apply(p, x)
        return x

    return forward


def _jax_step(case: Case, ember_model, weights: dict):
    import jax
    import jax.numpy as jnp

    forward = _jax_forward(case, ember_model)

    def loss_fn(p, x, y):
        out = forward(p, x)
        if y is None:
            return (out * out).mean()
        picked = jnp.take_along_axis(out, y[:, None], axis=1)[:, 0]
        return (jax.nn.logsumexp(out, axis=1) - picked).mean()

    def sgd(p, g, state):  # PyTorch's SGD: buf = momentum * buf + g (buf = g at first)
        if case.momentum:
            state = jax.tree.map(lambda b, gi: case.momentum * b + gi, state, g)
            g = state
        return jax.tree.map(lambda pi, gi: pi - 0.01 * gi, p, g), state

    def adamw(p, g, state, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, wd=0.01):  # PyTorch's AdamW
        m, v, t = state
        t = t + 1
        m = jax.tree.map(lambda mi, gi: b1 * mi + (1 - b1) * gi, m, g)
        v = jax.tree.map(lambda vi, gi: b2 * vi + (1 - b2) * gi * gi, v, g)
        c1, c2 = 1 - b1**t, 1 - b2**t

        def update(pi, mi, vi):
            return pi * (1 - lr * wd) - lr * (mi / c1) / (jnp.sqrt(vi / c2) + eps)

        return jax.tree.map(update, p, m, v), (m, v, t)

    @jax.jit
    def update(p, state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
        p, state = (adamw if case.optimizer == "adamw" else sgd)(p, grads, state)
        return p, state, loss

    params = {k: jnp.asarray(v) for k, v in weights.items()}
    zeros = jax.tree.map(jnp.zeros_like, params)
    if case.optimizer == "adamw":
        state = (zeros, jax.tree.map(jnp.zeros_like, params), jnp.zeros((), jnp.float32))
    else:
        state = zeros
    x = jnp.asarray(case.x)
    y = None if case.y is None else jnp.asarray(case.y.astype(np.int32))
    held = {"params": params, "state": state}

    def step():
        held["params"], held["state"], loss = update(held["params"], held["state"], x, y)
        return loss.block_until_ready()

    return step


# ----------------------------------------------------------------------------- timing


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:160]


def _loss(value) -> float:
    return float(value.item() if hasattr(value, "item") else value)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-4 * max(1.0, abs(b))


def _blas_core() -> str:
    """Which OpenBLAS kernels NumPy's matmuls (and so ember's) run: ``OPENBLAS_CORETYPE`` can
    pin older ones than the CPU has (Haswell's AVX2 on an AVX-512 machine measured 1.7x slower
    on the MLP's first matmul), while PyTorch's oneDNN and XLA pick their own."""
    import ctypes

    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line}
        for path in sorted(paths):
            lib = ctypes.CDLL(path)
            for name in ("scipy_openblas_get_corename64_", "openblas_get_corename"):
                if hasattr(lib, name):
                    fn = getattr(lib, name)
                    fn.restype = ctypes.c_char_p
                    pinned = os.environ.get("OPENBLAS_CORETYPE")
                    where = f", pinned by OPENBLAS_CORETYPE={pinned}" if pinned else ""
                    return f"OpenBLAS {fn().decode()} kernels{where}"
    except OSError:
        pass
    return "BLAS kernels unknown"


def _time_interleaved(
    sides: dict, steps: int, warmup: int, rounds: int, notes: dict, settle: float = 0.3
) -> dict:
    """Median step time of each side, alternating between them in ``rounds`` rounds.

    Alternating (each round warms up again) spreads the shared machine's noise over all sides.
    Before each side's round the process sleeps ``settle`` seconds: worker threads of the side
    that ran before keep spinning for a while after their last task (OpenBLAS's, which NumPy
    and so ember use, for about 0.1 s), and would take the cores from the next side (PyTorch's
    MLP step measured 6.5 ms right after ember's round, 2.3 ms after a pause). A side that
    raises is dropped with a note.
    """
    times = {name: [] for name in sides}
    live = dict(sides)
    per_round = max(1, steps // rounds)
    for _ in range(rounds):
        for name, step in list(live.items()):
            time.sleep(settle)
            try:
                for _ in range(warmup):
                    step()
                for _ in range(per_round):
                    start = time.perf_counter()
                    step()
                    times[name].append(time.perf_counter() - start)
            except Exception as exc:
                notes[name] = f"unavailable (failed while timing: {_reason(exc)})"
                del live[name], times[name]
    return {name: statistics.median(t) for name, t in times.items()}


def _build_sides(case: Case, torch, jax, notes: dict, first_call: dict) -> dict:
    """Every side's step function, each checked against ember eager's first-step loss."""
    ember.manual_seed(0)
    model = case.build()
    weights = {k: v.numpy().copy() for k, v in model.state_dict().items()}  # before any step
    eager = _ember_step(case, model)
    reference = _loss(eager())
    sides = {"ember": eager}

    def add(name, build, lockstep: bool = False):
        try:
            start = time.perf_counter()
            step = build()
            first = _loss(step())
            first_call[name] = time.perf_counter() - start
        except Exception as exc:
            notes[name] = f"unavailable ({_reason(exc)})"
            return
        losses = [(1, first, reference)]
        if lockstep:  # calling it N times must equal N eager steps
            losses += [(n, _loss(step()), _loss(eager())) for n in (2, 3)]
        for n, got, want in losses:
            if not _close(got, want):
                message = f"step {n} loss {got} != ember eager's {want}; not the same work"
                if name == "ember fn":  # ember's own feature under test: report, keep going
                    notes[name] = f"WRONG, not timed ({message})"
                    return
                raise SystemExit(f"{case.name}: {name} {message}")  # a bug in this script
        sides[name] = step

    add("ember fn", lambda: _ember_function_step(case), lockstep=True)
    if torch is not None:
        add("torch", lambda: _torch_step(case, _torch_model(case, model, weights)))
        add("compile", lambda: _torch_step(case, _torch_model(case, model, weights), compiled=True))
    if jax is not None:
        add("jax jit", lambda: _jax_step(case, model, weights))
    return sides


def _ratio(medians: dict, num: str, den: str) -> str:
    if num in medians and den in medians:
        return f"{medians[num] / medians[den]:.2f}"
    return "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated: mlp,cnn,gpt")
    parser.add_argument("--steps", type=int, default=50, help="timed steps per side")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before each round")
    parser.add_argument("--rounds", type=int, default=5, help="alternations between the sides")
    parser.add_argument(
        "--settle", type=float, default=0.3, help="seconds of pause before each side's round"
    )
    args = parser.parse_args()
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")

    versions = [f"ember {ember.__version__}", f"numpy {np.__version__} ({_blas_core()})"]
    try:
        import torch

        versions.append(f"torch {torch.__version__} ({torch.get_num_threads()} threads)")
    except ImportError:
        torch = None
        print("PyTorch is not installed: no torch columns (pip install torch==2.13.0)")
    try:
        import jax

        versions.append(f"jax {jax.__version__} ({jax.default_backend()})")
    except ImportError:
        jax = None
        print("JAX is not installed: no jax column (pip install 'jax[cpu]', or -e '.[bench]')")
    print(", ".join(versions))
    print(f"median ms per training step; steps {args.steps}, rounds {args.rounds}")

    ms_cols = "".join(f"{s:>9}" for s in SIDES)
    ratio_cols = "".join(f"{s:>11}" for s in ("ember/torch", "fn/torch", "fn/compile", "fn/jax"))
    print(f"{'case':5}{ms_cols} |{ratio_cols}")
    for case in _cases(names):
        notes: dict[str, str] = {}
        first_call: dict[str, float] = {}
        sides = _build_sides(case, torch, jax, notes, first_call)
        medians = _time_interleaved(sides, args.steps, args.warmup, args.rounds, notes, args.settle)
        ms = "".join(f"{medians[s] * 1e3:9.2f}" if s in medians else f"{'-':>9}" for s in SIDES)
        ratios = "".join(
            f"{_ratio(medians, a, b):>11}"
            for a, b in (
                ("ember", "torch"),
                ("ember fn", "torch"),
                ("ember fn", "compile"),
                ("ember fn", "jax jit"),
            )
        )
        print(f"{case.name:5}{ms} |{ratios}", flush=True)
        for side in SIDES:
            if side in notes:
                print(f"      {side}: {notes[side]}")
        if first_call:
            calls = ", ".join(f"{k} {v:.2f} s" for k, v in first_call.items())
            print(f"      first call (trace/compile + 1 step): {calls}", flush=True)


if __name__ == "__main__":
    main()
