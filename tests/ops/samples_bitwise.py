"""Conformance samples for ops/bitwise.py (integer and bool operands; no gradients)."""

import numpy as np

import ember

from .harness import Sample, rng

r = rng(21)
X = r.integers(-100, 100, (3, 4)).astype(np.int32)
Y = r.integers(-100, 100, (4,)).astype(np.int32)
SHIFT = np.array([-1, 0, 3, 31, 32, 40], np.int64)
VALUE = np.array([[-7], [12345]], np.int64)
BOOLS = (r.standard_normal((3, 4)) > 0, r.standard_normal((4,)) > 0)


def _torch(name):
    return lambda *a: getattr(__import__("torch"), name)(*a)


def _ember(name):
    return lambda *a: getattr(ember, name)(*a)


SAMPLES = []
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    SAMPLES.append(Sample(_name, _ember(_name), (X, Y), grad=False, torch_fn=_torch(_name)))
    SAMPLES.append(
        Sample(f"{_name} bool", _ember(_name), BOOLS, grad=False, torch_fn=_torch(_name))
    )
for _name in ("bitwise_left_shift", "bitwise_right_shift"):
    SAMPLES.append(Sample(_name, _ember(_name), (VALUE, SHIFT), grad=False, torch_fn=_torch(_name)))
    SAMPLES.append(
        Sample(
            f"{_name} uint8",
            _ember(_name),
            (np.array([1, 129, 255], np.uint8), np.array([1, 7, 8], np.uint8)),
            grad=False,
            torch_fn=_torch(_name),
        )
    )
SAMPLES.append(
    Sample("bitwise_not", _ember("bitwise_not"), (X,), grad=False, torch_fn=_torch("bitwise_not"))
)
SAMPLES.append(
    Sample(
        "bitwise_not bool",
        _ember("bitwise_not"),
        BOOLS[:1],
        grad=False,
        torch_fn=_torch("bitwise_not"),
    )
)
