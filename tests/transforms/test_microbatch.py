"""transforms/microbatch.py: a step's batch run in slices gives the unsplit step's results."""

import numpy as np
import pytest

import ember
from ember.capture.call import ArgFeed, TensorFeed
from ember.graph import interpreter
from ember.models import example_step
from ember.transforms.microbatch import NotBatchable, batch_inputs, split_batch
from ember.transforms.pipeline import optimize, passes_for
from ember.transforms.remat import split_late


def _program(fn, *args, opt_level=3):
    """The compiled program of ``fn`` whose graph is what a memory budget splits: the passes
    of ``opt_level`` before rematerialization and fusion (transforms/remat.py `split_late`)."""
    program = ember.function(fn, opt_level=0).compile(*args)
    if opt_level:
        early, _ = split_late(passes_for(opt_level))
        program.graph, _ = optimize(program.graph.copy(), passes=early)
    arrays = [f.tensor._data if isinstance(f, TensorFeed) else None for f in program.feeds]
    return program, arrays


def _run_both(program, arrays, k):
    graph = program.graph
    split = split_batch(graph, k, batch_inputs(graph, program.memory_parts().input_parts))
    split.verify()
    return interpreter.run(graph, arrays), interpreter.run(split, arrays), split


@pytest.mark.parametrize(
    "name, opt_level, k",
    [("gpt", 0, 2), ("gpt", 3, 2), ("gpt", 3, 4), ("mlp", 3, 4), ("cnn", 3, 2)],
)
def test_a_training_step_in_slices_equals_the_whole_batch(name, opt_level, k):
    example = example_step(name)
    example.step()
    program, arrays = _program(example.step, opt_level=opt_level)
    want, got, split = _run_both(program, arrays, k)
    assert len(split.nodes) > len(program.graph.nodes)
    # the slices' values have 1/k of the batch
    batch = example.x.shape[0]
    rows = {v.shape[0] for n in split.nodes if n.op is not None for v in n.outputs if v.shape}
    assert batch // k in rows
    for w, g in zip(want, got):  # loss, new parameters, optimizer state, gradients
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)


def test_per_sample_outputs_are_joined_and_sums_over_the_batch_added():
    w = ember.tensor(np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32))

    def f(x):
        y = ember.relu(x @ w)
        return y, y.sum(), (x * x).sum(0)

    x = ember.tensor(np.random.default_rng(1).standard_normal((8, 5)).astype(np.float32))
    program, arrays = _program(f, x)
    arrays = [a if a is not None else x.numpy() for a in arrays]
    graph = program.graph
    position = next(i for i, f in enumerate(program.feeds) if isinstance(f, ArgFeed))
    split = split_batch(graph, 4, [position])
    for want, got in zip(interpreter.run(graph, arrays), interpreter.run(split, arrays)):
        assert want.shape == got.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "fn, says",
    [
        (lambda x: (x - x.sum(0) / 8).sum(), "computed from the whole batch"),
        (lambda x: ember.softmax(x, 0).sum(), "works along the batch axis"),
        (lambda x: x.permute(1, 0).reshape(40).sum(), "inside a dimension"),
    ],
    ids=["batch statistic", "softmax over the batch", "batch merged into a later axis"],
)
def test_what_mixes_samples_is_refused_naming_the_node(fn, says):
    x = ember.tensor(np.ones((8, 5), np.float32))
    program, _ = _program(fn, x, opt_level=0)
    position = next(i for i, f in enumerate(program.feeds) if isinstance(f, ArgFeed))
    with pytest.raises(NotBatchable, match=says):
        split_batch(program.graph, 2, [position])


def test_batch_normalization_is_refused():
    # the ResNet block normalizes by statistics of the whole batch
    example = example_step("resnet")
    example.step()
    program, _ = _program(example.step)
    with pytest.raises(NotBatchable, match="computed from the whole batch"):
        split_batch(
            program.graph, 2, batch_inputs(program.graph, program.memory_parts().input_parts)
        )


def test_a_batch_that_does_not_divide_is_refused():
    x = ember.tensor(np.ones((6, 5), np.float32))
    program, _ = _program(lambda x: (x * 2).sum(), x)
    with pytest.raises(NotBatchable, match="does not divide into 4"):
        split_batch(program.graph, 4, [0])


def test_every_region_around_a_batch_norm_step_runs_in_slices_exactly():
    # batch normalization refuses slices of the whole step; regions of it (transforms/remat.py
    # grows one around each per-sample node) run in slices with the same results
    from ember.transforms.dce import eliminate_dead_code
    from ember.transforms.microbatch import batch_axes, grow_region, tile_region
    from ember.transforms.remat import _tile_seeds

    nn = ember.nn
    ember.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Conv2d(4, 6, 3, padding=1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(6, 3),
    ).double()  # (Adam turns rounding noise in a near-zero gradient into lr-sized steps)
    opt = ember.optim.Adam(model.parameters(), lr=0.01)
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((8, 3, 6, 6)), dtype=ember.float64)
    y = ember.tensor(rng.integers(0, 3, 8))

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step(x, y)
    program, arrays = _program(step, x, y)
    leaves = [x, y]
    arrays = [a if a is not None else leaves[f.index]._data for a, f in zip(arrays, program.feeds)]
    graph = program.graph
    batch = batch_inputs(graph, program.memory_parts().input_parts)
    with pytest.raises(NotBatchable):
        split_batch(graph, 2, batch)
    want = interpreter.run(graph, arrays)
    tried = set()
    for k in (2, 4):
        axes, _, rules = batch_axes(graph, batch, k)
        for seed in _tile_seeds(graph, axes, rules):
            region = grow_region(graph, seed, axes, rules)
            if (frozenset(region[0]), k) in tried:
                continue
            tried.add((frozenset(region[0]), k))
            tiled, _ = eliminate_dead_code(tile_region(graph, region, k, axes, rules))
            tiled.verify()
            got = interpreter.run(tiled, arrays)
            for w, g in zip(want, got):
                np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12, err_msg=seed.name)
    assert len(tried) > 10
