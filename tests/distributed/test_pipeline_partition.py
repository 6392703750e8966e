"""The pipeline partitioner in one process (no MPI): stages cover every op once in execution
order, the values crossing each cut are exactly those a later stage reads, the cost model's cuts
are the best by brute force, module split points fall where the module starts, what cannot be
pipelined is refused, and the stages' forward and backward programs, chained in this process as
the schedules chain them across ranks, give eager autograd's loss and gradients."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ember
from ember import nn, zoo
from ember.distributed.pipelining import PartitionError, SplitPoint, pipeline
from ember.distributed.pipelining.partition import nbytes
from ember.graph import scope


def _model(name):
    ember.manual_seed(0)
    sizes = zoo.SPECS[name].test_sizes
    x, _ = zoo.inputs(name, 2, **sizes)
    return zoo.build(name, ember, **sizes), ember.tensor(x)


def _stage_of(part):
    """call position -> stage, checking the stages are contiguous and cover every op once."""
    calls = list(part.captured.graph.call_nodes())
    flat = [p for st in part.stages for p in st.nodes]
    assert flat == list(range(len(calls)))
    assert all(st.nodes for st in part.stages)
    return {id(calls[p]): st.index for st in part.stages for p in st.nodes}


def _expected_cuts(part):
    """Each cut's values, found from the nodes' stages: made at or before the cut (the batch
    arguments by stage 0) and read after it (the graph's outputs by the last stage)."""
    g, s = part.captured.graph, part.num_stages
    stage = _stage_of(part)
    made = {id(v): 0 for v in g.inputs[: part.captured.n_args]}
    read: dict = {}
    for n in g.call_nodes():
        made.update((id(v), stage[id(n)]) for v in n.outputs)
        for v in n.inputs:
            read.setdefault(id(v), set()).add(stage[id(n)])
    for v in g.outputs:
        read.setdefault(id(v), set()).add(s - 1)
    return [{k for k in made if made[k] <= c < max(read.get(k, {-1}))} for c in range(s - 1)]


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer", "gpt"])
@pytest.mark.parametrize("stages", [2, 3])
def test_cost_model_partition(name, stages):
    model, x = _model(name)
    part = pipeline(model, (x,), num_stages=stages, link_bandwidth=1e30).partition
    assert part.num_stages == stages
    assert [{id(v) for v in cut} for cut in part.cuts] == _expected_cuts(part)
    # with free links the cuts minimise the slowest stage: brute force over every cut
    from ember.distributed.pipelining.partition import predicted_times

    t = np.array(predicted_times(part.captured))
    prefix = np.concatenate([[0.0], np.cumsum(t)])
    best = min(
        max(prefix[b] - prefix[a] for a, b in zip((0, *cuts), (*cuts, len(t))))
        for cuts in itertools.combinations(range(1, len(t)), stages - 1)
    )
    slowest = max(st.seconds for st in part.stages)
    assert slowest == pytest.approx(best, rel=1e-9)
    assert slowest <= t.sum() / stages + t.max() * (1 + 1e-9)  # balanced within one op


def test_cut_bytes_pull_the_cut():
    # balance alone cuts through a 256-wide activation; over a slow link the cut moves to the
    # 4-wide one, leaving the stages unbalanced
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 256), nn.ReLU(), nn.Linear(256, 4), nn.Linear(4, 256),
                          nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256),
                          nn.ReLU(), nn.Linear(256, 8))  # fmt: skip
    x = ember.randn(64, 8)
    free = pipeline(model, (x,), num_stages=2, link_bandwidth=1e30).partition
    slow = pipeline(model, (x,), num_stages=2, link_bandwidth=1e6).partition
    assert free.cut_bytes()[0] == 64 * 256 * 4
    assert slow.cut_bytes()[0] == 64 * 4 * 4
    assert max(st.seconds for st in slow.stages) > max(st.seconds for st in free.stages)


def test_measured_costs():
    model, x = _model("cnn")
    part = pipeline(model, (x,), num_stages=2, cost="measured").partition
    _stage_of(part)
    assert all(st.seconds > 0 for st in part.stages)
    assert "measured times" in str(part)


def test_split_by_module_name():
    model, x = _model("cnn")
    part = pipeline(model, (x,), split_spec={"3": SplitPoint.BEGINNING}).partition
    calls = list(part.captured.graph.call_nodes())
    first = calls[part.stages[1].nodes[0]]
    assert scope.module_path(first.scope) == "Sequential.3"
    assert all(scope.module_path(calls[p].scope) < "Sequential.3" for p in part.stages[0].nodes)
    end = pipeline(model, (x,), split_spec={"3": SplitPoint.END}).partition
    last = calls[end.stages[0].nodes[-1]]
    assert scope.module_path(last.scope) == "Sequential.3"
    three = pipeline(
        model, (x,), split_spec={"3": SplitPoint.BEGINNING, "7": SplitPoint.BEGINNING}
    ).partition
    assert three.num_stages == 3
    assert [{id(v) for v in cut} for cut in three.cuts] == _expected_cuts(three)
    owned = [n for st in three.stages for n in st.params]
    assert sorted(owned) == list(range(len(part.captured.tensors)))  # each parameter once
    with pytest.raises(PartitionError, match="no op .* module 'Sequential.nope'"):
        pipeline(model, (x,), split_spec={"nope": SplitPoint.BEGINNING})
    with pytest.raises(PartitionError, match="leaves a stage with no ops"):
        pipeline(model, (x,), split_spec={"0": SplitPoint.BEGINNING})


def test_partition_print():
    model, x = _model("cnn")
    part = pipeline(model, (x,), split_spec={"3": SplitPoint.BEGINNING}).partition
    text = str(part)
    calls = list(part.captured.graph.call_nodes())
    for st in part.stages:
        assert f"stage {st.index}: {len(st.nodes)} ops" in text
    assert part.cut_bytes() == [sum(nbytes(v.type) for v in part.cuts[0])]
    assert part.cut_bytes() == [2 * 32 * 4 * 4 * 4]  # the first pooling's output
    weights = sum(p.detach().numpy().nbytes for p in model.parameters())
    assert sum(st.param_bytes for st in part.stages) == weights
    assert "conv x1" in text and len(calls) == 14


class _Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        return self.a(self.b(self.a(x)))


def test_refusals():
    with pytest.raises(PartitionError, match="parameter a.weight is read by stages 0, 1"):
        pipeline(_Tied(), (ember.randn(2, 4),), split_spec={"b": SplitPoint.BEGINNING})
    bn = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    with pytest.raises(PartitionError, match="in place"):
        pipeline(bn, (ember.randn(8, 4),), num_stages=2)
    with pytest.raises(PartitionError, match="give split_spec or num_stages"):
        pipeline(bn.eval(), (ember.randn(8, 4),))


def test_costs_count_the_backward():
    from ember.distributed.pipelining.partition import predicted_times
    from ember.runtime.parallel_cost import calibrate, estimate

    model, x = _model("mlp")
    captured = pipeline(model, (x,), num_stages=2).partition.captured
    calibration = calibrate()
    calls = list(captured.graph.call_nodes())
    forward = [estimate(n, calibration).seconds for n in calls]
    step = predicted_times(captured)
    # every op of the MLP is differentiated (each follows a parameter): its backward adds time
    assert all(s > f for s, f in zip(step, forward))


def _chained(pipe, loss_fn, x, y):
    """The stages' forward and backward programs run one after another in this process, each
    value handed from its producer to its readers as the schedules send it: the loss and the
    parameters' gradients (name -> array)."""
    from ember.types import TensorType

    stages = [pipe.build_stage(k) for k in range(pipe.num_stages)]
    target = (TensorType(tuple(y.shape), y.dtype),)
    sent, cotangent, kept, grads = {}, {}, {}, {}
    for st in stages:
        p = st.programs(loss_fn, target)
        joint = [x.numpy()] if st.is_first else []
        joint += [sent[mid] for mid, _, _ in st.recv_specs()] + st.state_arrays()
        joint += [y.numpy()] if st.is_last else []
        outs = p.forward(*[joint[i] for i in p.fwd_pos])
        if st.is_last:
            loss = outs[0]
        else:
            sent.update((mid, v) for (mid, _, _), v in zip(st.send_specs(), outs))
        kept[st.stage_index] = (joint, outs[p.n_out :])
    for st in reversed(stages):
        p = st.programs(loss_fn, target)
        joint, saved = kept[st.stage_index]
        if st.is_last:
            cots = [np.array(1.0, np.float32)]
        else:
            floats = [s for s in st.send_specs() if s[2].dtype.is_floating_point]
            cots = [cotangent[mid] for mid, _, _ in floats]
        full = joint + cots
        out = p.backward(*saved, *[full[i] for i in p.bwd_pos])
        received = [s for s in st.recv_specs() if s[2].dtype.is_floating_point]
        for (mid, _, _), g in zip(received, out):
            cotangent[mid] = cotangent.get(mid, 0) + g
        names = [n for n, _ in st.named_parameters()]
        grads.update(zip(names, out[len(received) :]))
    return float(loss), grads


@pytest.mark.parametrize(
    "name, spec",
    [
        ("mlp", None),
        ("cnn", None),
        (
            "transformer",
            {"layer.linear1": SplitPoint.BEGINNING, "layer.linear2": SplitPoint.BEGINNING},
        ),
        ("gpt", None),
    ],
)
def test_stage_programs_chained_equal_autograd(name, spec):
    # without MPI: the stages' programs, chained, give eager autograd's loss and gradients
    model, x = _model(name)
    _, y = zoo.inputs(name, 2, **zoo.SPECS[name].test_sizes)
    y = ember.tensor(y)

    def loss_fn(out, target):
        return zoo.loss(ember, out, target)

    pipe = pipeline(model, (x,), split_spec=spec) if spec else pipeline(model, (x,), num_stages=3)
    loss, grads = _chained(pipe, loss_fn, x, y)
    expected = loss_fn(model(x), y)
    expected.backward()
    assert loss == pytest.approx(float(expected.item()), rel=1e-5)
    assert set(grads) == {n for n, _ in model.named_parameters()}
    for n, p in model.named_parameters():
        np.testing.assert_allclose(grads[n], p.grad.numpy(), rtol=2e-5, atol=2e-6, err_msg=n)
