"""Eager overhead against PyTorch eager: per-op dispatch, composite ops, optimizer steps and
whole training steps, measured interleaved in one process (medians of rounds).

Groups (``--groups``, comma-separated):
* ``dispatch``: one small op (add, add with alpha=, mul, matmul, relu, sum, reshape,
  indexing) on 8x8 float32 tensors, forward only and forward + backward
  (``sum().backward()``): the per-call cost of deciding what to run, wrapping the result and
  recording the tape.
* ``composite``: layer_norm, gelu (erf and tanh), softmax, log_softmax, cross_entropy, dropout
  and causal scaled_dot_product_attention on the GPT block's shapes (batch 8 x 128 tokens x
  256 features, MLP 1024, 4 heads, vocabulary 1000), forward + backward; layer_norm and
  softmax on the ViT's shapes, cross_entropy on the MLP's and the U-Net's.
* ``optim``: one step of SGD (momentum 0.9), Adam and AdamW over the GPT block's parameters.
* ``modules``: 40-odd ``nn`` modules (norms, convolutions, pooling, resampling, activations,
  recurrent layers, attention, padding, distances, losses) on inputs of a few thousand values
  (2x16x16x16 images, 32x64 features, 8x4x32 sequences), inference without gradients: where
  the arithmetic is small, what each module's Python and its ops' dispatch cost.
* ``step``: the training steps of the GPT block (models.GPTBlock) and of
  nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, dropout 0.1), loss mean(out ** 2),
  AdamW: zero_grad, forward, backward, optimizer step.

Each row prints ember's and PyTorch's microseconds per call and their ratio (below 1: ember is
faster), with the CPU model in the header. Before timing, each case's results are checked
against PyTorch's on the same inputs (values and gradients), so both sides do the same work.

* ``small`` (not run unless named): benchmarks/eager_small.py's small ops (reductions along
  a dim, in-place updates, selections, views, copies, ``.item()``) at 1, 100 and 10,000
  elements, without and with ``requires_grad``.

``--cases`` keeps the cases whose name contains one of its comma-separated words
(``--groups small --cases "n=100"``). ``--clock process`` (the default with ``--threads 1``)
times the process's CPU time and keeps each side's best round; ``--clock wall`` the median.

    python benchmarks/eager_ops.py [--groups dispatch,composite,optim,modules,step,small]
                                   [--cases add,n=100] [--rounds 7] [--threads 1]
                                   [--clock process|wall]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from eager_small import small_cases
from zoo import CLOCKS, cpu_header, default_clock

import ember
from ember import models
from ember.kernels import cpool

F = ember.nn.functional


def _time(fn, calls: int, clock=time.perf_counter) -> float:
    start = clock()
    for _ in range(calls):
        fn()
    return (clock() - start) / calls


def _interleaved(pairs: dict, rounds: int, budget_s: float, clock: str = "wall"):
    """name -> (ember us, torch us) over ``rounds`` alternations (each side called enough
    times per round to take about ``budget_s``), by the ``clock``'s statistic; yielded as
    each case is timed."""
    read, pick = CLOCKS[clock]
    for name, (e, t) in pairs.items():
        e(), t()  # warm
        per = _time(e, 10, time.perf_counter)
        calls = max(1, int(budget_s / max(per, 1e-7)))
        es, ts = [], []
        for _ in range(rounds):
            es.append(_time(e, calls, read))
            ts.append(_time(t, calls, read))
        yield name, (pick(es) * 1e6, pick(ts) * 1e6)


def _pair_tensors(arrays, grad: bool):
    import torch

    es = [ember.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    ts = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    return es, ts


def _check(name, e_out, t_out, es, ts, rtol=2e-4, atol=2e-5):
    np.testing.assert_allclose(
        e_out.detach().numpy(), t_out.detach().numpy(), rtol=rtol, atol=atol, err_msg=name
    )
    for i, (e, t) in enumerate(zip(es, ts)):
        if t.grad is not None:
            np.testing.assert_allclose(
                e.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol, err_msg=f"{name} grad {i}"
            )


def _case(name, ember_fn, torch_fn, arrays, backward: bool):
    """(ember call, torch call) running the function (and its backward) once each."""
    es, ts = _pair_tensors(arrays, backward)

    def run(fn, xs):
        for x in xs:
            x.grad = None
        out = fn(*xs)
        if backward:
            out.sum().backward() if out.ndim else out.backward()
        return out

    _check(name, run(ember_fn, es), run(torch_fn, ts), es, ts)
    return (lambda: run(ember_fn, es)), (lambda: run(torch_fn, ts))


def dispatch_cases():
    import torch

    r = np.random.default_rng(0)
    a = r.standard_normal((8, 8)).astype(np.float32)
    b = r.standard_normal((8, 8)).astype(np.float32)
    ops = {
        "add": (lambda x, y: x + y, lambda x, y: x + y),
        "add alpha": (
            lambda x, y: ember.add(x, y, alpha=0.5),
            lambda x, y: torch.add(x, y, alpha=0.5),
        ),
        "mul": (lambda x, y: x * y, lambda x, y: x * y),
        "matmul": (lambda x, y: x @ y, lambda x, y: x @ y),
        "relu": (lambda x, y: F.relu(x), lambda x, y: torch.relu(x)),
        "sum": (lambda x, y: x.sum(), lambda x, y: x.sum()),
        "reshape": (lambda x, y: x.reshape(4, 16), lambda x, y: x.reshape(4, 16)),
        "index": (lambda x, y: x[2:6, 1], lambda x, y: x[2:6, 1]),
    }
    cases = {}
    for name, (e, t) in ops.items():
        cases[f"{name} fwd"] = _case(name, e, t, (a, b), backward=False)
        cases[f"{name} fwd+bwd"] = _case(name, e, t, (a, b), backward=True)
    return cases


def composite_cases():
    import torch

    tf = torch.nn.functional
    r = np.random.default_rng(1)
    x = r.standard_normal((8, 128, 256)).astype(np.float32)
    h = r.standard_normal((8, 128, 1024)).astype(np.float32)
    w = r.standard_normal(256).astype(np.float32)
    b = r.standard_normal(256).astype(np.float32)
    s = r.standard_normal((8, 4, 128, 128)).astype(np.float32)
    logits = r.standard_normal((8 * 128, 1000)).astype(np.float32)
    labels = r.integers(0, 1000, 8 * 128)
    q, k, v = (r.standard_normal((8, 4, 128, 64)).astype(np.float32) for _ in range(3))
    cases = {
        "layer_norm": _case(
            "layer_norm",
            lambda x, w, b: F.layer_norm(x, (256,), w, b),
            lambda x, w, b: tf.layer_norm(x, (256,), w, b),
            (x, w, b),
            True,
        ),
        "gelu": _case("gelu", F.gelu, tf.gelu, (h,), True),
        "gelu tanh": _case(
            "gelu tanh",
            lambda t: F.gelu(t, approximate="tanh"),
            lambda t: tf.gelu(t, approximate="tanh"),
            (h,),
            True,
        ),
        "softmax": _case(
            "softmax", lambda t: F.softmax(t, -1), lambda t: tf.softmax(t, -1), (s,), True
        ),
        "log_softmax": _case(
            "log_softmax",
            lambda t: F.log_softmax(t, -1),
            lambda t: tf.log_softmax(t, -1),
            (s,),
            True,
        ),
        "cross_entropy": _case(
            "cross_entropy", F.cross_entropy, tf.cross_entropy, (logits, labels), True
        ),
        "sdpa causal": _case(
            "sdpa causal",
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            lambda q, k, v: tf.scaled_dot_product_attention(q, k, v, is_causal=True),
            (q, k, v),
            True,
        ),
    }
    # the zoo's other shapes: ViT's rows of 128 features and its 65-token attention rows, the
    # MLP's (64, 10) logits, the U-Net's per-pixel (8, 5, 64, 64) logits
    xv = r.standard_normal((32, 65, 128)).astype(np.float32)
    wv, bv = (r.standard_normal(128).astype(np.float32) for _ in range(2))
    sv = r.standard_normal((32, 4, 65, 65)).astype(np.float32)
    cases["layer_norm vit"] = _case(
        "layer_norm vit",
        lambda x, w, b: F.layer_norm(x, (128,), w, b),
        lambda x, w, b: tf.layer_norm(x, (128,), w, b),
        (xv, wv, bv),
        True,
    )
    cases["softmax vit"] = _case(
        "softmax vit", lambda t: F.softmax(t, -1), lambda t: tf.softmax(t, -1), (sv,), True
    )
    small = r.standard_normal((64, 10)).astype(np.float32)
    cases["cross_entropy mlp"] = _case(
        "cross_entropy mlp",
        F.cross_entropy,
        tf.cross_entropy,
        (small, r.integers(0, 10, 64)),
        True,
    )
    pixels = r.standard_normal((8, 5, 64, 64)).astype(np.float32)
    cases["cross_entropy unet"] = _case(
        "cross_entropy unet",
        F.cross_entropy,
        tf.cross_entropy,
        (pixels, r.integers(0, 5, (8, 64, 64))),
        True,
    )
    # dropout draws different masks: timed without the value check
    es, ts = _pair_tensors((h,), True)

    def drop(fn, t):
        t.grad = None
        fn(t, 0.1, True).sum().backward()

    cases["dropout"] = (lambda: drop(F.dropout, es[0]), lambda: drop(tf.dropout, ts[0]))
    return cases


def _gpt_pair():
    import torch

    ember.manual_seed(0)
    model = models.GPTBlock()
    twin = models.gpt_block_class(torch.nn, torch.nn.functional)()
    twin.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()})
    return model, twin


def optim_cases():
    import torch

    cases = {}
    for name, make_e, make_t in (
        (
            "SGD momentum",
            lambda p: ember.optim.SGD(p, lr=0.01, momentum=0.9),
            lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
        ),
        ("Adam", lambda p: ember.optim.Adam(p), lambda p: torch.optim.Adam(p)),
        ("AdamW", lambda p: ember.optim.AdamW(p), lambda p: torch.optim.AdamW(p)),
    ):
        model, twin = _gpt_pair()
        r = np.random.default_rng(2)
        for p, tp in zip(model.parameters(), twin.parameters()):
            g = r.standard_normal(p.shape).astype(np.float32)
            p.grad, tp.grad = ember.tensor(g), torch.tensor(g)
        oe, ot = make_e(list(model.parameters())), make_t(list(twin.parameters()))
        oe.step(), ot.step()
        for p, tp in zip(model.parameters(), twin.parameters()):
            np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)
        cases[name] = (oe.step, ot.step)
    return cases


def _step(model, opt, x, torch_side: bool):
    def step():
        opt.zero_grad()
        out = model(x)
        (out * out).mean().backward()
        opt.step()

    return step


def step_cases():
    import torch

    x = np.random.default_rng(3).standard_normal((8, 128, 256)).astype(np.float32)
    model, twin = _gpt_pair()
    cases = {
        "GPT block": (
            _step(model, ember.optim.AdamW(model.parameters()), ember.tensor(x), False),
            _step(twin, torch.optim.AdamW(twin.parameters()), torch.tensor(x), True),
        )
    }
    ember.manual_seed(0)
    enc = ember.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
    tenc = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
    tenc.load_state_dict({k: torch.tensor(v.numpy()) for k, v in enc.state_dict().items()})
    cases["TransformerEncoderLayer"] = (
        _step(enc, ember.optim.AdamW(enc.parameters()), ember.tensor(x), False),
        _step(tenc, torch.optim.AdamW(tenc.parameters()), torch.tensor(x), True),
    )
    return cases


def _modules(lib) -> list:
    """(name, module of ``lib``, input arrays) for the ``modules`` group."""
    nn = lib.nn
    rng = np.random.default_rng(5)

    def t(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    image, features, seq = t(2, 16, 16, 16), t(32, 64), t(8, 4, 32)
    return [
        ("GroupNorm", nn.GroupNorm(4, 16), (image,)),
        ("InstanceNorm2d", nn.InstanceNorm2d(16), (image,)),
        ("BatchNorm2d", nn.BatchNorm2d(16), (image,)),
        ("LayerNorm", nn.LayerNorm(64), (features,)),
        ("Conv2d 3x3", nn.Conv2d(16, 16, 3, padding=1), (image,)),
        ("Conv2d stride 2", nn.Conv2d(16, 32, 3, stride=2, padding=1), (image,)),
        ("ConvTranspose2d", nn.ConvTranspose2d(16, 8, 2, stride=2), (image,)),
        ("Conv1d", nn.Conv1d(4, 8, 3, padding=1), (seq,)),
        ("MaxPool2d", nn.MaxPool2d(2), (image,)),
        ("AvgPool2d", nn.AvgPool2d(2), (image,)),
        ("AdaptiveAvgPool2d(1)", nn.AdaptiveAvgPool2d(1), (image,)),
        ("AdaptiveAvgPool2d(4)", nn.AdaptiveAvgPool2d(4), (image,)),
        ("Upsample nearest", nn.Upsample(scale_factor=2), (image,)),
        ("Upsample bilinear", nn.Upsample(scale_factor=2, mode="bilinear"), (image,)),
        ("PixelShuffle", nn.PixelShuffle(2), (image,)),
        ("ZeroPad2d", nn.ZeroPad2d(1), (image,)),
        ("ReflectionPad2d", nn.ReflectionPad2d(1), (image,)),
        ("GELU", nn.GELU(), (features,)),
        ("SiLU", nn.SiLU(), (features,)),
        ("Mish", nn.Mish(), (features,)),
        ("Softplus", nn.Softplus(), (features,)),
        ("ELU", nn.ELU(), (features,)),
        ("Hardswish", nn.Hardswish(), (features,)),
        ("LeakyReLU", nn.LeakyReLU(0.1), (features,)),
        ("Softmax", nn.Softmax(-1), (features,)),
        ("LogSoftmax", nn.LogSoftmax(-1), (features,)),
        ("Linear", nn.Linear(64, 64), (features,)),
        ("Bilinear", nn.Bilinear(64, 64, 8), (features, features)),
        ("Embedding", nn.Embedding(100, 32), (rng.integers(0, 100, (4, 16)),)),
        ("LSTM", nn.LSTM(32, 32), (seq,)),
        ("GRU", nn.GRU(32, 32), (seq,)),
        ("RNN", nn.RNN(32, 32), (seq,)),
        ("LSTMCell", nn.LSTMCell(32, 32), (seq[0],)),
        ("MultiheadAttention", nn.MultiheadAttention(32, 4), (seq, seq, seq)),
        ("TransformerEncoderLayer", nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0), (seq,)),
        ("Unfold", nn.Unfold(3), (image,)),
        ("CosineSimilarity", nn.CosineSimilarity(), (features, features[::-1].copy())),
        ("PairwiseDistance", nn.PairwiseDistance(), (features, features[::-1].copy())),
        ("CrossEntropyLoss", nn.CrossEntropyLoss(), (features, rng.integers(0, 64, 32))),
        ("MSELoss", nn.MSELoss(), (features, features[::-1].copy())),
        ("BCEWithLogitsLoss", nn.BCEWithLogitsLoss(), (features, (features > 0) * 1.0)),
        ("SmoothL1Loss", nn.SmoothL1Loss(), (features, features[::-1].copy())),
        ("KLDivLoss", nn.KLDivLoss(reduction="batchmean"), (features, np.abs(features))),
    ]


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def module_cases():
    import torch

    cases = {}
    for (name, module, arrays), (_, twin, _) in zip(_modules(ember), _modules(torch)):
        module.load_state_dict({k: ember.tensor(v.numpy()) for k, v in twin.state_dict().items()})
        module.eval(), twin.eval()
        es = [ember.tensor(np.asarray(a, np.float32) if a.dtype == float else a) for a in arrays]
        ts = [torch.tensor(np.asarray(a, np.float32) if a.dtype == float else a) for a in arrays]

        def e(module=module, es=es):
            with ember.no_grad():
                return module(*es)

        def t(twin=twin, ts=ts):
            with torch.no_grad():
                return twin(*ts)

        np.testing.assert_allclose(
            _first(e()).numpy(), _first(t()).numpy(), rtol=1e-4, atol=1e-5, err_msg=name
        )
        cases[name] = (e, t)
    return cases


GROUPS = {
    "dispatch": (dispatch_cases, 0.02),
    "small": (small_cases, 0.02),
    "composite": (composite_cases, 0.1),
    "optim": (optim_cases, 0.05),
    "modules": (module_cases, 0.02),
    "step": (step_cases, 0.3),
}


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", default=",".join(g for g in GROUPS if g != "small"))
    parser.add_argument(
        "--cases", default="", help="comma-separated substrings: only cases naming one"
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--threads", type=int, default=0, help="threads of both sides (default: ember's pool's)"
    )
    parser.add_argument(
        "--clock",
        choices=tuple(CLOCKS),
        help="process: CPU time, best round (default with one thread); wall: median round",
    )
    args = parser.parse_args()
    if args.threads:  # (one thread each: steadier figures on a machine others share)
        cpool.set_num_threads(args.threads)
    torch.set_num_threads(cpool.get_num_threads())
    clock = args.clock or default_clock(cpool.get_num_threads())
    stat = "best" if clock == "process" else "median"
    for line in cpu_header():
        print(line)
    print(
        f"ember {cpool.get_num_threads()} threads, torch {torch.__version__} "
        f"{torch.get_num_threads()} threads; {stat} {clock}-clock us per call"
    )
    print(f"{'case':36}{'ember':>10}{'torch':>10}{'ratio':>8}")
    wanted = [w for w in args.cases.split(",") if w]
    for group in args.groups.split(","):
        if group not in GROUPS:
            parser.error(f"unknown group {group!r}; groups: {', '.join(GROUPS)}")
        build, budget = GROUPS[group]
        cases = build()
        if wanted:
            cases = {k: v for k, v in cases.items() if any(w in k for w in wanted)}
        for name, (e, t) in _interleaved(cases, args.rounds, budget, clock):
            print(f"{group + ': ' + name:36}{e:10.2f}{t:10.2f}{e / t:8.2f}", flush=True)


if __name__ == "__main__":
    main()
