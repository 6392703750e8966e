"""runtime/parallel.py and parallel_cost.py: the parallel executor gives the generated code's
results bit for bit (the same kernels), and so the reference interpreter's within rounding, on
the graphs it runs (plans forced parallel, whatever the machine's
calibration says), the cost model's decisions (a chain and a block of tiny ops stay sequential,
a four-branch block of convolutions goes parallel on a machine whose cores are free), errors on
a worker, the calibration cache, and ``ember.function(executor="parallel")``."""

import functools
import os
import signal

import numpy as np
import pytest

import ember
from ember import models
from ember.errors import EmberError
from ember.graph import interpreter
from ember.kernels import blas_threads
from ember.runtime import parallel, parallel_cost, workers
from ember.runtime.codegen import compile_graph
from ember.runtime.parallel_cost import Calibration


def _calibration(cores: int = 2) -> Calibration:
    """A machine with ``cores`` free cores, measured shape: calls shorter than ~20 us fight over
    the GIL (pair factor 2.5), longer single-threaded ones overlap (1.05); BLAS takes 2 us up to
    5e5 FLOPs and then 10 GFLOP/s in a worker, 16 with its own threads; memory 10 GB/s."""
    blas, elementwise = [], []
    for flops in (1e3, 1e5, 5e5, 2e6, 1e7, 1e8, 1e9):
        worker = max(2e-6, flops / 1e10)
        blas.append((flops, max(2e-6, flops / 1.6e10), worker, 2.5 if worker < 2e-5 else 1.05))
    for size in (1e3, 1e4, 1e5, 1e6, 1e7, 1e8):
        t = max(5e-7, size / 1e10)
        elementwise.append((size, t, t, 2.5 if t < 2e-5 else 1.05))
    return Calibration(cores, 20e-6, 30e-6, 0.4e-6, blas, elementwise, "test machine")


inception, chain = models.inception_block, models.conv_chain


def _tensors(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [ember.tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes]


def inception_args(n=8, c=32, size=16, seed=0):
    return _tensors(models.inception_shapes(n, c, size), seed)


def chain_args(seed=0):
    return _tensors(models.CONV_CHAIN_SHAPES, seed)


def _graph(fn, args, opt_level=3):
    return ember.trace(fn, *args, opt_level=opt_level).graph


def _reference(graph, arrays, parallel_run: bool = True):
    """What the workers must compute, bit for bit: the generated code's results, which call
    the same kernels (ops' C implementations where they have them: on a machine whose
    calibration picks ember's own GEMM over OpenBLAS a convolution's sums are ordered
    otherwise than the interpreter's NumPy kernel, an ulp apart); for a parallel run with
    BLAS single-threaded, as the workers run it (OpenBLAS rounds a product split over its
    threads differently in the last bits). Each is checked against the interpreter, within
    float32 rounding of sums of a few hundred products, relative to the output's scale (the
    chain's values reach 4e4 and cancel)."""
    program = compile_graph(graph)
    if parallel_run:
        with blas_threads.single_threaded():
            got = program(*arrays)
    else:
        got = program(*arrays)
    for g, w in zip(got, interpreter.run(graph, arrays)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * float(np.abs(w).max()))
    return got


def _alternating(graph) -> parallel.ParallelPlan:
    """A schedule putting consecutive call nodes on alternate workers: every edge of a chain
    crosses workers (the hardest case for the runner's waits and frees)."""
    calls = [i for i, n in enumerate(graph.nodes) if n.kind == "call"]
    workers = [calls[0::2], calls[1::2]]
    where = {p: w for w, ps in enumerate(workers) for p in ps}
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    waits = {}
    for p in calls:
        producers = {position[id(v.node)] for v in graph.nodes[p].inputs}
        waits[p] = {q for q in producers if q in where and where[q] != where[p]}
    return parallel.ParallelPlan(graph.name, True, "alternating", workers, waits)


def _assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


# ------------------------------------------------------------------------------- results
@pytest.mark.parametrize("opt_level", [0, 3])
def test_forced_parallel_runs_give_the_generated_codes_results(opt_level):
    for fn, args in ((inception, inception_args()), (chain, chain_args())):
        graph = _graph(fn, args, opt_level)
        program = parallel.ParallelProgram(graph, calibration=_calibration(), force=True)
        assert program.plan.parallel == (fn is inception)
        arrays = [a.numpy() for a in args]
        alternating = parallel.ParallelProgram(graph, schedule=_alternating(graph))
        for _ in range(3):  # the events and the shared values are fresh for every run
            _assert_same(program(*arrays), _reference(graph, arrays, program.plan.parallel))
            _assert_same(alternating(*arrays), _reference(graph, arrays))


def test_a_training_step_runs_in_parallel():
    """The CNN's whole training step, fused C loops and epilogues included: identical to the
    generated code (the same C kernels) and within rounding of the interpreter's NumPy ones."""
    example = models.example_step("cnn", batch=8)
    step = ember.function(example.step, executor="parallel", opt_level=3)
    program = step.compile()
    graph = program.graph
    arrays = [t.numpy() for t in _feeds(program)]
    forced = parallel.ParallelProgram(graph, calibration=_calibration(), force=True)
    alternating = parallel.ParallelProgram(graph, schedule=_alternating(graph))
    with blas_threads.single_threaded():
        generated = compile_graph(graph)(*arrays)
    _assert_same(forced(*arrays), generated)
    _assert_same(alternating(*arrays), generated)
    for got, want in zip(generated, _reference(graph, arrays)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_training_steps_on_a_forced_parallel_plan_match_eager_ones(monkeypatch):
    """ember.function on the parallel executor, its plan forced parallel: the parameter and
    momentum updates written back after each run give eager training's losses."""
    forced = functools.partial(parallel.plan, force=True)
    monkeypatch.setattr(parallel, "plan", forced)
    monkeypatch.setattr(parallel, "calibrate", lambda force=False: _calibration())
    example = models.example_step("cnn", batch=8)
    step = ember.function(example.step, executor="parallel", opt_level=3)
    assert step.compile().parallel_plan.parallel
    twin = models.example_step("cnn", batch=8)
    eager = [twin.step().item() for _ in range(3)]
    compiled = [step().item() for _ in range(3)]
    np.testing.assert_allclose(compiled, eager, rtol=1e-5)
    for p, q in zip(example.model.parameters(), twin.model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6)


def _feeds(program):
    return [ember.tensor(feed.array([])) for feed in program.feeds]


def test_random_draws_keep_their_order():
    def noisy(x):
        a = ((x + ember.rand(*x.shape)) * 2.0).exp()
        b = ((x - ember.rand(*x.shape)) * 3.0).exp()
        return a, b

    x = ember.randn(512, 512)
    graph = _graph(noisy, [x], opt_level=0)
    program = parallel.ParallelProgram(graph, calibration=_calibration(), force=True)
    assert program.plan.parallel
    first, second = (
        i for i, n in enumerate(graph.nodes) if n.kind == "call" and n.op.kind == "random"
    )
    same_worker = [w for w in program.plan.workers if first in w and second in w]
    if same_worker:
        assert same_worker[0].index(first) < same_worker[0].index(second)
    else:
        assert first in program.plan.waits[second]
    ember.manual_seed(7)
    got = program(x.numpy())
    ember.manual_seed(7)
    want = interpreter.run(graph, [x.numpy()])
    # (the same draws; exp over a large operand may run its compiled loop, the vector math
    # library's few ulps from NumPy's: ops/_vector_loops.py. Draws out of order would differ
    # by far more.)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=8 * np.finfo(np.float32).eps)


def test_an_error_on_a_worker_is_raised_in_the_caller_and_stops_the_others():
    args = inception_args()
    graph = _graph(inception, args)
    program = parallel.ParallelProgram(graph, calibration=_calibration(), force=True)
    arrays = [a.numpy() for a in args]
    arrays[3] = arrays[3][:, :8]  # w2b now has 8 input channels: its conv fails
    with pytest.raises(EmberError, match="conv"):
        program(*arrays)
    arrays = [a.numpy() for a in args]
    _assert_same(program(*arrays), _reference(graph, arrays))  # the pool still works


def test_a_call_while_the_pool_is_busy_runs_the_generated_code():
    args = inception_args()
    graph = _graph(inception, args)
    program = parallel.ParallelProgram(graph, calibration=_calibration(), force=True)
    arrays = [a.numpy() for a in args]
    pool = workers.worker_pool()
    with pool.lock:
        got = program(*arrays)
    _assert_same(got, _reference(graph, arrays, parallel_run=False))


# ------------------------------------------------------------------------------ decisions
def test_the_cost_model_keeps_a_chain_sequential():
    plan = parallel.plan(_graph(chain, chain_args()), _calibration())
    assert not plan.parallel and "no independent work" in plan.reason


def test_the_cost_model_runs_the_four_branch_block_in_parallel():
    plan = parallel.plan(_graph(inception, inception_args()), _calibration())
    assert plan.parallel, str(plan)
    assert plan.predicted_speedup > 1.3
    text = str(plan)
    assert "worker 1" in text and "conv" in text and "predicted" in text
    # with one core there is nothing to gain
    assert not parallel.plan(_graph(inception, inception_args()), _calibration(1)).parallel


def test_the_cost_model_keeps_a_block_of_tiny_ops_sequential():
    tiny = inception_args(n=1, c=4, size=4)
    graph = _graph(inception, tiny)
    plan = parallel.plan(graph, _calibration())
    assert not plan.parallel, str(plan)
    forced = parallel.plan(graph, _calibration(), force=True)
    assert forced.parallel_s > forced.sequential_s  # hand-offs cost more than the ops


def test_kernels_already_using_every_core_run_alone():
    """A calibration where BLAS gains nothing from a partner (pair factor 2 on 2 cores): the
    four-branch block stays sequential, its convolutions being exclusive."""
    calibration = _calibration()
    calibration.blas = [(s, t, w, 2.0) for s, t, w, _ in calibration.blas]
    graph = _graph(inception, inception_args())
    long = [
        e
        for n in graph.nodes
        if n.kind == "call"
        and (e := parallel_cost.estimate(n, calibration)).reason == "BLAS"
        and e.worker_seconds >= parallel_cost.EXCLUSIVE_HANDOFFS * calibration.handoff_s
    ]
    assert len(long) >= 4 and all(e.exclusive for e in long)
    assert not parallel.plan(graph, calibration).parallel


def test_symbolic_shapes_stay_sequential():
    fn = ember.function(lambda x: (x * 2).sum(1), input_signature=[ember.TensorSpec((None, 8))])
    program = fn.compile(ember.randn(4, 8))
    assert "symbolic" in parallel.plan(program.graph, _calibration()).reason


# ---------------------------------------------------------------- the machine's calibration
@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("EMBER_CACHE_DIR", str(tmp_path_factory.mktemp("ember-cache")))
    try:
        yield parallel_cost.calibrate()
    finally:
        mp.undo()


def test_the_calibration_is_measured_once_and_cached(measured, monkeypatch, tmp_path):
    assert measured.cores >= 1 and len(measured.blas) > 3 and len(measured.numpy) > 3
    assert measured.handoff_s > 0 and measured.fork_s > 0
    times = [t for _, t, _, _ in measured.blas]
    assert times == sorted(times)  # more work never predicted faster
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    calls = []
    monkeypatch.setattr(parallel_cost, "measure", lambda: calls.append(1) or measured)
    first = parallel_cost.calibrate()
    assert parallel_cost.calibration_path().exists() and calls == [1]
    parallel_cost._loaded.clear()  # a new process: read from the file
    assert parallel_cost.calibrate() == first and calls == [1]
    parallel_cost.calibrate(force=True)
    assert calls == [1, 1]
    assert "hand-off" in str(first)


def test_a_split_stalled_by_a_busy_machine_is_timed_as_one_thread(monkeypatch):
    # the pool's split waiting a scheduler slice per call (another process on the other core)
    # is the load of the moment, not the machine: cached, it would predict every product
    # above the split size 100x too slow for good
    from ember.runtime import parallel_measure, workers

    times = iter([32e-3, 0.2e-3, 0.25e-3])  # alone (split), one thread, two at once
    monkeypatch.setattr(parallel_measure, "_best_time", lambda fn, samples: next(times))
    monkeypatch.setattr(parallel_measure, "_median_time", lambda fn, n: 1.0)  # one rep
    alone, worker, pair = parallel_measure._measure(lambda: None, workers.worker_pool())
    assert (alone, worker, pair) == (0.2e-3, 0.2e-3, 1.25)
    times = iter([0.1e-3, 0.2e-3, 0.3e-3])  # a split that gains keeps its own time
    assert parallel_measure._measure(lambda: None, workers.worker_pool())[0] == 0.1e-3


def test_on_this_machine_a_chain_and_tiny_ops_stay_sequential(measured):
    assert not parallel.plan(_graph(chain, chain_args()), measured).parallel
    tiny = _graph(inception, inception_args(n=1, c=4, size=4))
    assert not parallel.plan(tiny, measured).parallel


# ------------------------------------------------------------------------ ember.function
def test_function_with_the_parallel_executor(measured, monkeypatch):
    monkeypatch.setattr(parallel_cost, "calibrate", lambda force=False: _calibration())
    monkeypatch.setattr(parallel, "calibrate", lambda force=False: _calibration())
    args = inception_args()
    fn = ember.function(inception, executor="parallel")
    program = fn.compile(*args)
    assert program.parallel_plan.parallel
    assert "worker 0 (caller)" in str(program.parallel_plan)
    got = fn(*args).numpy()
    np.testing.assert_allclose(got, inception(*args).numpy(), rtol=1e-4, atol=1e-4)
    assert "def " in program.code  # the sequential code is there too
    assert repr(program).endswith("(parallel)>")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_starts_its_own_workers():
    args = inception_args(n=2)
    graph = _graph(inception, args)
    arrays = [a.numpy() for a in args]
    want = _reference(graph, arrays)
    workers.worker_pool()  # the parent's threads exist before the fork
    pid = os.fork()
    if pid == 0:  # the child: a hang would be killed by the alarm
        signal.alarm(30)
        try:
            got = parallel.ParallelProgram(graph, schedule=_alternating(graph))(*arrays)
            os._exit(0 if all(np.array_equal(g, w) for g, w in zip(got, want)) else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


@pytest.mark.skipif(not blas_threads.available(), reason="no OpenBLAS thread setting to keep")
def test_numpys_blas_thread_count_is_the_same_after_parallel_runs_and_matmuls():
    """The workers' single-threaded BLAS must not leak into the rest of the process, even in
    OpenBLAS builds whose "per-thread" setting is process-wide (blas_threads.per_thread)."""
    from ember.kernels import cgemm

    setter = blas_threads._setter()
    before = setter(2)
    try:
        graph = _graph(inception, inception_args(), 3)
        program = parallel.ParallelProgram(graph, calibration=_calibration(), force=True)
        program(*[a.numpy() for a in inception_args()])
        a = np.ones((300, 300), np.float32)
        cgemm.matmul(a, a)
        assert setter(2) == 2
    finally:
        setter(before)
