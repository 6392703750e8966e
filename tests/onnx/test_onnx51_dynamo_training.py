"""Fine-tuning models written by PyTorch's dynamo exporter: ``ember.onnx.load(path,
trainable=True)`` trains what PyTorch trains. That exporter writes the program's own constants
as initializers too (a masked_fill value, a pow exponent, an epsilon, arange's start and step,
a folded affine_grid base grid, frequencies times positions); before onnx51 those became
Parameters, so SGD moved them: a Range's start moved and the rotary table grew a row (a
broadcast error on the second step), NaNs came from training a pow's exponent, and a
masked_fill value drifted. Its signature metadata says what each initializer was
(onnx/_export_roles.py). Here the parameter count equals PyTorch's and three SGD steps follow
PyTorch's losses, for unoptimized files and for optimized ones whose optimizer folded
transposed weights (a fold of BatchNorm into a convolution changes what trains, so those
are left out). A tied weight (a LLaMA's head sharing the embedding) that the optimizer folded
into a transposed copy is computed from the embedding on each call, not trained apart."""

from __future__ import annotations

import contextlib
import functools
import io
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript")

from ..on_demand import OnDemand  # noqa: E402
from . import _torch_zoo51 as zoo  # noqa: E402

CASES = [
    ("bert", 23, True),  # (opset 23's Attention with a padding mask)
    ("llama", 20, True),
    ("selections", 20, True),
    ("resample", 20, True),
    ("resnet", 18, False),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    # (each case at its first test: tests/on_demand.py)
    return OnDemand(functools.partial(zoo.export_case, tmp_path_factory.mktemp("dynamo_training")))


def _loss(outputs):
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    return sum((o.float() ** 2).mean() for o in outputs)


@pytest.mark.parametrize("name, opset, optimize", CASES)
def test_fine_tuning_follows_pytorch(files, name, opset, optimize):
    model, path = files[name, opset, optimize]
    model = zoo.build(name)  # (fresh: the fixture's copy is shared)
    imported = ember.onnx.load(str(path), trainable=True)
    assert sum(p.numel() for p in imported.parameters()) == sum(
        p.numel() for p in model.parameters()
    )
    feed = zoo.inputs(name, 3, 7)
    ours = ember.optim.SGD(imported.parameters(), lr=0.05)
    theirs = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(3):
        loss = _loss(model(*[torch.tensor(a) for a in feed]))
        theirs.zero_grad()
        loss.backward()
        theirs.step()
        ember_loss = _loss(imported(*[ember.tensor(a) for a in feed]))
        ours.zero_grad()
        ember_loss.backward()
        ours.step()
        assert float(ember_loss.detach().numpy()) == pytest.approx(
            float(loss.detach()), rel=2e-5, abs=1e-6
        )


def test_unoptimized_files_train_the_models_own_parameters(files):
    """In an unoptimized file the initializers keep PyTorch's names: the parameters are
    exactly the model's, the BatchNorm statistics buffers, the scalars constants."""
    model, path = files["resnet", 18, False]
    imported = ember.onnx.load(str(path), trainable=True)
    names = {n.replace(".", "_") for n, _ in model.named_parameters()}
    assert {n for n, _ in imported.named_parameters()} == names
    statistics = {n.replace(".", "_") for n, _ in model.named_buffers() if "running" in n}
    assert statistics <= {n for n, _ in imported.named_buffers()}


def test_the_program_constants_stay_constants(files):
    """The optimized selections model: masked_fill's -1, where's 0.1 and the transposed
    weight's fold; only the weight and the bias train."""
    _, path = files["selections", 20, True]
    imported = ember.onnx.load(str(path), trainable=True)
    shapes = sorted(tuple(p.shape) for p in imported.parameters())
    assert shapes == [(10,), (10, 10)]
    x, mask = zoo.inputs("selections", 2, 5)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x, "mask": mask})
    for got, w in zip(imported(x, mask), want):
        np.testing.assert_allclose(got.detach().numpy(), w, rtol=2e-5, atol=1e-6)


def test_a_tied_weight_stays_tied(tmp_path):
    model = zoo.build("llama")
    model.lm.weight = model.embed.weight
    path = tmp_path / "tied.onnx"
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            tuple(torch.tensor(a) for a in zoo.inputs("llama", 2, 6)),
            str(path),
            dynamo=True,
            dynamic_shapes=zoo.dynamic_shapes("llama"),
        )
    imported = ember.onnx.load(str(path), trainable=True)
    assert sum(p.numel() for p in imported.parameters()) == sum(
        p.numel() for p in model.parameters()
    )
    feed = zoo.inputs("llama", 3, 7)
    ours = ember.optim.SGD(imported.parameters(), lr=0.05)
    theirs = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(3):
        loss = _loss(model(*[torch.tensor(a) for a in feed]))
        theirs.zero_grad()
        loss.backward()
        theirs.step()
        ember_loss = _loss(imported(*feed))
        ours.zero_grad()
        ember_loss.backward()
        ours.step()
        assert float(ember_loss.detach().numpy()) == pytest.approx(
            float(loss.detach()), rel=2e-5, abs=1e-6
        )
