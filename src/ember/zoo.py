"""The model zoo: ten models written once over a PyTorch-like namespace, so the same source
builds ember's model and its PyTorch twin (``build(name, ember)`` / ``build(name, torch)``).

Tests (tests/test_zoo_models.py), the benchmark (benchmarks/zoo.py) and examples share it. A
builder reads only ``lib.nn``, ``lib.nn.functional`` and a few top-level functions (``cat``,
``zeros``, ``randn``, ``arange``): ember's API is PyTorch's, so building both twins from one
source is itself a parity check of that API. `copy_weights` makes the twins start identical.

Each model has a `Spec`: its training batch, optimizer and default sizes (what the benchmark
runs), and small sizes for the tests. The default sizes, with the loss always cross-entropy:

* ``mlp``: 784-512-512-10 with ReLU on (B, 784) features; batch 64; SGD (momentum 0.9).
* ``cnn``: ember.models.cnn's LeNet-style net (conv3x3 32 - ReLU - maxpool2 - conv3x3 64 -
  ReLU - maxpool2 - fc 128 - ReLU - fc 10) on 1x28x28; batch 64; SGD (momentum 0.9).
* ``resnet18``: CIFAR ResNet-18: conv3x3 stem, 4 stages x 2 BasicBlocks (ember.models'
  `basic_block_class`: conv-BN-ReLU-conv-BN + identity or strided 1x1 conv-BN shortcut) of
  widths w, 2w, 4w, 8w with strides 1, 2, 2, 2, global average pool, fc 10; 3x32x32; batch 64.
  The base width ``w`` is 16 by default (a quarter of the paper's 64, about 1/16 of its FLOPs,
  so that a step takes a fraction of a second on a small CPU); ``width=64`` builds the original.
  SGD (momentum 0.9).
* ``mobilenet_v2``: MobileNetV2-style, CIFAR stem (conv3x3 stride 1, 16 channels), inverted
  residuals (1x1 expand - BN - ReLU6 - 3x3 depthwise (groups = channels) - BN - ReLU6 - 1x1
  project - BN, residual when stride 1 and channels equal) with (expansion, channels, blocks,
  stride) = (1,16,1,1) (6,24,2,2) (6,32,3,2) (6,64,2,2) (6,96,1,1), 1x1 conv to 256 - BN -
  ReLU6, global average pool, fc 10; 3x32x32; batch 32; SGD (momentum 0.9).
* ``unet``: a U-Net-style encoder/decoder on 3x64x64, 16-32-64 channels: conv3x3-BN-ReLU, two
  stride-2 conv3x3 downsamplings, a conv3x3 bottleneck, then a ConvTranspose2d(2, stride 2)
  upsampling and a bilinear ``interpolate`` (x2) upsampling, each concatenated with the encoder's
  feature map of that size and followed by conv3x3-BN-ReLU, then a 1x1 conv to 5 classes per
  pixel (cross-entropy over (B, 5, 64, 64) against (B, 64, 64) labels); batch 8; AdamW.
* ``lstm``: language model: Embedding(1000, 128) - LSTM(128, 256, 2 layers, batch_first) -
  Linear(256, 1000), next-token cross-entropy over (B, T); batch 16 x 32 steps; AdamW.
* ``gru``: the same with GRU.
* ``gpt``: a one-block GPT language model: Embedding(1000, 256) plus a learned positional
  embedding, ember.models' `gpt_block_class` (pre-LayerNorm causal self-attention with 4 heads
  and a GELU MLP of 1024), LayerNorm, Linear(256, 1000); batch 8 x 128 tokens; AdamW.
* ``transformer``: ``nn.TransformerEncoderLayer(256, 8, 1024, dropout=0, batch_first=True)``
  on (B, 128, 256) features, then Linear(256, 10) per token; batch 8; AdamW.
* ``vit``: ViT-style: 4x4 patches by a stride-4 Conv2d to width 128 (64 patches of a 3x32x32
  image), a class token and a learned positional embedding, 4 pre-LN
  ``nn.TransformerEncoderLayer(128, 4, 256, GELU)``, LayerNorm, Linear(128, 10) on the class
  token; batch 32; AdamW.

Dropout is 0 everywhere, so a step is deterministic and the twins compute the same function.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .models import basic_block_class, gpt_block_class
from .tensor import Tensor

__all__ = [
    "ZOO",
    "Spec",
    "SPECS",
    "build",
    "copy_weights",
    "inputs",
    "loss",
    "optimizer",
]


@dataclass(frozen=True)
class Spec:
    """A zoo model's workload: ``train_batch`` for the training step, ``infer_batches`` for
    inference, the optimizer (``"sgd"`` with ``momentum`` or ``"adamw"``) and its ``lr``;
    ``sizes`` are the builder's defaults, ``test_sizes`` small ones (with ``test_batch``) for
    fast parity tests."""

    name: str
    train_batch: int
    optimizer: str
    lr: float
    momentum: float = 0.0
    infer_batches: tuple[int, ...] = (1, 8)
    sizes: dict = field(default_factory=dict)
    test_sizes: dict = field(default_factory=dict)
    test_batch: int = 2


SPECS: dict[str, Spec] = {
    s.name: s
    for s in (
        Spec("mlp", 64, "sgd", 0.01, 0.9, sizes=dict(in_features=784, hidden=512, classes=10),
             test_sizes=dict(in_features=20, hidden=16, classes=5)),
        Spec("cnn", 64, "sgd", 0.01, 0.9, sizes=dict(image=28, classes=10),
             test_sizes=dict(image=8, classes=5)),
        Spec("resnet18", 64, "sgd", 0.01, 0.9, sizes=dict(width=16, image=32, classes=10),
             test_sizes=dict(width=4, image=16, classes=5)),
        Spec("mobilenet_v2", 32, "sgd", 0.01, 0.9, sizes=dict(width=1.0, image=32, classes=10),
             test_sizes=dict(width=0.25, image=16, classes=5)),
        Spec("unet", 8, "adamw", 1e-3, sizes=dict(width=16, image=64, classes=5),
             test_sizes=dict(width=4, image=16, classes=3)),
        Spec("lstm", 16, "adamw", 1e-3, sizes=dict(vocab=1000, embed=128, hidden=256, seq=32),
             test_sizes=dict(vocab=50, embed=8, hidden=12, seq=5)),
        Spec("gru", 16, "adamw", 1e-3, sizes=dict(vocab=1000, embed=128, hidden=256, seq=32),
             test_sizes=dict(vocab=50, embed=8, hidden=12, seq=5)),
        Spec("gpt", 8, "adamw", 1e-3,
             sizes=dict(vocab=1000, d_model=256, heads=4, hidden=1024, seq=128),
             test_sizes=dict(vocab=50, d_model=16, heads=2, hidden=32, seq=6)),
        Spec("transformer", 8, "adamw", 1e-3,
             sizes=dict(d_model=256, heads=8, hidden=1024, seq=128, classes=10),
             test_sizes=dict(d_model=16, heads=4, hidden=32, seq=6, classes=5)),
        Spec("vit", 32, "adamw", 1e-3,
             sizes=dict(image=32, patch=4, d_model=128, heads=4, hidden=256, depth=4, classes=10),
             test_sizes=dict(image=8, patch=4, d_model=16, heads=2, hidden=32, depth=2, classes=5)),
    )
}  # fmt: skip
ZOO = tuple(SPECS)


def _sizes(name: str, sizes: dict) -> dict:
    if name not in SPECS:
        raise ValueError(f"unknown zoo model {name!r}; choose one of {', '.join(ZOO)}")
    unknown = set(sizes) - set(SPECS[name].sizes)
    if unknown:
        raise ValueError(
            f"zoo model {name!r}: unknown size(s) {', '.join(sorted(unknown))}; "
            f"it takes {', '.join(SPECS[name].sizes)}"
        )
    return {**SPECS[name].sizes, **sizes}


# ----------------------------------------------------------------------------- the models


def _classes(lib) -> dict:
    """The zoo's module classes over ``lib`` (``ember`` or ``torch``), made once per namespace."""
    cached = _CLASSES.get(id(lib))
    if cached is not None and cached[0] is lib:
        return cached[1]
    nn, F = lib.nn, lib.nn.functional
    BasicBlock = basic_block_class(nn, F)
    GPTBlock = gpt_block_class(nn, F)

    def conv_bn(cin, cout, k=3, stride=1, groups=1, act=None):
        layers = [
            nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
        ]
        return nn.Sequential(*layers, act()) if act is not None else nn.Sequential(*layers)

    class ResNet18(nn.Module):
        def __init__(self, width, classes):
            super().__init__()
            self.stem = conv_bn(3, width, act=nn.ReLU)
            blocks, cin = [], width
            for stage, stride in enumerate((1, 2, 2, 2)):
                cout = width * 2**stage
                blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
                cin = cout
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(cin, classes)

        def forward(self, x):
            x = self.blocks(self.stem(x))
            return self.fc(x.mean(dim=(2, 3)))

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, expansion):
            super().__init__()
            hidden = cin * expansion
            layers = [] if expansion == 1 else [conv_bn(cin, hidden, 1, act=nn.ReLU6)]
            layers += [
                conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
                conv_bn(hidden, cout, 1),
            ]
            self.conv = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.conv(x) if self.residual else self.conv(x)

    class MobileNetV2(nn.Module):
        SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 2, 2), (6, 96, 1, 1))

        def __init__(self, width, classes):
            super().__init__()

            def ch(c):  # channels scaled by the width multiplier, kept a multiple of 4
                return max(4, int(round(c * width / 4)) * 4)

            cin = ch(16)
            layers = [conv_bn(3, cin, 3, act=nn.ReLU6)]
            for expansion, c, n, s in self.SETTINGS:
                for i in range(n):
                    layers.append(InvertedResidual(cin, ch(c), s if i == 0 else 1, expansion))
                    cin = ch(c)
            layers.append(conv_bn(cin, ch(256), 1, act=nn.ReLU6))
            self.features = nn.Sequential(*layers)
            self.fc = nn.Linear(ch(256), classes)

        def forward(self, x):
            return self.fc(self.features(x).mean(dim=(2, 3)))

    class UNet(nn.Module):
        def __init__(self, width, classes):
            super().__init__()
            w = width
            self.enc = conv_bn(3, w, act=nn.ReLU)
            self.down1 = conv_bn(w, 2 * w, 3, 2, act=nn.ReLU)
            self.down2 = conv_bn(2 * w, 4 * w, 3, 2, act=nn.ReLU)
            self.mid = conv_bn(4 * w, 4 * w, act=nn.ReLU)
            self.up2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, stride=2)
            self.dec2 = conv_bn(4 * w, 2 * w, act=nn.ReLU)
            self.dec1 = conv_bn(3 * w, w, act=nn.ReLU)
            self.head = nn.Conv2d(w, classes, 1)

        def forward(self, x):
            e = self.enc(x)
            d1 = self.down1(e)
            m = self.mid(self.down2(d1))
            u2 = self.dec2(lib.cat([self.up2(m), d1], dim=1))
            u1 = F.interpolate(u2, scale_factor=2, mode="bilinear", align_corners=False)
            return self.head(self.dec1(lib.cat([u1, e], dim=1)))

    class RecurrentLM(nn.Module):
        def __init__(self, cell, vocab, embed, hidden):
            super().__init__()
            self.embed = nn.Embedding(vocab, embed)
            self.rnn = cell(embed, hidden, num_layers=2, batch_first=True)
            self.out = nn.Linear(hidden, vocab)

        def forward(self, tokens):
            h, _ = self.rnn(self.embed(tokens))
            return self.out(h)

    class GPT(nn.Module):
        def __init__(self, vocab, d_model, heads, hidden, seq):
            super().__init__()
            self.embed = nn.Embedding(vocab, d_model)
            self.pos = nn.Parameter(lib.randn(1, seq, d_model) * 0.02)
            self.block = GPTBlock(d_model, heads, hidden)
            self.ln = nn.LayerNorm(d_model)
            self.out = nn.Linear(d_model, vocab)

        def forward(self, tokens):
            x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
            return self.out(self.ln(self.block(x)))

    class Encoder(nn.Module):
        def __init__(self, d_model, heads, hidden, seq, classes):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(
                d_model, heads, hidden, dropout=0.0, batch_first=True
            )
            self.out = nn.Linear(d_model, classes)

        def forward(self, x):
            return self.out(self.layer(x))

    class ViT(nn.Module):
        def __init__(self, image, patch, d_model, heads, hidden, depth, classes):
            super().__init__()
            patches = (image // patch) ** 2
            self.patch = nn.Conv2d(3, d_model, patch, stride=patch)
            self.cls = nn.Parameter(lib.randn(1, 1, d_model) * 0.02)
            self.pos = nn.Parameter(lib.randn(1, patches + 1, d_model) * 0.02)
            self.layers = nn.ModuleList(
                nn.TransformerEncoderLayer(
                    d_model, heads, hidden, dropout=0.0, activation="gelu",
                    batch_first=True, norm_first=True,
                )
                for _ in range(depth)
            )  # fmt: skip
            self.ln = nn.LayerNorm(d_model)
            self.out = nn.Linear(d_model, classes)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2)  # (B, patches, d)
            x = lib.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            for layer in self.layers:
                x = layer(x)
            return self.out(self.ln(x[:, 0]))

    made = {
        "mlp": lambda in_features, hidden, classes: nn.Sequential(
            nn.Linear(in_features, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, classes),
        ),
        "cnn": lambda image, classes: nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * (image // 4) ** 2, 128), nn.ReLU(),
            nn.Linear(128, classes),
        ),
        "resnet18": lambda width, image, classes: ResNet18(width, classes),
        "mobilenet_v2": lambda width, image, classes: MobileNetV2(width, classes),
        "unet": lambda width, image, classes: UNet(width, classes),
        "lstm": lambda vocab, embed, hidden, seq: RecurrentLM(nn.LSTM, vocab, embed, hidden),
        "gru": lambda vocab, embed, hidden, seq: RecurrentLM(nn.GRU, vocab, embed, hidden),
        "gpt": GPT,
        "transformer": Encoder,
        "vit": ViT,
    }  # fmt: skip
    _CLASSES[id(lib)] = (lib, made)
    return made


_CLASSES: dict[int, tuple] = {}


def build(name: str, lib, **sizes):
    """Zoo model ``name`` built over ``lib`` (the ``ember`` or the ``torch`` module), with the
    spec's default sizes overridden by ``sizes``. Its initial weights come from ``lib``'s
    generator: seed it, or use `copy_weights` to make two builds identical."""
    sizes = _sizes(name, sizes)
    return _classes(lib)[name](**sizes)


def inputs(name: str, batch: int, seed: int = 0, **sizes) -> tuple[np.ndarray, np.ndarray]:
    """A seeded example batch ``(x, y)`` of zoo model ``name`` as NumPy arrays: ``x`` float32
    images or features, or int64 tokens; ``y`` int64 class labels (per token for the language
    models and the encoder, per pixel for the U-Net)."""
    s = _sizes(name, sizes)
    rng = np.random.default_rng(seed)

    def images(channels, size):
        return rng.standard_normal((batch, channels, size, size)).astype(np.float32)

    def labels(classes, *shape):
        return rng.integers(0, classes, (batch, *shape)).astype(np.int64)

    if name == "mlp":
        return rng.standard_normal((batch, s["in_features"])).astype(np.float32), labels(
            s["classes"]
        )
    if name == "cnn":
        return images(1, s["image"]), labels(s["classes"])
    if name in ("resnet18", "mobilenet_v2", "vit"):
        return images(3, s["image"]), labels(s["classes"])
    if name == "unet":
        return images(3, s["image"]), labels(s["classes"], s["image"], s["image"])
    if name in ("lstm", "gru", "gpt"):
        tokens = labels(s["vocab"], s["seq"] + 1)
        return tokens[:, :-1].copy(), tokens[:, 1:].copy()  # predict the next token
    if name == "transformer":
        x = rng.standard_normal((batch, s["seq"], s["d_model"])).astype(np.float32)
        return x, labels(s["classes"], s["seq"])
    raise ValueError(f"unknown zoo model {name!r}; choose one of {', '.join(ZOO)}")


def loss(lib, out, y):
    """Cross-entropy of the model's output ``out`` against labels ``y``: (B, C) logits, (B, T,
    C) per-token logits (flattened to (B*T, C)) or (B, C, H, W) per-pixel logits."""
    if out.dim() == 3:
        return lib.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    return lib.nn.functional.cross_entropy(out, y)


def optimizer(name: str, lib, parameters):
    """Zoo model ``name``'s optimizer over ``parameters``, from ``lib.optim``."""
    spec = SPECS[name]
    if spec.optimizer == "adamw":
        return lib.optim.AdamW(parameters, lr=spec.lr)
    return lib.optim.SGD(parameters, lr=spec.lr, momentum=spec.momentum)


def copy_weights(source, target) -> None:
    """Copy ``source``'s parameters and buffers into ``target``'s, matched by state_dict name
    (an ember model into its PyTorch twin, or the other way): each goes through NumPy and is
    written into the target's own storage, in the target's dtype. Raises ValueError naming the
    entries when the names or shapes differ."""
    src = {k: _numpy(v) for k, v in source.state_dict().items()}
    dst = target.state_dict()
    if set(src) != set(dst):
        missing, extra = sorted(set(src) - set(dst)), sorted(set(dst) - set(src))
        raise ValueError(
            f"copy_weights: state_dict names differ: only in the source {missing}, "
            f"only in the target {extra}"
        )
    for key, value in dst.items():
        array = _numpy(value)
        if array.shape != src[key].shape:
            raise ValueError(
                f"copy_weights: {key!r} has shape {src[key].shape} in the source, "
                f"{array.shape} in the target"
            )
        if not array.flags.writeable:
            raise ValueError(f"copy_weights: the target's {key!r} gives no writable storage")
        np.copyto(array, src[key], casting="unsafe")
        counter = getattr(value, "_vc", None)  # an ember tensor's version counter
        if isinstance(counter, list):
            counter[0] += 1  # (written behind its back: products by packed panels must see it)


def _numpy(value) -> np.ndarray:
    """A state_dict entry's array (ember's or PyTorch's; both share the tensor's storage)."""
    value = value.detach() if hasattr(value, "detach") else value
    if isinstance(value, Tensor):  # (read or written here with its counter bumped: not exposed)
        return value._data
    return value.numpy(force=True)
