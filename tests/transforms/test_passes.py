"""The optimization passes (fold, simplify, cse, dce), their pipeline and levels, and the
differential check that names a pass which changes the results."""

import numpy as np
import pytest

import ember
from ember import models, nn
from ember.graph import interpreter
from ember.transforms import (
    CSE,
    DCE,
    FOLD,
    SIMPLIFY,
    Pass,
    PassCheckError,
    optimize,
    passes_for,
)

SPECIAL = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.5, -2.25, 1e-45], np.float32)


def _graph(fn, *examples):
    return ember.trace(fn, *examples, opt_level=0).graph


def _ops(graph) -> list[str]:
    return [n.op.name for n in graph.nodes if n.kind == "call"]


def _draws(graph) -> int:
    return sum(1 for n in graph.nodes if n.kind == "call" and n.op.kind == "random")


def _run_both(fn, *examples, passes=None, level=3):
    """Outputs of the captured graph and of its optimized copy on the examples."""
    graph = _graph(fn, *examples)
    arrays = [e.numpy() for e in examples]
    before = interpreter.run(graph, arrays)
    optimized, stats = optimize(graph.copy(), level, passes=passes, check=arrays)
    optimized.verify()
    return before, interpreter.run(optimized, arrays), optimized, stats


def _assert_bits_equal(a, b):
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(
            x.view(f"u{x.dtype.itemsize}"), y.view(f"u{y.dtype.itemsize}")
        )


# ------------------------------------------------------------------------------ dce


def test_dce_removes_unread_pure_nodes_but_keeps_inputs_and_random_draws():
    def f(x, unused):
        dead = (x * 3).exp()  # noqa: F841 - computed, never read
        ember.rand(3)  # a draw advances the generator: it stays
        return x + 1

    graph = _graph(f, ember.ones(3), ember.ones(3))
    optimized, changed = DCE.run(graph.copy())
    assert changed
    assert _ops(optimized).count("exp") == 0 and _draws(optimized) == 1
    assert [v.name for v in optimized.inputs] == ["x", "unused"]
    assert DCE.run(optimized)[1] is False  # nothing left to do


# ------------------------------------------------------------------------------ cse


def test_cse_merges_equal_calls_and_constants_but_not_signed_zeros_or_draws():
    def f(x):
        a = (x * 2.0).sin()
        b = (x * 2.0).sin()
        r1, r2 = ember.rand(3), ember.rand(3)
        return a + b, x + 0.0, x + (-0.0), r1 - r2

    x = ember.tensor(SPECIAL[:3])
    graph = _graph(f, x)
    optimized, _ = DCE.run(CSE.run(graph.copy())[0])
    ops = _ops(optimized)
    assert ops.count("sin") == 1 and ops.count("mul") == 1
    assert _draws(optimized) == 2  # two draws are two different numbers
    constants = [optimized.constants[n.name] for n in optimized.nodes if n.kind == "constant"]
    zeros = [c for c in constants if c.size == 1 and c == 0]
    assert sorted(np.signbit(z).item() for z in zeros) == [False, True]  # 0.0 and -0.0 kept apart


# ------------------------------------------------------------------------------ fold


def test_fold_computes_constant_chains_and_keeps_uniform_results_one_number():
    def f(x):
        k = ember.ones(64, 64) * 2.0 + 1.0  # uniform: folds to one number, broadcast
        table = ember.arange(6).reshape(2, 3).to(ember.float32) * 0.5  # folds to an array
        return x * k, x[:2, :3] + table

    x = ember.randn(64, 64)
    before, after, optimized, _ = _run_both(f, x)
    _assert_bits_equal(before, after)
    assert _ops(optimized) == ["mul", "index", "add"] or "arange" not in _ops(optimized)
    sizes = sorted(a.size for a in optimized.constants.values())
    assert sizes == [1, 6], sizes  # 3.0 as a 0-d constant, and the 2x3 table


def test_fold_leaves_large_results_and_random_draws_to_run_time():
    def f(x):
        return x + ember.zeros(512, 512).exp(), ember.rand(4) * 2

    graph = _graph(f, ember.ones(512, 512))
    optimized, _ = optimize(graph.copy(), passes=[FOLD, DCE])
    assert "exp" not in _ops(optimized)  # exp(0) is 1 everywhere: one number, broadcast
    assert _draws(optimized) == 1 and "mul" in _ops(optimized)
    big = ember.trace(lambda x: x + ember.arange(300000).to(ember.float32), ember.ones(300000))
    assert "cast" in _ops(optimize(big.graph.copy(), passes=[FOLD])[0])  # 300000 varied values


# ------------------------------------------------------------------------------ simplify


def test_exact_identities_go_and_inexact_ones_stay():
    def f(x):
        # each result goes through its own sin: a graph never returns one array twice
        results = (x * 1, 1 * x, x / 1, x - 0.0, x + (-0.0), x + 0.0, x**1)
        return tuple(r.sin() for r in results)

    x = ember.tensor(SPECIAL)
    before, after, optimized, _ = _run_both(f, x, passes=[SIMPLIFY, DCE])
    _assert_bits_equal(before, after)  # NaN, inf and -0.0 included
    # only x + 0.0 (which turns -0.0 into 0.0) and x ** 1 (pow declares no identity) remain
    assert sorted(op for op in _ops(optimized) if op != "sin") == ["add", "pow"]


def test_a_graph_never_returns_one_value_twice():
    graph = _graph(lambda x: (x * 1, x / 1), ember.ones(3))
    optimized, _ = optimize(graph.copy(), passes=[SIMPLIFY, DCE])
    assert len({id(v) for v in optimized.outputs}) == 2  # one identity went, the other stays
    f = ember.function(lambda x: (x * 1, x / 1))
    a, b = f(ember.ones(3))
    a.add_(1)
    np.testing.assert_array_equal(b.numpy(), np.ones(3))


def test_an_identity_that_would_broadcast_is_kept():
    def f(x):
        return x * ember.ones(4, 3)

    before, after, optimized, _ = _run_both(f, ember.randn(3), passes=[FOLD, SIMPLIFY, DCE])
    assert after[0].shape == (4, 3) and "mul" in _ops(optimized)
    _assert_bits_equal(before, after)


def test_chains_of_transposes_reshapes_casts_and_broadcasts_collapse():
    def f(x):
        a = x.permute(2, 0, 1).permute(1, 2, 0)  # the identity
        b = x.permute(1, 0, 2).permute(0, 2, 1)  # one permutation
        c = x.reshape(6, 4).reshape(4, 6).reshape(24)
        d = x.to(ember.float64).to(ember.float32)  # lossless, then back: nothing
        e = x.to(ember.float16).to(ember.float32)  # rounding: kept
        return a.exp(), b, c, d.sin(), e

    x = ember.randn(2, 3, 4)
    before, after, optimized, _ = _run_both(f, x, passes=[SIMPLIFY, DCE])
    _assert_bits_equal(before, after)
    kept = sorted(op for op in _ops(optimized) if op not in ("exp", "sin"))
    assert kept == ["cast", "cast", "permute", "reshape"]


def test_a_broadcast_scalar_feeds_elementwise_ops_directly():
    def f(x):
        return x * ember.tensor(2.0).broadcast_to(3, 4)

    before, after, optimized, _ = _run_both(f, ember.randn(3, 4), passes=[SIMPLIFY, DCE])
    _assert_bits_equal(before, after)
    assert _ops(optimized) == ["mul"]


# ------------------------------------------------------------------------------ pipeline


def test_levels_select_pipelines():
    assert passes_for(0) == [] and passes_for("O0") == []
    assert {p.name for p in passes_for(1)} == {"fold", "cse", "dce"}
    assert {p.name for p in passes_for("O2")} == {
        "fold", "fold_affine", "simplify", "scatter_masks", "widened_reads", "cse", "dce",
    }  # fmt: skip
    o3 = [p.name for p in passes_for(3)]
    assert o3 == [
        "unroll", "fold", "fold_affine", "fold_affine_inputs", "simplify", "patterns",
        "scatter_masks", "widened_reads", "cse", "dce", "fuse", "epilogue", "schedule",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="opt_level must be one of"):
        passes_for(7)
    with pytest.raises(ValueError, match="opt_level"):
        ember.function(lambda x: x, opt_level="fast")


def test_compile_returns_pass_statistics_without_running():
    model = nn.Linear(3, 2)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    weight = model.weight.detach().numpy().copy()

    @ember.function
    def step(x):
        opt.zero_grad()
        (model(x) ** 2).mean().backward()
        opt.step()

    program = step.compile(ember.ones(4, 3))
    np.testing.assert_array_equal(model.weight.detach().numpy(), weight)  # compiled, not run
    assert model.weight.grad is None
    names = [s.name for s in program.pass_stats]
    assert names[:10] == [
        "unroll", "fold", "fold_affine", "fold_affine_inputs", "simplify", "patterns",
        "scatter_masks", "widened_reads", "cse", "dce",
    ]  # fmt: skip
    # a training step's late passes run after the exact ones have settled and its casts were
    # recomputed (capture/compile.py, transforms/cheap_remat.py)
    late = names.index("fuse")
    assert "fuse" not in names[:10] and names[late + 1] == "epilogue"
    assert set(names[10:late]) <= set(names[:10])
    first, last = program.pass_stats[0], program.pass_stats[-1]
    assert first.nodes_before > last.nodes_after and all(s.seconds >= 0 for s in program.pass_stats)
    assert "->" in str(first)
    step(ember.ones(4, 3))
    assert step.stats.traces == 1 and step.stats.hits == 1  # the call reused the compiled graph


def test_opt_level_zero_runs_the_graph_as_captured():
    f = ember.function(lambda x: x * 1 + 0.0, opt_level=0)
    f(ember.ones(3))
    assert _ops(f.graph) == ["mul", "add"] and f._last_entry.pass_stats == []


# ------------------------------------------------------------------------------ differential check

MODELS = {
    "mlp": (lambda: models.mlp(20, 16, 5), (8, 20), 5),
    "cnn": (lambda: models.cnn(1, 28, 10), (2, 1, 28, 28), 10),
    "gpt": (
        lambda: nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True),
        (2, 5, 16),
        None,
    ),
}


@pytest.mark.parametrize("aot", [False, True], ids=["training-step", "aot-autograd"])
@pytest.mark.parametrize("case", sorted(MODELS))
def test_every_pass_is_checked_on_training_steps(case, aot):
    build, shape, classes = MODELS[case]
    ember.manual_seed(0)
    eager, model = build(), build()
    model.load_state_dict(eager.state_dict())
    # the encoder in float64: its attention's key bias has a gradient of zero in exact
    # arithmetic (softmax ignores a shift common to all keys), so in float32 Adam turns that
    # gradient's rounding noise into lr-sized steps whose directions depend on the kernels
    dtype = ember.float64 if case == "gpt" else ember.float32
    if dtype == ember.float64:
        eager.double(), model.double()
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal(shape), dtype=dtype)
    y = ember.tensor(rng.integers(0, classes or 2, shape[0]))

    def loss_of(m):
        out = m(x)
        # (the distance to the input: the encoder's final LayerNorm fixes each token's mean
        # square, so ``(out**2).mean()`` would leave every gradient before it rounding noise)
        return nn.functional.cross_entropy(out, y) if classes else ((out - x) ** 2).mean()

    opts = [ember.optim.Adam(m.parameters(), lr=1e-2) for m in (eager, model)]

    def step(m, opt):
        opt.zero_grad()
        loss = loss_of(m)
        loss.backward()
        opt.step()
        return loss

    if aot:  # forward compiled, backward by the tape through the AOT backward graph
        compiled = ember.function(model, verify=True)
        for _ in range(2):
            for opt, forward in ((opts[0], eager), (opts[1], compiled)):
                opt.zero_grad()
                out = forward(x)
                loss = nn.functional.cross_entropy(out, y) if classes else ((out - x) ** 2).mean()
                loss.backward()
                opt.step()
        labels = {s.graph for s in compiled._last_entry.pass_stats}
        assert labels == {"forward", "backward"}
    else:
        compiled = ember.function(step, verify=True)
        for _ in range(3):
            step(eager, opts[0])
            compiled(model, opts[1])
    for p, q in zip(eager.parameters(), model.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_the_check_covers_graphs_with_cond_and_while_loop():
    def f(x):
        y = ember.cond(x.sum() > 0, lambda v: v * 1 + (-0.0), lambda v: -v, x)
        n = ember.while_loop(lambda v: v.sum() < 100, lambda v: v * 2 + 1, x.abs() + 1)
        return y * 1, n.reshape(6).reshape(2, 3)

    x = ember.randn(2, 3)
    before, after, optimized, _ = _run_both(f, x)
    _assert_bits_equal(before, after)
    assert {"cond", "while_loop"} <= set(_ops(optimized))


def _break_subtraction(graph):
    """A wrong 'optimization': a - b becomes a + b."""
    from ember.ops._registry import REGISTRY

    changed = False
    for node in graph.nodes:
        if node.kind == "call" and node.op.name == "sub":
            node.op = REGISTRY["add"]
            changed = True
    return graph, changed


def test_a_broken_pass_is_caught_and_named():
    broken = Pass("flip_sub", _break_subtraction, level=3)
    model = nn.Linear(3, 2)

    def f(x):
        h = model(x) * 1.0
        return (h - x[:, :2]).relu().sum()

    f_checked = ember.function(f, opt_level=[FOLD, SIMPLIFY, broken, DCE], verify=True)
    with pytest.raises(PassCheckError) as info:
        f_checked(ember.randn(4, 3))
    message = str(info.value)
    assert "'flip_sub'" in message and "first node whose values differ is %" in message
    culprit = message.split("differ is %")[1].split(" ")[0]
    graph = ember.trace(f, ember.randn(4, 3), opt_level=0).graph
    assert next(n for n in graph.nodes if n.name == culprit).op.name == "sub"
    # without verify the same pipeline silently computes the wrong thing: that is what it's for
    f_unchecked = ember.function(f, opt_level=[broken])
    x = ember.randn(4, 3)
    assert not np.allclose(f_unchecked(x).detach().numpy(), f(x).detach().numpy())
