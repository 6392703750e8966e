"""Built-in models used by `ember train`, the benchmarks and the tests.

* ``mlp``: flatten - Linear(in, 512) - ReLU - Linear(512, 512) - ReLU - Linear(512, classes)
* ``cnn``: conv3x3(32, padding 1) - ReLU - maxpool2 - conv3x3(64, padding 1) - ReLU - maxpool2
  - flatten - Linear(128) - ReLU - Linear(classes); the first Linear's input size follows from the
  image size (8x8 digits: 64*2*2; 28x28 Fashion-MNIST: 64*7*7).
* ``gpt``: one pre-LayerNorm transformer block (`GPTBlock`): causal self-attention and a GELU MLP,
  each with a residual connection.
* ``resnet``: a ResNet basic block (`BasicBlock`): conv3x3-BN-ReLU-conv3x3-BN plus the shortcut.

`inception_block` and `conv_chain` (with `inception_shapes` / `CONV_CHAIN_SHAPES`) are the
parallel executor's reference graphs: four independent branches of convolutions, and the same
kind of work one after another.

``BertModel`` / ``BertConfig`` (Hugging Face's BERT, names and all) and ``sentence_embedder``
(texts to sentence vectors, all-MiniLM-L6-v2 by default) live in ember/text/ and are exported
here.

`example_step(name)` builds the reference training step of each model, the one the benchmarks,
the memory and FLOP tools and their tests share: the model, its optimizer, an example batch and
an eager ``step()`` (zero_grad, forward, loss, backward, optimizer step) returning the loss.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import nn
from .nn import functional as F
from .ops.concat import concat
from .optim import SGD, AdamW
from .tensor import Tensor
from .text.bert import BertConfig, BertModel  # noqa: F401 (exported: ember.models.BertModel)


def sentence_embedder(path=None, max_seq_length: int | None = None, batch_size: int = 32):
    """A callable turning texts into sentence embeddings; see ember/text/embedder.py."""
    from .text.embedder import sentence_embedder as build

    return build(path, max_seq_length, batch_size)


MODEL_NAMES = ("mlp", "cnn")  # the models `ember train` can train on images
EXAMPLE_STEPS = ("mlp", "cnn", "gpt", "resnet")


def mlp(in_features: int = 784, hidden: int = 512, num_classes: int = 10) -> nn.Module:
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(in_features, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, num_classes),
    )


def cnn(in_channels: int = 1, image_size: int = 28, num_classes: int = 10) -> nn.Module:
    if image_size % 4:
        raise ValueError(f"cnn: the image size must be divisible by 4, got {image_size}")
    flat = 64 * (image_size // 4) ** 2
    return nn.Sequential(
        nn.Conv2d(in_channels, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(flat, 128),
        nn.ReLU(),
        nn.Linear(128, num_classes),
    )


def build(name: str, image_shape: tuple[int, int, int], num_classes: int) -> nn.Module:
    """The built-in model ``name`` for images of ``image_shape`` (C, H, W)."""
    channels, height, width = image_shape
    if name == "mlp":
        return mlp(channels * height * width, 512, num_classes)
    if name == "cnn":
        if height != width:
            raise ValueError(f"cnn: expects square images, got {height}x{width}")
        return cnn(channels, height, num_classes)
    raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")


def gpt_block_class(nn_namespace, functional):
    """The `GPTBlock` class over a PyTorch-like module namespace: ``ember.nn`` and
    ``ember.nn.functional`` give ember's, ``torch.nn`` and ``torch.nn.functional`` the PyTorch
    twin the benchmarks and the FLOP tests compare with (one source, same parameter names)."""

    class GPTBlock(nn_namespace.Module):
        """A pre-LayerNorm transformer block: ``x + attn(ln1(x))`` then ``x + mlp(ln2(x))``,
        with causal multi-head self-attention and a GELU MLP."""

        def __init__(self, d_model: int = 256, heads: int = 4, hidden: int = 1024) -> None:
            super().__init__()
            if d_model % heads:
                raise ValueError(f"GPTBlock: d_model {d_model} is not divisible by heads {heads}")
            self.heads = heads
            self.ln1 = nn_namespace.LayerNorm(d_model)
            self.qkv = nn_namespace.Linear(d_model, 3 * d_model)
            self.proj = nn_namespace.Linear(d_model, d_model)
            self.ln2 = nn_namespace.LayerNorm(d_model)
            self.fc1 = nn_namespace.Linear(d_model, hidden)
            self.fc2 = nn_namespace.Linear(hidden, d_model)

        def forward(self, x):
            b, t, d = x.shape
            qkv = self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, d // self.heads)
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (b, heads, t, head_dim)
            att = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(functional.gelu(self.fc1(self.ln2(x))))

    return GPTBlock


def basic_block_class(nn_namespace, functional):
    """The `BasicBlock` class over a PyTorch-like module namespace (see `gpt_block_class`)."""

    class BasicBlock(nn_namespace.Module):
        """A ResNet basic block: conv3x3-BN-ReLU-conv3x3-BN, plus the input (or a strided 1x1
        conv-BN projection of it when the shape changes), then ReLU."""

        def __init__(self, in_channels: int = 64, channels: int = 64, stride: int = 1) -> None:
            super().__init__()
            conv, norm = nn_namespace.Conv2d, nn_namespace.BatchNorm2d
            self.conv1 = conv(in_channels, channels, 3, stride=stride, padding=1, bias=False)
            self.bn1 = norm(channels)
            self.conv2 = conv(channels, channels, 3, padding=1, bias=False)
            self.bn2 = norm(channels)
            self.shortcut = None
            if stride != 1 or in_channels != channels:
                self.shortcut = nn_namespace.Sequential(
                    conv(in_channels, channels, 1, stride=stride, bias=False), norm(channels)
                )

        def forward(self, x):
            out = functional.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return functional.relu(out + (x if self.shortcut is None else self.shortcut(x)))

    return BasicBlock


GPTBlock = gpt_block_class(nn, F)
BasicBlock = basic_block_class(nn, F)


def inception_block(x, w1, w2a, w2b, w3a, w3b, w4):
    """Four independent branches of convolutions over one input, concatenated: 1x1; 1x1 then
    3x3; 1x1 then 5x5; 3x3 max pooling then 1x1 (weights as `inception_shapes` gives)."""
    b1 = F.relu(F.conv2d(x, w1))
    b2 = F.relu(F.conv2d(F.relu(F.conv2d(x, w2a)), w2b, padding=1))
    b3 = F.relu(F.conv2d(F.relu(F.conv2d(x, w3a)), w3b, padding=2))
    b4 = F.relu(F.conv2d(F.max_pool2d(x, 3, stride=1, padding=1), w4))
    return concat([b1, b2, b3, b4], dim=1)


def inception_shapes(batch: int = 8, channels: int = 32, size: int = 16) -> list:
    """The shapes of `inception_block`'s arguments: the input, then the seven weights."""
    c = channels
    return [(batch, c, size, size), (16, c, 1, 1), (16, c, 1, 1), (32, 16, 3, 3)] + [
        (8, c, 1, 1),
        (16, 8, 5, 5),
        (16, c, 1, 1),
    ]


def conv_chain(x, *weights):
    """3x3 convolutions with ReLU one after another: nothing to run at once."""
    for w in weights:
        x = F.relu(F.conv2d(x, w, padding=1))
    return x


CONV_CHAIN_SHAPES = [(8, 32, 16, 16)] + [(32, 32, 3, 3)] * 4  # the input, then four weights


@dataclass
class ExampleStep:
    """A reference training step: ``step()`` runs zero_grad, forward, loss, backward and the
    optimizer's update on the example batch ``x`` (labels ``y``, or None for the loss
    ``mean(out ** 2)``) and returns the loss. ``ember.function(example.step)`` captures it."""

    name: str
    model: nn.Module
    optimizer: object
    x: Tensor
    y: Tensor | None
    step: Callable[[], Tensor]

    def loss(self, out):
        return (out * out).mean() if self.y is None else F.cross_entropy(out, self.y)


def example_step(name: str, batch: int | None = None, seed: int = 0) -> ExampleStep:
    """The reference training step of built-in model ``name`` (one of `EXAMPLE_STEPS`), with
    weights and data drawn from ``seed``:

    * ``mlp``: batch 128 of 784 features, 784-512-512-10, cross-entropy, SGD;
    * ``cnn``: batch 64 of 1x28x28 images, the CNN above, cross-entropy, SGD with momentum 0.9;
    * ``gpt``: batch 8 of 128 tokens of width 256, `GPTBlock` (4 heads, MLP 1024), loss
      ``mean(out ** 2)``, AdamW;
    * ``resnet``: batch 16 of 64x16x16 feature maps, `BasicBlock`, loss ``mean(out ** 2)``,
      SGD with momentum 0.9.
    """
    from . import random as ember_random

    rng = np.random.default_rng(seed)
    ember_random.manual_seed(seed)
    if name == "mlp":
        batch = batch or 128
        model, shape, classes = mlp(784, 512, 10), (batch, 784), 10
    elif name == "cnn":
        batch = batch or 64
        model, shape, classes = cnn(1, 28, 10), (batch, 1, 28, 28), 10
    elif name == "gpt":
        batch = batch or 8
        model, shape, classes = GPTBlock(), (batch, 128, 256), None
    elif name == "resnet":
        batch = batch or 16
        model, shape, classes = BasicBlock(64, 64), (batch, 64, 16, 16), None
    else:
        raise ValueError(f"unknown example step {name!r}; choose one of {', '.join(EXAMPLE_STEPS)}")
    x = Tensor(rng.standard_normal(shape).astype(np.float32))
    y = None if classes is None else Tensor(rng.integers(0, classes, batch))
    if name == "gpt":
        optimizer = AdamW(model.parameters(), lr=1e-3)
    else:
        optimizer = SGD(model.parameters(), lr=0.01, momentum=0.0 if name == "mlp" else 0.9)
    example = ExampleStep(name, model, optimizer, x, y, step=None)

    def step():
        optimizer.zero_grad()
        loss = example.loss(model(x))
        loss.backward()
        optimizer.step()
        return loss

    example.step = step
    return example
