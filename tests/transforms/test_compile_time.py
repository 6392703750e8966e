"""What the pass pipeline skips to compile faster decides as running everything would: a pass is
not run again on a graph it left unchanged (transforms/pipeline.py), and the epilogue split
plans only candidates whose window holds the peak (transforms/epilogue.py `_may_lower`). Each
is compared here with the exhaustive way on the graphs it rewrites: the printed graphs (nodes,
attributes and order) must be the same."""

import pytest

import ember
from ember import zoo
from ember.transforms import Pass, optimize, passes_for
from ember.transforms import epilogue as ep
from ember.transforms.pipeline import MAX_ROUNDS


def _every_pass_every_round(graph, passes):
    """The pipeline without skipping: every pass in every round, until a round changes
    nothing."""
    for _ in range(MAX_ROUNDS):
        any_change = False
        for p in passes:
            graph, changed = p.run(graph)
            any_change |= changed
        if not any_change:
            break
    return graph


def _step_graph(name):
    """The zoo model's training step at its test sizes, captured without passes."""
    spec = zoo.SPECS[name]
    x, y = zoo.inputs(name, spec.test_batch, seed=0, **spec.test_sizes)
    ember.manual_seed(0)
    model = zoo.build(name, ember, **spec.test_sizes)
    opt = zoo.optimizer(name, ember, model.parameters())
    x, y = ember.tensor(x), ember.tensor(y)

    def step():
        opt.zero_grad()
        loss = zoo.loss(ember, model(x), y)
        loss.backward()
        opt.step()
        return loss

    return ember.function(step, opt_level=0).compile().graph


@pytest.mark.parametrize("name", ["gpt", "vit"])
def test_the_pipeline_makes_the_graph_that_running_every_pass_makes(name, monkeypatch):
    graph = _step_graph(name)
    fast, stats = optimize(graph.copy(), 3)
    monkeypatch.setattr(ep, "_may_lower", lambda plan, graph, producer: True)  # every trial
    slow = _every_pass_every_round(graph.copy(), passes_for(3))
    assert str(fast) == str(slow)
    # the last round finds nothing to do: it stops at the pass that made the last change,
    # without repeating the passes after it (whichever pass that is: fusion's second look
    # may be the last to change something, or an earlier pass)
    runs = [s.name for s in stats]
    last = max(i for i, s in enumerate(stats) if s.changed)
    final = runs[last + 1 :]
    assert final and final[-1] == runs[last] and not any(s.changed for s in stats[last + 1 :])
    assert len(final) <= len(set(runs)), final


def _counting(name, changes):
    """A pass that records its runs and reports a change on the runs ``changes`` lists (0 is
    its first), removing a dead node then, so that the graph really changes."""
    runs = []

    def run(graph):
        runs.append(len(graph.nodes))
        if len(runs) - 1 not in changes:
            return graph, False
        node = next(n for n in graph.nodes if n.kind == "call" and not n.outputs[0].users)
        graph.erase_node(node)
        return graph, True

    return Pass(name, run, level=1), runs


def _dead_ends(k):
    def f(x):
        for i in range(k):
            x + float(i)  # never read: what the counting passes erase
        return x * 2.0

    return ember.trace(f, ember.ones(3), opt_level=0).graph


def test_a_pass_runs_again_only_on_a_graph_it_has_not_seen():
    first, first_runs = _counting("first", changes={0})
    second, second_runs = _counting("second", changes=())
    graph, stats = optimize(_dead_ends(2), passes=[first, second])
    # round 1: first changes the graph, second sees it; round 2: first finds nothing, and
    # second has seen this graph already
    assert [s.name for s in stats] == ["first", "second", "first"]
    assert len(second_runs) == 1 and len(first_runs) == 2


def test_a_change_by_a_later_pass_makes_the_earlier_ones_run_again():
    first, first_runs = _counting("first", changes=())
    second, second_runs = _counting("second", changes={0, 1})
    graph, stats = optimize(_dead_ends(3), passes=[first, second])
    # second changes the graph twice: first sees each new graph, and second, which changed
    # it last, runs again to find nothing more
    assert [s.name for s in stats] == ["first", "second"] * 3
    assert first_runs == [first_runs[0], first_runs[0] - 1, first_runs[0] - 2]
    assert sum(1 for n in graph.nodes if n.kind == "call") == 2


def _peak_elsewhere(x, w, m, y):
    h = (x @ w) * m  # float64: it cannot take the float32 product's buffer
    return h, h.sum(0), y @ y.T  # the 8 MiB product: the peak is there


def _peak_in_window(x, w, m):
    h = (x @ w) * m
    return h, h.sum(0)


@pytest.mark.parametrize("fn, splits", [(_peak_in_window, True), (_peak_elsewhere, False)])
def test_the_epilogue_split_plans_only_where_the_peak_can_fall(fn, splits, monkeypatch):
    x, w, y = ember.randn(512, 16), ember.randn(16, 512), ember.randn(1024, 8)
    args = (x, w, (ember.randn(512, 512) > 0).double())
    args = args + (y,) if fn is _peak_elsewhere else args
    fused = [p for p in passes_for(3) if p.name != "schedule"]
    graph = ember.function(fn, opt_level=0).compile(*args).graph
    tried = []
    trial = ep._may_lower
    monkeypatch.setattr(ep, "_may_lower", lambda *a: tried.append(trial(*a)) or tried[-1])
    bounded = optimize(graph.copy(), passes=fused)[0]
    monkeypatch.setattr(ep, "_may_lower", lambda *a: True)
    exhaustive = optimize(graph.copy(), passes=fused)[0]
    assert str(bounded) == str(exhaustive)
    ops = [n.op.name for n in bounded.nodes if n.kind == "call"]
    assert ("fused_epilogue" in ops) == splits  # the split lowers the peak only in the window
    assert tried and all(tried) == splits  # the candidate was planned only there


def test_planning_another_order_of_the_same_nodes_reuses_what_does_not_depend_on_it():
    from ember.plan.memory import plan_memory
    from ember.plan.schedule import memory_aware_order

    graph = _step_graph("gpt")
    first = plan_memory(graph)
    order = memory_aware_order(graph)
    assert [id(n) for n in order] != [id(n) for n in graph.nodes]
    graph.nodes = order
    again, fresh = plan_memory(graph, reorders=first), plan_memory(graph)
    assert again.layouts is first.layouts and again.workspaces is first.workspaces
    assert (again.timeline, again.peak_node) == (fresh.timeline, fresh.peak_node)
    assert again.timeline != first.timeline
    assert again.breakdown == fresh.breakdown and again.live_at_peak == fresh.live_at_peak
