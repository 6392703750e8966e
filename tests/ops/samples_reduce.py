"""Conformance samples for ops/reduce.py."""

import numpy as np

import ember

from .harness import Sample, rng

r = rng(2)
A = r.standard_normal((3, 4, 5))
T = __import__("importlib").import_module


def torch():
    return T("torch")


SAMPLES = []
for dims, keep in [(None, False), (1, False), ((0, 2), True), (-1, True)]:
    tag = f"{dims}-{keep}"
    tdims = dims if dims is not None else tuple(range(3))
    SAMPLES += [
        Sample(
            f"sum/{tag}",
            lambda a, d=dims, k=keep: ember.sum(a, d, keepdim=k),
            (A,),
            torch_fn=lambda a, d=tdims, k=keep: torch().sum(a, d, keepdim=k),
        ),
        Sample(
            f"mean/{tag}",
            lambda a, d=dims, k=keep: a.mean(d, keepdim=k),
            (A,),
            torch_fn=lambda a, d=tdims, k=keep: a.mean(d, keepdim=k),
        ),
        Sample(
            f"amax/{tag}",
            lambda a, d=dims, k=keep: ember.amax(a, d, keepdim=k),
            (A,),
            torch_fn=lambda a, d=tdims, k=keep: torch().amax(a, d, keepdim=k),
        ),
        Sample(
            f"amin/{tag}",
            lambda a, d=dims, k=keep: ember.amin(a, d, keepdim=k),
            (A,),
            torch_fn=lambda a, d=tdims, k=keep: torch().amin(a, d, keepdim=k),
        ),
        Sample(
            f"prod/{tag}",
            lambda a, d=dims, k=keep: (
                ember.prod(a, d, keepdim=k)
                if d is None or isinstance(d, int)
                else ember.prod(a, d, keepdim=k)
            ),
            (A,),
        ),
        Sample(
            f"var/{tag}",
            lambda a, d=dims, k=keep: ember.var(a, d, keepdim=k),
            (A,),
            torch_fn=lambda a, d=tdims, k=keep: torch().var(a, d, keepdim=k),
        ),
        Sample(
            f"std/{tag}",
            lambda a, d=dims, k=keep: ember.std(a, d, keepdim=k, correction=0),
            (A,),
            torch_fn=lambda a, d=tdims, k=keep: torch().std(a, d, keepdim=k, correction=0),
        ),
        Sample(
            f"logsumexp/{tag}",
            lambda a, d=dims, k=keep: ember.logsumexp(a, d, keepdim=k),
            (A,),
            torch_fn=lambda a, d=tdims, k=keep: torch().logsumexp(a, d, keepdim=k),
        ),
    ]

WITH_ZEROS = np.array([[1.5, 0.0, 2.0], [0.0, 0.0, 3.0], [1.0, -2.0, 0.5]])
TIES = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
SAMPLES += [
    Sample(
        "prod/zeros",
        lambda a: ember.prod(a, 1),
        (WITH_ZEROS,),
        torch_fn=lambda a: torch().prod(a, 1),
    ),
    Sample(
        "prod/int",
        lambda a: ember.prod(a),
        (np.array([2, 3, 4]),),
        grad=False,
        torch_fn=lambda a: torch().prod(a),
    ),
    Sample(
        "amax/ties", lambda a: ember.amax(a, 1), (TIES,), torch_fn=lambda a: a.amax(1), fd=False
    ),
    Sample(
        "max/dim",
        lambda a: tuple(ember.max(a, 1)),
        (A,),
        torch_fn=lambda a: tuple(torch().max(a, 1)),
    ),
    Sample(
        "min/dim-keep",
        lambda a: tuple(ember.min(a, -1, keepdim=True)),
        (A,),
        torch_fn=lambda a: tuple(torch().min(a, -1, keepdim=True)),
    ),
    Sample("max/all", lambda a: a.max(), (A,), torch_fn=lambda a: a.max()),
    Sample("min/all", lambda a: ember.min(a), (A,), torch_fn=lambda a: torch().min(a)),
    # (max()'s gradient shared by the ties, or by the NaNs where there is one: PyTorch's
    # evenly_distribute_backward; amax's is NaN there)
    Sample("max/all-ties", lambda a: a.max(), (TIES,), torch_fn=lambda a: a.max(), fd=False),
    Sample(
        "min/all-nan",
        lambda a: a.min(),
        (np.array([[1.0, np.nan, 3.0], [np.nan, 2.0, 0.0]]),),
        torch_fn=lambda a: a.min(),
        fd=False,
    ),
    Sample(
        "argmax",
        lambda a: (ember.argmax(a), ember.argmax(a, 1), ember.argmax(a, -1, keepdim=True)),
        (A,),
        grad=False,
        torch_fn=lambda a: (
            torch().argmax(a),
            torch().argmax(a, 1),
            torch().argmax(a, -1, keepdim=True),
        ),
    ),
    Sample(
        "argmin",
        lambda a: (ember.argmin(a), ember.argmin(a, 0)),
        (A,),
        grad=False,
        torch_fn=lambda a: (torch().argmin(a), torch().argmin(a, 0)),
    ),
    Sample(
        "all/any",
        lambda a: (ember.all(a > -1), ember.any(a > 2, 1), ember.all(a > -3, (0, 2), keepdim=True)),
        (A,),
        grad=False,
        torch_fn=lambda a: (
            (a > -1).all(),
            (a > 2).any(1),
            torch().all(a > -3, 2, keepdim=True).all(0, keepdim=True),
        ),
    ),
    Sample(
        "sum/int",
        lambda a: ember.sum(a, 0),
        (np.arange(12).reshape(3, 4),),
        grad=False,
        torch_fn=lambda a: torch().sum(a, 0),
    ),
    Sample("cumsum", lambda a: ember.cumsum(a, 1), (A,), torch_fn=lambda a: torch().cumsum(a, 1)),
    Sample("cumsum/neg", lambda a: a.cumsum(-1), (A,), torch_fn=lambda a: a.cumsum(-1)),
    Sample(
        "logcumsumexp",
        lambda a: (ember.logcumsumexp(a, 1), a.logcumsumexp(0)),
        (A,),
        torch_fn=lambda a: (torch().logcumsumexp(a, 1), a.logcumsumexp(0)),
    ),
    Sample(
        "logcumsumexp/-inf",
        lambda a: ember.logcumsumexp(a, 0),
        (np.array([[-np.inf, 0.5], [-np.inf, -np.inf], [2.0, -1.0]]),),
        grad=False,
        torch_fn=lambda a: torch().logcumsumexp(a, 0),
    ),
    Sample(
        "logsumexp/-inf",
        lambda a: ember.logsumexp(a, 1),
        (np.array([[0.0, -np.inf], [1.0, 2.0]]),),
        grad=False,
        torch_fn=lambda a: torch().logsumexp(a, 1),
    ),
    Sample(
        "sum_to",
        lambda a: ember.sum_to(a, (4, 1)),
        (A,),
        torch_fn=lambda a: a.sum(0).sum(-1, keepdim=True),
    ),
]
