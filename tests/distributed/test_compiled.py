"""DistributedDataParallel and SyncBatchNorm inside ``ember.function`` training steps, on 2 MPI
ranks (``ember run -n 2``) and on 1 (plain python): the ranks, each on its half of the batch,
end with the parameters of one process trained on the whole batch (ember eager, one process:
tests/distributed/_common.py); the gradient reduction is graph nodes, one all-reduce per bucket,
in the same order on every rank; one trace serves every step after the optimizer's first."""

from __future__ import annotations

import numpy as np
import pytest

from . import _common
from .test_distributed import _launch, _mpiexec_or_skip

pytest.importorskip("mpi4py", reason="ember.distributed needs mpi4py: pip install 'ember[mpi]'")
# one worker runs the file: its module fixture launches one MPI job for all its tests, which
# each xdist worker running one of them would launch again
pytestmark = pytest.mark.xdist_group("distributed/test_compiled")

CONFIGS = ("sgd_small_buckets", "sgd", "adam", "syncbn", "accumulate")
# float32 sums in another order (halves, then the average; SyncBatchNorm's statistics in float64
# either way): a few ulps (2**-23) of values of order 1 per step, as the eager DDP test allows
TOL = {"rtol": 1e-5, "atol": 1e-6}


@pytest.fixture(scope="module", params=[2, None], ids=["2 ranks", "1 rank, no mpiexec"])
def job(request, tmp_path_factory):
    if request.param is not None:
        _mpiexec_or_skip()
    out = tmp_path_factory.mktemp("compiled")
    done = _launch(request.param, "_worker_compiled.py", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    ranks = [dict(np.load(f)) for f in sorted(out.glob("rank*.npz"))]
    assert len(ranks) == (request.param or 1)
    return ranks


@pytest.mark.parametrize("config", CONFIGS)
def test_compiled_ddp_matches_one_process_on_the_whole_batch(job, config):
    net = _common.model(config, seed=0)
    x, y = _common.batch()
    _common.train(config, net, x, y)  # "accumulate": two half-batch backward passes per step
    for res in job:
        for k, v in _common.state(net).items():
            np.testing.assert_allclose(res[f"ddp_{config}_{k}"], v, **TOL, err_msg=k)
        # traced at the first call and again at the second, once the optimizer has buffers
        # (as any captured step), then reused: the reduction adds no retrace
        assert int(res[f"traces_{config}"]) == 2 and int(res[f"hits_{config}"]) == 1
        assert str(res[f"reasons_{config}"]).startswith("opt: the buffers")


def test_the_reduction_is_graph_nodes_in_one_order_on_every_rank(job):
    w = len(job)
    for config in CONFIGS:
        for label in ("captured", "optimized"):
            key = f"collectives_{label}_{config}"
            orders = [list(res[key]) for res in job]
            assert all(o == orders[0] for o in orders), (config, label)
            names = [c.split("(")[0] for c in orders[0]]
            if w == 1:  # a world of one reduces nothing
                assert names == [], (config, label)
                continue
            starts, waits = names.count("all_reduce_start"), names.count("all_reduce_wait")
            buckets = 4 if config == "sgd_small_buckets" else 1  # 1e-4 MB: a parameter each
            assert starts == waits == buckets, (config, label, names)
            if config == "syncbn":  # buffers from rank 0; two statistics forward, two backward
                assert names.count("broadcast") == 3 and names.count("all_reduce") == 4
    if w > 1:
        res = job[0]
        text = str(res["graph_text"])
        assert text.count("all_reduce_start(") == 4 and "reduce_op='avg'" in text
        # every start comes before every wait, with backward's compute between the first start
        # and the first wait: the reduction can travel while backward runs
        assert res["starts"].max() < res["waits"].min()
        assert int(res["compute_between"]) > 0


def test_no_sync_around_calls_of_a_captured_step(job):
    """``with ddp.no_sync(): step(first half)``, then ``step(second half)``, with a captured
    forward and backward and an eager optimizer: equal to the larger batch. The no_sync flag is
    part of the step's key: one graph per state, both reused at every later step."""
    net = _common.model("accumulate", seed=0)
    x, y = _common.batch()
    _common.train("accumulate", net, x, y)
    for res in job:
        for k, v in _common.state(net).items():
            np.testing.assert_allclose(res[f"ddp_outside_{k}"], v, **TOL, err_msg=k)
        if len(job) > 1:
            assert int(res["traces_outside"]) == 2
            assert "ddp: training flags (or _graph_flags)" in str(res["reasons_outside"])


@pytest.mark.parametrize("config", ["sgd", "accumulate"])
def test_compiled_module_with_eager_backward_matches_one_process(job, config):
    """``ember.compile(ddp_model)``: the forward captured, its AOT backward run under eager
    autograd, whose hooks reduce the gradients at every step."""
    net = _common.model(config, seed=0)
    x, y = _common.batch()
    _common.train(config, net, x, y)
    for res in job:
        for k, v in _common.state(net).items():
            np.testing.assert_allclose(res[f"compile_module_{config}_{k}"], v, **TOL, err_msg=k)


def test_functional_collectives_compiled_match_eager(job):
    w = len(job)
    values = np.stack([np.arange(1, 5, dtype=np.float32) + k for k in range(w)])
    for res in job:
        for label in ("eager", "compiled"):
            np.testing.assert_array_equal(res[f"fn_{label}_sum"], (2 * values).sum(0))
            np.testing.assert_allclose(res[f"fn_{label}_avg"], values.mean(0), rtol=2**-23)
            np.testing.assert_array_equal(res[f"fn_{label}_bcast"], values[w - 1])
        # d/du sum_k (k+1) * all_reduce(u)_k: every rank's cotangent, summed
        np.testing.assert_array_equal(res["grad_compiled"], np.full(4, sum(range(1, w + 1))))
