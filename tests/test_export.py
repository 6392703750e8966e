"""ember.export (PyTorch's torch.export): a module's forward captured at a signature with
dynamic sizes, its module() checked against eager, the signature enforced, save/load."""

import io

import numpy as np
import pytest

import ember
from ember import nn
from ember.errors import ArgumentError, ShapeError
from ember.export import Dim, export


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.bn, self.l2 = nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2)

    def forward(self, x, y):
        return self.l2(ember.relu(self.bn(self.l1(x)))) + y.sum(-1, keepdim=True)


def _net():
    ember.manual_seed(0)
    return Net().eval()


def test_a_dynamic_batch_runs_every_size_in_its_range_and_checks_the_rest():
    m = _net()
    x, y = ember.randn(3, 4), ember.randn(3, 5)
    batch = Dim("batch", min=1, max=64)
    ep = export(m, (x, y), dynamic_shapes={"x": {0: batch}, "y": {0: batch}})
    assert ep.range_constraints == {"batch": (1, 64)}
    assert "f32[batch, 4]" in str(ep.graph)
    sig = ep.graph_signature
    assert sig.user_inputs == ["x", "y"] and "l1.weight" in sig.parameters
    assert "bn.running_mean" in sig.buffers
    assert ep.run_decompositions() is ep
    run = ep.module()
    for n in (1, 7, 64):
        a, b = ember.randn(n, 4), ember.randn(n, 5)
        np.testing.assert_allclose(
            run(a, b).detach().numpy(), m(a, b).detach().numpy(), rtol=1e-6, atol=1e-7
        )
    with pytest.raises(ShapeError, match=r"x.shape\[1\] to be equal to 4"):
        run(ember.randn(5, 3), ember.randn(5, 5))
    with pytest.raises(ShapeError, match="batch is 7 in one input and 6"):
        run(ember.randn(7, 4), ember.randn(6, 5))
    with pytest.raises(ShapeError, match=r"in \[1, 64\], but got 65"):
        run(ember.randn(65, 4), ember.randn(65, 5))
    with pytest.raises(RuntimeError, match="module()"):
        ep(x, y)


def test_the_program_is_a_snapshot_and_its_module_trains():
    m = _net()
    x, y = ember.randn(3, 4), ember.randn(3, 5)
    ep = export(m, (x,), {"y": y})  # (keywords bound by the forward's names)
    want = m(x, y).detach().numpy()
    with ember.no_grad():
        m.l2.bias.add_(1.0)  # the original changes; the exported program does not
    run = ep.module()
    np.testing.assert_allclose(run(x, y=y).detach().numpy(), want, rtol=1e-6)
    run.train()
    opt = ember.optim.SGD(run.parameters(), lr=0.1)
    before = run(x, y).square().mean()
    before.backward()
    opt.step()
    assert float(run(x, y).square().mean()) < float(before)


def test_auto_sizes_tied_to_constants_become_static_and_bad_specs_are_named():
    m = _net()
    x, y = ember.randn(3, 4), ember.randn(3, 5)
    ep = export(m, (x, y), dynamic_shapes=((Dim.AUTO, None), None))  # x's batch meets y's 3
    assert ep.range_constraints == {}
    with pytest.raises(ShapeError):  # a dynamic size that cannot be: refused, not specialized
        export(m, (x, y), dynamic_shapes=((Dim.DYNAMIC, None), None))
    with pytest.raises(ArgumentError, match="not arguments"):
        export(m, (x, y), dynamic_shapes={"z": {0: Dim("b")}})
    with pytest.raises(ArgumentError, match="tuple"):
        export(m, [x, y])
    with pytest.raises(ShapeError, match="outside"):
        export(m, (x, y), dynamic_shapes={"x": {0: Dim("b", min=4)}, "y": None})


def test_save_and_load_round_trip_through_onnx():
    pytest.importorskip("onnx")
    m = _net()
    x, y = ember.randn(3, 4), ember.randn(3, 5)
    batch = Dim("batch")
    ep = export(m, (x, y), dynamic_shapes={"x": {0: batch}, "y": {0: batch}})
    stream = io.BytesIO()
    ember.export.save(ep, stream)
    stream.seek(0)
    loaded = ember.export.load(stream)
    assert "batch" in loaded.range_constraints
    a, b = ember.randn(9, 4), ember.randn(9, 5)
    np.testing.assert_allclose(
        loaded.module()(a, b).detach().numpy(), m(a, b).detach().numpy(), rtol=1e-5, atol=1e-6
    )
    with pytest.raises(ember.errors.EmberError, match="pt2 archive"):
        ember.export.load(io.BytesIO(b"PK\x03\x04 not ours"))
