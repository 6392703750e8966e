"""Conformance samples for the primitives of ops/torchnames_math.py (gcd, lcm, nextafter and
frexp's exponent); no gradients but nextafter's (the others' results are integers)."""

import numpy as np

import ember

from .harness import Sample, rng

r = rng(2113)
A = r.integers(-60, 60, (3, 4)).astype(np.int64)
B = r.integers(-60, 60, (4,)).astype(np.int64)
X = r.standard_normal((3, 4))
Y = np.array([np.inf, -np.inf, 0.0, 1.0])


def _torch(name):
    return lambda *a: getattr(__import__("torch"), name)(*a)


SAMPLES = [
    Sample("gcd", ember.gcd, (A, B), grad=False, torch_fn=_torch("gcd")),
    Sample("lcm", ember.lcm, (A, B), grad=False, torch_fn=_torch("lcm")),
    Sample("nextafter", ember.nextafter, (X, Y), torch_fn=_torch("nextafter")),
    Sample(
        "frexp_exponent",
        lambda x: ember.frexp(x).exponent,
        (np.array([0.0, 1e-310, -3.5, 1024.0, np.inf, np.nan]),),
        grad=False,
        torch_fn=lambda x: __import__("torch").frexp(x).exponent,
    ),
]
SAMPLES += [
    Sample(
        "unique_consecutive",
        lambda x: ember.unique_consecutive(x, True, True),
        (np.array([1.0, 1.0, 2.0, 3.0, 3.0, 1.0]),),
        grad=False,
        torch_fn=lambda x: __import__("torch").unique_consecutive(x, True, True),
    ),
    Sample(
        "histogram",
        lambda x: ember.histogram(x, 4),
        (X,),
        grad=False,
        torch_fn=lambda x: __import__("torch").histogram(x, 4),
    ),
]


def _flat_histogramdd(lib):
    def call(x):
        hist, edges = lib.histogramdd(x, [3, 2])
        return (hist, *edges)

    return call


SAMPLES += [
    Sample(
        "histogramdd",
        _flat_histogramdd(ember),
        (r.standard_normal((10, 2)),),
        grad=False,
        torch_fn=lambda x: _flat_histogramdd(__import__("torch"))(x),
    ),
]
