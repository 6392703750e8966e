"""nn.LSTM / nn.GRU on kernels/crnn.py's whole-layer C loop against torch.nn.LSTM / nn.GRU at
sizes where the loop's blocking matters (hidden sizes of several blocks of units with a partial
last one, batches above and below the micro-kernel's row tile, a single step), each way the loop
runs: as the pool's rule decides, every step shared by two threads, one thread, and one C call
per step (the products on ember's GEMM). Outputs, h_n, c_n and every gradient (input, initial
states, each parameter), float32 and float64, 1-3 layers, both directions, both batch layouts,
initial states given or not."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ember import nn
from ember.kernels import ccompile, cpool, crnn

from .compare import compare_module, torch

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

tnn = torch.nn
r = np.random.default_rng(2020)

# kind, layers, bidirectional, batch_first, initial states given, dtype, (steps, batch, hidden)
GRID = [
    case
    for case in itertools.product(
        ("LSTM", "GRU"),
        (1, 2, 3),
        (False, True),
        (False, True),
        (False, True),
        (np.float32, np.float64),
        ((7, 3, 70), (1, 11, 130), (4, 9, 50)),
    )
    # a slice of the grid that still varies every factor against every other one
    if (case[1] + case[2] + case[3] + case[4] + (case[5] is np.float64)) % 2 == 0
][::7]


def _case_id(case) -> str:
    kind, layers, bidir, first, h0, dtype, (steps, batch, hidden) = case
    flags = ["bidir"] * bidir + ["batch_first"] * first + ["h0"] * h0
    sizes = f"T{steps}B{batch}H{hidden}"
    return "-".join([kind, f"{layers}layer", *flags, np.dtype(dtype).name, sizes])


@pytest.fixture(params=["auto", "threads", "one-thread", "stepwise"])
def path(request, monkeypatch):
    if request.param == "threads":
        monkeypatch.setattr(crnn, "_parts", lambda rows, k, n, itemsize, blocks: min(2, blocks))
        monkeypatch.setattr(crnn._Split, "parts", lambda self, shape, shared: shared)
    elif request.param == "stepwise":
        monkeypatch.setattr(crnn, "_packed_functions", lambda dtype: None)
    elif request.param == "one-thread":
        threads = cpool.get_num_threads()
        cpool.set_num_threads(1)
        request.addfinalizer(lambda: cpool.set_num_threads(threads))
    return request.param


def _tolerance(dtype, steps: int, hidden: int, layers: int) -> dict:
    """A few roundings per term of the longest chain of sums, a step's product (4H terms)
    carried through every step and layer, relative to each tensor's scale: k * eps *
    sqrt(terms)."""
    eps = float(np.finfo(dtype).eps)
    terms = 4 * hidden * steps * layers
    return {"rtol": 4 * eps * np.sqrt(terms), "atol": 4 * eps * np.sqrt(terms)}


@pytest.mark.parametrize("case", GRID, ids=_case_id)
def test_layer_matches_torch(case, path):
    kind, layers, bidir, first, h0, dtype, (steps, batch, hidden) = case
    size = 6
    x = r.standard_normal((batch, steps, size) if first else (steps, batch, size))
    states = []
    if h0:
        shape = (layers * (2 if bidir else 1), batch, hidden)
        states = [r.standard_normal(shape) * 0.5 for _ in range(2 if kind == "LSTM" else 1)]

    def make(lib):
        return getattr(lib, kind)(
            size, hidden, num_layers=layers, bidirectional=bidir, batch_first=first
        )

    def call(module, x, *states):
        if not states:
            return module(x)
        return module(x, tuple(states) if kind == "LSTM" else states[0])

    compare_module(
        make(nn),
        make(tnn),
        [x, *states],
        dtype=dtype,
        call=call,
        tol=_tolerance(dtype, steps, hidden, layers),
    )
