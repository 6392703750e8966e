"""runtime/auto.py, the default executor: ember.function, ember.trace and ember.compile run on
it when no executor is named; on models (MLP, CNN, GPT block, inception branches) and control
flow (cond, while_loop, scan) its programs give the interpreter's results (within rounding:
the C runner's products are ember's GEMM) and generated code's; the choice and its reasons are
printed by ``parallel_plan``; under a forced calibration the choice follows the model and is
the same every time; without a C compiler it is generated code; a memory budget keeps
generated code; the profiler sees every node whatever was chosen."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
from ember import models
from ember import nn as enn
from ember.graph import interpreter
from ember.kernels import ccompile
from ember.nn import functional as F
from ember.runtime import auto, cgraph, parallel
from ember.runtime.codegen import CompiledGraph, compile_graph
from ember.runtime.executors import DEFAULT_EXECUTOR, AutoExecutor, get_executor
from ember.runtime.parallel_cost import Calibration

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _tensors(shapes, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [ember.tensor(rng.standard_normal(s).astype(dtype)) for s in shapes]


def _close(got, want, rtol=1e-4):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        scale = float(np.abs(w).max()) if w.size else 0.0
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale)


def _c_calibration(cores=2, run_s=15e-6, call_s=20e-6) -> Calibration:
    """A machine whose C runner costs ``run_s`` a run and 1 us a node, single-threaded steps
    overlapping (pair factor 1.1); a call in generated code takes ``call_s`` at least (the
    tables' smallest rows: its Python), its BLAS 10 GFLOP/s."""
    blas = [(f, max(call_s, f / 1.6e10), max(call_s, f / 1e10), 2.0) for f in (1e3, 1e6, 1e9)]
    numpy = [(s, max(call_s, s / 1e10), max(call_s, s / 1e10), 2.0) for s in (1e3, 1e6, 1e9)]
    conv = [(f, max(1e-6, f / 1e10), 1.1) for f in (1e3, 1e6, 1e9)]
    copy = [(s, max(1e-7, s / 1e10), 1.1) for s in (1e3, 1e6, 1e9)]
    return Calibration(cores, 20e-6, 30e-6, 0.4e-6, blas, numpy, "test", run_s, 1e-6, conv, copy)


def _program_of(fn, *args):
    with ember.no_grad():
        return fn.compile(*args)


# ---------------------------------------------------------------------- the default
def test_the_default_executor_is_auto_everywhere():
    assert DEFAULT_EXECUTOR == "auto" and get_executor("auto").name == "auto"
    assert ember.function(lambda x: x + 1).executor == "auto"
    x = ember.ones(3)
    traced = ember.trace(lambda x: x * 2, x)
    assert traced.executor == "auto" and isinstance(traced.program, auto.AutoProgram)
    compiled = ember.compile(enn.Linear(3, 2))
    compiled(x.reshape(1, 3))
    assert compiled.compiled_function.executor == "auto"


def _models():
    """(name, model or function, example arguments) at batch 1 and 8."""
    cases = []
    for batch in (1, 8):
        ember.manual_seed(0)
        mlp = models.mlp(64, 32, 10)
        cases.append((f"mlp b{batch}", mlp, _tensors([(batch, 64)], batch)))
        cnn = models.cnn(1, 12, 10)
        cases.append((f"cnn b{batch}", cnn, _tensors([(batch, 1, 12, 12)], batch)))
        block = models.gpt_block_class(enn, F)(d_model=32, heads=4, hidden=64)
        cases.append((f"gpt b{batch}", block, _tensors([(batch, 6, 32)], batch)))
    shapes = models.inception_shapes(2, 8, 8)
    cases.append(("inception", models.inception_block, _tensors(shapes, 3)))
    return cases


@pytest.mark.parametrize("case", _models(), ids=lambda c: c[0])
def test_the_default_path_equals_the_interpreter_and_generated_code(case):
    _, model, args = case
    fn = ember.function(model)
    with ember.no_grad():
        got = fn(*args)
        graph_function = fn.compile(*args)
    graph = graph_function.graph
    arrays = graph_function.fed_arrays(*args)
    got = [got] if not isinstance(got, (tuple, list)) else list(got)
    want = interpreter.run(graph, arrays)
    _close([t.numpy() for t in got], want[: len(got)])
    _close(graph_function.program(*arrays), compile_graph(graph)(*arrays), 1e-5)
    choice = graph_function.parallel_plan
    assert isinstance(choice, auto.Choice) and choice is fn.parallel_plan
    text = str(choice)
    assert text.startswith(f"executor auto for {graph.name}: {choice.chosen} (")
    assert "generated code: predicted" in text or "no C compiler" in text


@needs_cc
def test_a_small_mlp_at_batch_one_runs_on_the_c_runner_where_the_model_says_so():
    """The runner costs 15 us a run against generated code's Python per node: three linear
    layers of one row go to the C runner on one thread."""
    ember.manual_seed(0)
    model = models.mlp(64, 32, 10)
    (x,) = _tensors([(1, 64)])
    with ember.no_grad():
        graph = ember.trace(model, x).graph
    calls = [i for i, n in enumerate(graph.nodes) if n.kind == "call"]
    executor = AutoExecutor(calibration=_c_calibration(), measure=False)
    program = executor.prepare(graph)
    assert program.choice.chosen == "the C graph runner on one thread", str(program.choice)
    assert program._c_program is not None and program.plan.order == calls
    assert "C graph runner" in str(executor.parallel_plan(program))
    arrays = [x.detach().numpy()] + [p.detach().numpy() for p in model.parameters()]
    _close(program(*arrays), interpreter.run(graph, arrays), 1e-5)


@needs_cc
def test_under_a_forced_calibration_the_choice_is_deterministic():
    """The same calibration gives the same choice and text every time; a runner that costs
    more than the whole graph in generated code is never chosen."""
    args = _tensors(models.inception_shapes(2, 8, 8), 3)
    with ember.no_grad():
        graph = ember.trace(models.inception_block, *args).graph
    texts = set()
    for _ in range(3):
        program = AutoExecutor(calibration=_c_calibration(), measure=False).prepare(graph)
        texts.add(str(program.choice))
    assert len(texts) == 1
    slow = AutoExecutor(calibration=_c_calibration(run_s=1.0), measure=False).prepare(graph)
    assert slow.choice.chosen == auto.CODEGEN and isinstance(slow._program, CompiledGraph)
    assert slow._c_program is None and "generated code" in str(slow.choice)
    arrays = [a.numpy() for a in args]
    _close(slow(*arrays), interpreter.run(graph, arrays), 1e-5)


@needs_cc
def test_close_predictions_are_measured_and_the_fastest_measured_wins(monkeypatch):
    """Candidates predicted within CLOSE of each other are timed; the measured fastest is
    chosen where it beats generated code by the margin, else generated code stays."""
    ember.manual_seed(0)
    model = models.mlp(64, 32, 10)
    (x,) = _tensors([(1, 64)])
    with ember.no_grad():
        graph = ember.trace(model, x).graph
    calibration = _c_calibration()
    monkeypatch.setattr(auto, "CLOSE", 1e9)  # every candidate is close
    for times, expect in (
        ({auto.CODEGEN: 1e-4, "the C graph runner on one thread": 1e-5}, "the C graph"),
        ({auto.CODEGEN: 1e-4, "the C graph runner on one thread": 0.99e-4}, auto.CODEGEN),
    ):
        monkeypatch.setattr(
            auto, "_time_candidates", lambda g, programs, t=times: {k: t[k] for k in programs}
        )
        program = AutoExecutor(calibration=calibration).prepare(graph)
        assert program.choice.chosen.startswith(expect), str(program.choice)
        assert program.choice.measured and "measured fastest" in program.choice.why
        assert "measured 100 us" in str(program.choice)


@needs_cc
def test_the_measurement_times_real_runs_and_decisions_are_kept_per_structure():
    ember.manual_seed(0)
    model = models.mlp(64, 32, 10)
    (x,) = _tensors([(1, 64)])
    with ember.no_grad():
        graph = ember.trace(model, x).graph
    generated = compile_graph(graph)
    c_program = parallel.ParallelProgram(
        graph,
        schedule=parallel.plan(graph, _c_calibration().for_c_runner(), workers=1, measured={}),
    )
    measured = auto._time_candidates(graph, {"a": generated, "b": c_program})
    assert set(measured) == {"a", "b"} and all(0 < t < 1 for t in measured.values())
    # a second graph of the same structure reuses the machine's decision, without measuring
    first = get_executor("auto").prepare(graph)
    again = get_executor("auto").prepare(graph.copy())
    assert again.choice.chosen == first.choice.chosen and again.choice.cached
    assert "decided for this graph's structure before" in str(again.choice)
    arrays = [x.detach().numpy()] + [p.detach().numpy() for p in model.parameters()]
    _close(again(*arrays), first(*arrays), 1e-6)


# ---------------------------------------------------------------------- what cannot run in C
def _control_cases():
    w = ember.tensor(np.linspace(-1, 1, 4))

    def branchy(x):
        return ember.cond(x.sum() > 0, lambda a: (a * w).sin(), lambda a: a * a - w, x)

    def loop(x):
        return ember.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 0.5 + w), (0, x))[1]

    def cumulative(x):
        return ember.scan(lambda c, r: (c + r, c * r), x[0], x)[1]

    x = ember.tensor(np.linspace(-2, 3, 4))
    return [("cond", branchy, [x]), ("while", loop, [x]), ("scan", cumulative, [x.reshape(2, 2)])]


@pytest.mark.parametrize("case", _control_cases(), ids=lambda c: c[0])
def test_control_flow_graphs_fall_back_and_equal_the_interpreter(case):
    _, fn, args = case
    traced = ember.trace(fn, *args)
    program = traced.program
    if any(n.kind == "call" and n.op.kind == "control" for n in traced.graph.nodes):
        assert program._c_program is None  # a control op has no C step
        assert program.choice.chosen in (auto.CODEGEN, "2 parallel workers"), str(program.choice)
    # (a loop of known trip count is unrolled: its elementwise body may run in C)
    arrays = traced.fed_arrays(*args)
    want = interpreter.run(traced.graph, [a.copy() for a in arrays])
    _close(program(*arrays), want, 1e-12)
    eager = fn(*args)
    np.testing.assert_allclose(traced(*args).numpy(), eager.numpy(), rtol=1e-12)


def test_symbolic_sizes_run_generated_code():
    fn = ember.function(lambda x: (x * 2).relu(), input_signature=[ember.TensorSpec((None, 3))])
    out = fn(ember.ones(4, 3))
    np.testing.assert_array_equal(out.numpy(), np.full((4, 3), 2.0, np.float32))
    choice = fn.parallel_plan
    assert choice.chosen == auto.CODEGEN
    reason = "symbolic sizes" if ccompile.compiler_available() else "no C compiler"
    assert choice.why.startswith(reason)


def test_a_memory_budget_keeps_generated_code():
    ember.manual_seed(0)
    model = models.mlp(16, 8, 4)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    x, y = _tensors([(4, 16)])[0], ember.tensor(np.arange(4) % 4)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = ember.function(step, memory_budget=1 << 30)
    assert fn.options.runner.name == "codegen"
    assert np.isfinite(fn(x, y).item())
    assert isinstance(fn.compile(x, y).program, CompiledGraph)


def test_the_profiler_sees_every_node_of_a_c_runner_graph():
    ember.manual_seed(0)
    model = models.mlp(64, 32, 10)
    (x,) = _tensors([(1, 64)])
    fn = ember.function(model)
    with ember.no_grad():
        fn(x)
        with ember.profiler.profile() as prof:
            fn(x)
    kernels = [e for e in prof.events() if e.cat == "kernel"]
    calls = [n for n in fn.graph.nodes if n.kind == "call"]
    assert len(kernels) == len(calls), (kernels, fn.parallel_plan)


def test_without_a_compiler_the_default_is_generated_code(tmp_path):
    code = textwrap.dedent(
        """
        import warnings
        warnings.simplefilter("ignore")
        import numpy as np, ember
        from ember import models
        ember.manual_seed(0)
        model = models.mlp(64, 32, 10)
        x = ember.randn(1, 64)
        fn = ember.function(model)
        with ember.no_grad():
            got = fn(x).numpy()
            want = model(x).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        print(str(fn.parallel_plan).splitlines()[0])
        """
    )
    env = dict(os.environ, CC="/bin/false", EMBER_CACHE_DIR=str(tmp_path))
    source = os.path.dirname(os.path.dirname(ember.__file__))  # (src/, where ember is)
    env["PYTHONPATH"] = os.pathsep.join([source, env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "generated code (no C compiler)" in done.stdout, done.stdout


@needs_cc
def test_a_runner_predicted_just_below_the_margin_is_measured(monkeypatch):
    """The one-thread C runner predicted a few percent faster than generated code (below the
    plan's 10% margin, so the parallel executor would not take it) is close: it is timed,
    and chosen when measured faster."""
    monkeypatch.setattr(cgraph, "measure_nodes", lambda graph, steps: {})  # the tables decide
    ember.manual_seed(0)
    model = models.mlp(64, 32, 10)
    (x,) = _tensors([(1, 64)])
    with ember.no_grad():
        graph = ember.trace(model, x).graph
    runner = "the C graph runner on one thread"
    timed = []

    def fake(g, programs):
        timed.append(set(programs))
        return {auto.CODEGEN: 1e-4, runner: 5e-5}

    monkeypatch.setattr(auto, "_time_candidates", fake)
    # a runner whose fixed cost leaves it 5% faster than generated code (the run's fixed cost
    # is its whole cost beyond its steps')
    free = AutoExecutor(calibration=_c_calibration(run_s=0.0), measure=False).prepare(graph)
    steps_s, generated_s = free.choice.predicted[runner], free.choice.predicted[auto.CODEGEN]
    run_s = 0.95 * generated_s - steps_s
    timed.clear()
    program = AutoExecutor(calibration=_c_calibration(run_s=run_s)).prepare(graph)
    predicted = program.choice.predicted
    assert 0.9 * predicted[auto.CODEGEN] < predicted[runner] < predicted[auto.CODEGEN]
    assert timed == [{auto.CODEGEN, runner}] and program.choice.chosen == runner
    assert "predicted gain" in program.plan.reason and program._c_program.threads == 1
    arrays = [x.detach().numpy()] + [p.detach().numpy() for p in model.parameters()]
    _close(program(*arrays), interpreter.run(graph, arrays), 1e-5)


@needs_cc
def test_candidates_close_to_each_other_but_not_to_generated_code_are_measured(monkeypatch):
    monkeypatch.setattr(cgraph, "measure_nodes", lambda graph, steps: {})
    args = _tensors(models.inception_shapes(2, 8, 8), 3)
    with ember.no_grad():
        graph = ember.trace(models.inception_block, *args).graph
    labels = ("the C graph runner on 2 threads", "the C graph runner on one thread")
    monkeypatch.setattr(
        auto, "_time_candidates", lambda g, programs: dict(zip(labels, (1e-5, 2e-5)))
    )
    calibration = _c_calibration(run_s=1e-6, call_s=200e-6)
    program = AutoExecutor(calibration=calibration).prepare(graph)
    choice = program.choice
    assert set(choice.predicted) == {auto.CODEGEN, *labels}, str(choice)
    assert choice.predicted[auto.CODEGEN] > auto.CLOSE * min(choice.predicted.values())
    assert choice.chosen == labels[0] and "within x2 of the best" in choice.why, str(choice)
    assert program._c_program.threads == 2
