"""Built-in models used by `ember train`, the benchmarks and the tests.

* ``mlp``: flatten - Linear(in, 512) - ReLU - Linear(512, 512) - ReLU - Linear(512, classes)
* ``cnn``: conv3x3(32, padding 1) - ReLU - maxpool2 - conv3x3(64, padding 1) - ReLU - maxpool2
  - flatten - Linear(128) - ReLU - Linear(classes); the first Linear's input size follows from the
  image size (8x8 digits: 64*2*2; 28x28 Fashion-MNIST: 64*7*7).
"""

from __future__ import annotations

from . import nn

MODEL_NAMES = ("mlp", "cnn")


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
