"""ember.distributed.pipelining on 2 MPI ranks (``ember run -n 2``): every case of
_pipe_common.CASES (MLP, CNN and transformer block; 4 and 8 microbatches; GPipe and 1F1B; cut by
the cost model or at a module) trains STEPS optimizer steps as a two-stage pipeline, and its
losses, output and every stage's parameters must equal one process's eager steps on the whole
batch; CASES3 do the same on 3 ranks (a value read by two later stages, token ids in).
The partitioner alone is tested in one process (tests/distributed/test_pipeline_partition.py)."""

from __future__ import annotations

import numpy as np
import pytest

from . import _pipe_common as pc
from .test_distributed import _launch, _mpiexec_or_skip

pytest.importorskip("mpi4py", reason="ember.distributed needs mpi4py: pip install 'ember[mpi]'")
# one worker runs the file: its module fixture launches one MPI job for all its tests, which
# each xdist worker running one of them would launch again
pytestmark = pytest.mark.xdist_group("distributed/test_pipelining")

# float32 steps whose sums run in another order (microbatches, then stages): each result is
# within a few hundred roundings (2**-24 each) of the reference, relative to its size
RTOL, ATOL = 2e-5, 2e-6


def _run(tmp_path_factory, world: int, cases):
    _mpiexec_or_skip()
    out = tmp_path_factory.mktemp(f"pipe{world}")
    done = _launch(world, "_worker_pipe.py", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    found = {}
    for case in cases:
        files = [out / f"{pc.case_id(case)}.rank{r}.npz" for r in range(world)]
        found[pc.case_id(case)] = [dict(np.load(f)) for f in files]
    found["errors"] = dict(np.load(out / "errors.rank0.npz")) if world == 2 else {}
    return found, done.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return _run(tmp_path_factory, 2, pc.CASES)


@pytest.fixture(scope="module")
def runs3(tmp_path_factory):
    return _run(tmp_path_factory, 3, pc.CASES3)


_REFERENCES: dict = {}


def _reference(name):
    if name not in _REFERENCES:
        _REFERENCES[name] = pc.reference(name)
    return _REFERENCES[name]


def _check_equal(ranks, case) -> None:
    ref = _reference(case[0])
    # the last stage's microbatch losses average to the whole batch's mean loss, and its output
    # of the first step is the model's on the whole batch
    last = ranks[-1]
    assert last["losses"].shape == (pc.STEPS, case[1])
    np.testing.assert_allclose(last["losses"].mean(axis=1), ref["losses"], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(last["output"], ref["output"], rtol=RTOL, atol=ATOL)
    assert all("output" not in res for res in ranks[:-1])
    seen = set()
    for res in ranks:
        params = {k for k in res if k.startswith("param/")}
        assert params, "every stage owns parameters in these cases"
        assert not params & seen, "a parameter belongs to one stage"
        seen |= params
        for k in params:
            np.testing.assert_allclose(res[k], ref[k], rtol=RTOL, atol=ATOL, err_msg=k)
    assert seen == {k for k in ref if k.startswith("param/")}


@pytest.mark.parametrize("case", pc.CASES, ids=pc.case_id)
def test_pipeline_equals_one_process(runs, case):
    _check_equal(runs[0][pc.case_id(case)], case)


@pytest.mark.parametrize("case", pc.CASES3, ids=pc.case_id)
def test_three_stages_equal_one_process(runs3, case):
    _check_equal(runs3[0][pc.case_id(case)], case)


def test_three_stage_messages(runs3):
    # the feed-forward block's input is sent from stage 0 to both later stages
    readers = runs3[0][pc.case_id(pc.CASES3[0])][0]["readers"]
    assert readers.max() == 2


@pytest.mark.parametrize("case", pc.CASES, ids=pc.case_id)
def test_bubble_measured(runs, case):
    ranks = runs[0][pc.case_id(case)]
    m = case[1]
    for res in ranks:
        measured, ideal = res["bubble"]
        assert ideal == pytest.approx(1 / (m + 1))  # (S-1)/(M+S-1), S = 2
        wall, busy, waiting = res["times"].T
        assert np.all(busy > 0) and np.all(busy + waiting <= wall * (1 + 1e-9))
        assert measured == pytest.approx(np.mean(1 - busy / wall))
        assert f"{m} microbatches" in str(res["report"])
        # activations held: every microbatch's under GPipe, at most S-r under 1F1B
        for r, (held, per_microbatch) in enumerate(res["held"]):
            assert per_microbatch > 0
            in_flight = m if case[2] == "gpipe" else min(2 - r, m)
            assert held == in_flight * per_microbatch


def test_partition_print(runs):
    ranks = runs[0][pc.case_id(("cnn", 4, "gpipe", "3"))]
    text = str(ranks[0]["partition"])
    assert "2 stages (split points 3:BEGINNING)" in text
    # the CNN's first stage ends with the first pooling: (2, 32, 4, 4) float32 crosses the cut
    assert "stage 0: 5 ops" in text and "modules Sequential.0 .. Sequential.2" in text
    assert f"cut 0|1: {2 * 32 * 4 * 4 * 4 / 1000:.1f} KB in 1 value(s)" in text
    assert "bubble measured" in runs[1] and "ideal (S-1)/(M+S-1)" in runs[1]


def test_step_refusals(runs):
    first, second = runs[0]["errors"]["errors"]
    assert "of shape (6, 20) does not split into 4 equal microbatches" in first
    assert "in 4 microbatches of shape (1, 20); the pipeline was captured for (2, 20)" in second
