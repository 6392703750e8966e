"""Survey of whole training steps of architectures the benchmark zoo does not hold, ember against
PyTorch: grouped convolutions (ResNeXt), dense concatenation (DenseNet), channel shuffles
(ShuffleNet), fire modules (SqueezeNet), squeeze-and-excitation with SiLU (EfficientNet),
ConvNeXt blocks (7x7 depthwise, channels-last LayerNorm, layer scale), a diffusion U-Net's
residual block (GroupNorm, SiLU, a time embedding), windowed attention with shifts (Swin),
Inception branches, gated dilated convolutions (WaveNet), a transformer decoder with cross
attention, an MLP-Mixer, a GRU seq2seq with attention, and graph message passing (index_add).

Each model is written once against ``L`` (torch or ember) and trained for a step (forward,
loss, backward, SGD with momentum): ember eager and ``ember.function`` against PyTorch eager,
one thread each, interleaved in one process, minimum over repeats. It finds the layers where
ember falls behind on programs the zoo's tuning never saw (a ratio over 1.5 is flagged).

    python benchmarks/arch_survey.py [--cases convnext,swin] [--threads 1] [--no-function]

Prints the CPU model in the header and, per model, milliseconds of each side and the ratios.
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

import ember
from ember.kernels import cpool

try:
    import torch
except ImportError:  # pragma: no cover - the benchmark's peer
    torch = None


def resnext(L):
    nn = L.nn

    class Block(nn.Module):
        def __init__(self, c=128, g=8):
            super().__init__()
            self.a = nn.Conv2d(c, c, 1, bias=False)
            self.b = nn.Conv2d(c, c, 3, padding=1, groups=g, bias=False)
            self.c = nn.Conv2d(c, c, 1, bias=False)
            self.n1, self.n2, self.n3 = nn.BatchNorm2d(c), nn.BatchNorm2d(c), nn.BatchNorm2d(c)

        def forward(self, x):
            y = self.n1(self.a(x)).relu()
            y = self.n2(self.b(y)).relu()
            return (self.n3(self.c(y)) + x).relu()

    return nn.Sequential(
        nn.Conv2d(3, 128, 3, padding=1), Block(), Block(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(128, 10),
    )  # fmt: skip


def densenet(L):
    nn = L.nn

    class Dense(nn.Module):
        def __init__(self, c, growth=24, layers=4):
            super().__init__()
            self.layers = nn.ModuleList(
                nn.Sequential(
                    nn.BatchNorm2d(c + i * growth),
                    nn.ReLU(),
                    nn.Conv2d(c + i * growth, 4 * growth, 1, bias=False),
                    nn.BatchNorm2d(4 * growth),
                    nn.ReLU(),
                    nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False),
                )  # fmt: skip
                for i in range(layers)
            )

        def forward(self, x):
            for layer in self.layers:
                x = L.cat([x, layer(x)], 1)
            return x

    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), Dense(32), nn.AvgPool2d(2), Dense(128),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(224, 10),
    )  # fmt: skip


def shufflenet(L):
    nn = L.nn

    class Unit(nn.Module):
        def __init__(self, c=116):
            super().__init__()
            h = c // 2
            self.branch = nn.Sequential(
                nn.Conv2d(h, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU(),
                nn.Conv2d(h, h, 3, padding=1, groups=h, bias=False), nn.BatchNorm2d(h),
                nn.Conv2d(h, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU(),
            )  # fmt: skip

        def forward(self, x):
            a, b = x.chunk(2, dim=1)
            out = L.cat([a, self.branch(b)], 1)
            n, c, hh, ww = out.shape
            return out.view(n, 2, c // 2, hh, ww).transpose(1, 2).reshape(n, c, hh, ww)

    return nn.Sequential(
        nn.Conv2d(3, 116, 3, padding=1), Unit(), Unit(), Unit(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(116, 10),
    )  # fmt: skip


def squeezenet(L):
    nn = L.nn

    class Fire(nn.Module):
        def __init__(self, c, s, e):
            super().__init__()
            self.s = nn.Conv2d(c, s, 1)
            self.e1, self.e3 = nn.Conv2d(s, e, 1), nn.Conv2d(s, e, 3, padding=1)

        def forward(self, x):
            x = self.s(x).relu()
            return L.cat([self.e1(x).relu(), self.e3(x).relu()], 1)

    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(64, 16, 64), Fire(128, 16, 64), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(128, 32, 128), nn.Dropout(0.0), nn.Conv2d(256, 10, 1), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    )  # fmt: skip


def efficientnet(L):
    nn = L.nn

    class MBConv(nn.Module):
        def __init__(self, c=32, expand=4):
            super().__init__()
            h = c * expand
            self.expand = nn.Sequential(
                nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.SiLU()
            )
            self.dw = nn.Sequential(
                nn.Conv2d(h, h, 3, padding=1, groups=h, bias=False), nn.BatchNorm2d(h), nn.SiLU()
            )
            self.se = nn.Sequential(
                nn.AdaptiveAvgPool2d(1), nn.Conv2d(h, c // 4, 1), nn.SiLU(),
                nn.Conv2d(c // 4, h, 1), nn.Sigmoid(),
            )  # fmt: skip
            self.project = nn.Sequential(nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))

        def forward(self, x):
            y = self.dw(self.expand(x))
            return self.project(y * self.se(y)) + x

    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), MBConv(), MBConv(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(32, 10),
    )  # fmt: skip


def convnext(L):
    nn = L.nn

    class Block(nn.Module):
        def __init__(self, c=64):
            super().__init__()
            self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
            self.norm = nn.LayerNorm(c, eps=1e-6)
            self.up, self.down = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
            self.gamma = nn.Parameter(L.full((c,), 1e-2))

        def forward(self, x):
            y = self.dw(x).permute(0, 2, 3, 1)
            y = self.down(L.nn.functional.gelu(self.up(self.norm(y))))
            return x + (self.gamma * y).permute(0, 3, 1, 2)

    return nn.Sequential(
        nn.Conv2d(3, 64, 4, stride=4), Block(), Block(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(64, 10),
    )  # fmt: skip


def diffusion_resblock(L):
    nn = L.nn

    class ResBlock(nn.Module):
        def __init__(self, c=64, t=128):
            super().__init__()
            self.n1, self.n2 = nn.GroupNorm(8, c), nn.GroupNorm(8, c)
            self.c1, self.c2 = nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)
            self.emb = nn.Linear(t, c)

        def forward(self, x, temb):
            h = self.c1(L.nn.functional.silu(self.n1(x)))
            h = h + self.emb(L.nn.functional.silu(temb))[:, :, None, None]
            h = self.c2(L.nn.functional.silu(self.n2(h)))
            return x + h

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 64, 3, padding=1)
            self.blocks = nn.ModuleList([ResBlock(), ResBlock()])
            self.time = nn.Sequential(nn.Linear(1, 128), nn.SiLU(), nn.Linear(128, 128))
            self.head = nn.Conv2d(64, 3, 3, padding=1)

        def forward(self, x):
            temb = self.time(x.mean((1, 2, 3))[:, None])
            h = self.stem(x)
            for block in self.blocks:
                h = block(h, temb)
            return self.head(h)

    return Net()


def swin(L):
    nn = L.nn
    F = L.nn.functional

    class WindowAttention(nn.Module):
        def __init__(self, c=64, heads=4, window=4, shift=2):
            super().__init__()
            self.heads, self.window, self.shift = heads, window, shift
            self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
            self.norm = nn.LayerNorm(c)
            self.bias = nn.Parameter(L.zeros(heads, window * window, window * window))

        def forward(self, x):  # (B, H, W, C)
            b, h, w, c = x.shape
            s, k = self.window, self.shift
            y = L.roll(self.norm(x), shifts=(-k, -k), dims=(1, 2))
            y = y.view(b, h // s, s, w // s, s, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, s * s, c)
            q, kk, v = (
                self.qkv(y)
                .reshape(-1, s * s, 3, self.heads, c // self.heads)
                .permute(2, 0, 3, 1, 4)
            )
            att = F.softmax(q @ kk.transpose(-2, -1) * (c // self.heads) ** -0.5 + self.bias, -1)
            y = (att @ v).transpose(1, 2).reshape(-1, s * s, c)
            y = self.proj(y).view(b, h // s, w // s, s, s, c).permute(0, 1, 3, 2, 4, 5)
            y = L.roll(y.reshape(b, h, w, c), shifts=(k, k), dims=(1, 2))
            return x + y

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Conv2d(3, 64, 2, stride=2)
            self.blocks = nn.ModuleList([WindowAttention(), WindowAttention()])
            self.head = nn.Linear(64, 10)

        def forward(self, x):
            y = self.embed(x).permute(0, 2, 3, 1)
            for block in self.blocks:
                y = block(y)
            return self.head(y.mean((1, 2)))

    return Net()


def inception(L):
    nn = L.nn

    class Block(nn.Module):
        def __init__(self, c=64):
            super().__init__()
            self.b1 = nn.Conv2d(c, 32, 1)
            self.b3 = nn.Sequential(nn.Conv2d(c, 24, 1), nn.ReLU(), nn.Conv2d(24, 32, 3, padding=1))
            self.b5 = nn.Sequential(nn.Conv2d(c, 8, 1), nn.ReLU(), nn.Conv2d(8, 16, 5, padding=2))
            self.bp = nn.Sequential(nn.AvgPool2d(3, 1, 1), nn.Conv2d(c, 16, 1))

        def forward(self, x):
            return L.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], 1).relu()

    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), Block(), nn.MaxPool2d(2), Block(96),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(96, 10),
    )  # fmt: skip


def wavenet(L):
    nn = L.nn

    class Gated(nn.Module):
        def __init__(self, c=32, d=1):
            super().__init__()
            self.conv = nn.Conv1d(c, 2 * c, 2, dilation=d, padding=d)
            self.res = nn.Conv1d(c, c, 1)

        def forward(self, x):
            t, s = self.conv(x)[..., : x.shape[-1]].chunk(2, 1)
            return x + self.res(L.tanh(t) * L.sigmoid(s))

    return nn.Sequential(
        nn.Conv1d(1, 32, 1), *[Gated(32, 2**i) for i in range(6)], nn.Conv1d(32, 8, 1),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(8, 10),
    )  # fmt: skip


def decoder(L):
    nn = L.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerDecoderLayer(128, 4, 256, dropout=0.0, batch_first=True)
            self.head = nn.Linear(128, 10)

        def forward(self, x):
            tgt, memory = x[:, :32], x[:, 32:]
            mask = nn.Transformer.generate_square_subsequent_mask(32)
            return self.head(self.layer(tgt, memory, tgt_mask=mask).mean(1))

    return Net()


def mixer(L):
    nn = L.nn

    class Block(nn.Module):
        def __init__(self, tokens=64, c=64):
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(c), nn.LayerNorm(c)
            self.tok = nn.Sequential(nn.Linear(tokens, 128), nn.GELU(), nn.Linear(128, tokens))
            self.ch = nn.Sequential(nn.Linear(c, 256), nn.GELU(), nn.Linear(256, c))

        def forward(self, x):
            x = x + self.tok(self.n1(x).transpose(1, 2)).transpose(1, 2)
            return x + self.ch(self.n2(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Conv2d(3, 64, 4, stride=4)
            self.blocks = nn.Sequential(Block(), Block())
            self.head = nn.Linear(64, 10)

        def forward(self, x):
            y = self.embed(x).flatten(2).transpose(1, 2)
            return self.head(self.blocks(y).mean(1))

    return Net()


def seq2seq(L):
    nn = L.nn
    F = L.nn.functional

    class Net(nn.Module):
        def __init__(self, h=128):
            super().__init__()
            self.enc = nn.GRU(32, h, batch_first=True)
            self.dec = nn.GRUCell(32 + h, h)
            self.out = nn.Linear(h, 10)

        def forward(self, x):
            mem, last = self.enc(x)
            state, outs = last[0], []
            for t in range(8):
                att = F.softmax(L.bmm(mem, state[:, :, None]).squeeze(2), -1)
                ctx = L.bmm(att[:, None], mem).squeeze(1)
                state = self.dec(L.cat([x[:, t], ctx], -1), state)
                outs.append(self.out(state))
            return L.stack(outs, 1).mean(1)

    return Net()


def gnn(L):
    nn = L.nn
    rng = np.random.default_rng(0)
    edges = rng.integers(0, 512, size=(2, 4096))

    class Net(nn.Module):
        def __init__(self, c=64):
            super().__init__()
            self.src, self.dst = L.tensor(edges[0]), L.tensor(edges[1])
            self.lin = nn.ModuleList([nn.Linear(c, c), nn.Linear(c, c)])
            self.head = nn.Linear(c, 10)

        def forward(self, x):
            h = x
            for lin in self.lin:
                msg = lin(h)[self.src]
                agg = L.zeros_like(h).index_add_(0, self.dst, msg)
                h = (h + agg).relu()
            return self.head(h)

    return Net()


# name: (builder, input shape, classes of the target: None for a regression on the output)
CASES = {
    "resnext g=8": (resnext, (16, 3, 32, 32), 10),
    "densenet": (densenet, (16, 3, 32, 32), 10),
    "shufflenet": (shufflenet, (16, 3, 32, 32), 10),
    "squeezenet": (squeezenet, (16, 3, 32, 32), 10),
    "efficientnet mbconv": (efficientnet, (16, 3, 32, 32), 10),
    "convnext": (convnext, (16, 3, 64, 64), 10),
    "diffusion resblock": (diffusion_resblock, (8, 3, 32, 32), None),
    "swin windows": (swin, (16, 3, 32, 32), 10),
    "inception": (inception, (16, 3, 32, 32), 10),
    "wavenet": (wavenet, (16, 1, 512), 10),
    "transformer decoder": (decoder, (8, 96, 128), 10),
    "mlp-mixer": (mixer, (16, 3, 32, 32), 10),
    "gru seq2seq attention": (seq2seq, (16, 24, 32), 10),
    "gnn index_add": (gnn, (512, 64), 10),
}


def _step(lib, model, x, y, regression):
    opt = lib.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = lib.nn.functional.mse_loss if regression else lib.nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def _measure(name, build, shape, classes, use_function: bool) -> str:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    t_model, e_model = build(torch), build(ember)
    e_model.load_state_dict(
        {k: ember.tensor(v.detach().numpy()) for k, v in t_model.state_dict().items()}
    )
    if classes is None:
        out = t_model(torch.tensor(x))
        y = rng.standard_normal(tuple(out.shape)).astype(np.float32)
        t_y, e_y = torch.tensor(y), ember.tensor(y)
    else:
        y = rng.integers(0, classes, shape[0])
        t_y, e_y = torch.tensor(y), ember.tensor(y)
    t_step = _step(torch, t_model, torch.tensor(x), t_y, classes is None)
    e_step = _step(ember, e_model, ember.tensor(x), e_y, classes is None)
    calls = {"torch": t_step, "eager": e_step}
    if use_function:
        calls["function"] = ember.function(
            _step(ember, e_model, ember.tensor(x), e_y, classes is None)
        )
    for call in list(calls.values()) * 2:  # (warm: kernels built, captured, calibrated)
        call()
    one = min(timeit.repeat(t_step, number=1, repeat=2))
    n = max(1, min(10, int(0.2 / max(one, 1e-6))))
    best = {k: float("inf") for k in calls}
    for _ in range(3):  # interleaved rounds
        for k, call in calls.items():
            best[k] = min(best[k], min(timeit.repeat(call, number=n, repeat=2)) / n)
    t = best["torch"]
    parts = [f"{name:24s} torch {t * 1e3:8.2f} ms"]
    flag = ""
    for k in calls:
        if k == "torch":
            continue
        ratio = best[k] / t
        parts.append(f"{k} {best[k] * 1e3:8.2f} ms {ratio:5.2f}")
        flag = "  <<<" if ratio > 1.5 else flag
    return "  ".join(parts) + flag


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="", help="comma-separated substrings of case names")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-function", action="store_true", help="eager only")
    args = parser.parse_args()
    if torch is None:
        raise SystemExit("PyTorch (the peer) is not installed: pip install -e '.[bench]'")
    torch.set_num_threads(args.threads)
    ember.set_num_threads(args.threads)
    print(f"CPU: {cpool.cpu_model()}; {args.threads} thread(s) each; torch {torch.__version__}")
    wanted = [c for c in args.cases.split(",") if c]
    for name, (build, shape, classes) in CASES.items():
        if wanted and not any(w in name for w in wanted):
            continue
        try:
            print(_measure(name, build, shape, classes, not args.no_function), flush=True)
        except Exception as error:  # (a model one side refuses: reported, the survey goes on)
            print(f"{name:24s} failed: {type(error).__name__}: {str(error)[:200]}", flush=True)


if __name__ == "__main__":
    main()
