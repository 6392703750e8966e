"""ZeroRedundancyOptimizer and resuming on another number of ranks (each job one worker launch,
tests/distributed/_worker_zero.py and _worker_resume.py), against ember's plain Adam in this
process on the global batch; the state dict against plain Adam's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.utils.data import DataLoader, DistributedSampler, TensorDataset

from . import _zero_common as zc

pytest.importorskip("mpi4py", reason="ember.distributed needs mpi4py: pip install 'ember[mpi]'")
# one worker runs the file: its module fixture launches one MPI job for all its tests, which
# each xdist worker running one of them would launch again
pytestmark = pytest.mark.xdist_group("distributed/test_zero")

from ember.distributed.launch import find_mpiexec, mpiexec_env  # noqa: E402

HERE = Path(__file__).resolve().parent
SRC = str(HERE.parents[1] / "src")
LIMIT_S = 120  # a hang guard for the whole job, not a timing
TOL = {"rtol": 1e-5, "atol": 1e-6}  # float32 gradient sums in another order, a few steps


def _launch(nproc: int | None, script: str, *args: str) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    if nproc is None:  # a world of one, without mpiexec
        command = [sys.executable, str(HERE / script), *args]
    else:
        try:
            find_mpiexec()
        except ember.EmberError as exc:
            pytest.skip(str(exc))
        command = [sys.executable, "-m", "ember.cli", "run", "-n", str(nproc)]
        command += [str(HERE / script), *args]
    done = subprocess.run(
        command, env=mpiexec_env(env), capture_output=True, text=True, timeout=LIMIT_S
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _adam_reference(steps: int):
    net = zc.model(seed=0)
    first, second = zc.groups(net)
    opt = ember.optim.Adam(first, lr=0.01)
    opt.add_param_group(second)
    x, y = zc.batch()
    for _ in range(steps):
        zc.step(net, opt, x, y)
    return net, opt


@pytest.fixture(scope="module")
def zero_job(tmp_path_factory):
    out = tmp_path_factory.mktemp("zero")
    _launch(2, "_worker_zero.py", str(out))
    return [dict(np.load(out / f"rank{r}.npz")) for r in range(2)]


def test_zero_adam_on_2_ranks_equals_adam_on_the_global_batch(zero_job):
    net, _ = _adam_reference(3)
    for res in zero_job:
        for k, v in zc.state(net).items():
            np.testing.assert_allclose(res[f"bv0_{k}"], v, **TOL)
            np.testing.assert_allclose(res[f"bv1_{k}"], v, **TOL)
    # PyTorch's greedy partition of (96, 16) then (256, 16, 48, 3) elements over 2 ranks:
    # 96 -> rank 0, 16 -> rank 1 | 256 -> rank 1, 48, 16, 3 -> rank 0
    assert zero_job[0]["bv0_owned"].tolist() == [1, 3]
    assert zero_job[1]["bv0_owned"].tolist() == [1, 1]


def test_consolidated_state_dict_is_plain_adams(zero_job):
    _, opt = _adam_reference(3)
    expect = zc.flat_optimizer_state(opt.state_dict(), "sd_")
    last = zero_job[1]
    assert set(k for k in last if k.startswith("sd_") and k != "sd_lrs") == set(expect)
    for k, v in expect.items():
        np.testing.assert_allclose(last[k], v, rtol=1e-4, atol=1e-9)  # moments of sums
    assert last["sd_lrs"].tolist() == [0.01, 0.005]
    message = str(zero_job[0]["state_dict_error"])
    assert "consolidate_state_dict" in message


def test_loaded_state_continues_as_plain_adam(zero_job):
    net, _ = _adam_reference(5)
    for res in zero_job:
        for k, v in zc.state(net).items():
            np.testing.assert_allclose(res[f"resumed_{k}"], v, **TOL)


def test_state_memory_is_sharded(zero_job):
    _, opt = _adam_reference(1)
    full = sum(
        t._data.nbytes for entries in opt.state.values() for t in entries.values()
    )  # two moments per element and a float32 step count per parameter
    assert full == (96 + 16 + 256 + 16 + 48 + 3) * 2 * 4 + 6 * 4
    per_rank = zero_job[0]["state_bytes"].tolist()
    assert per_rank == zero_job[1]["state_bytes"].tolist()
    assert sum(per_rank) == full
    assert per_rank == [(96 + 48 + 16 + 3) * 8 + 4 * 4, (16 + 256) * 8 + 2 * 4]
    assert "rank" in str(zero_job[0]["report"]) and f"{full:,}" in str(zero_job[0]["report"])


def _reference_epochs(epochs: int) -> dict:
    """Plain Adam in this process on the global batches a 1-replica DistributedSampler draws."""
    net = zc.model(seed=0)
    first, second = zc.groups(net)
    opt = ember.optim.Adam([{"params": first}, second], lr=0.01)
    x, y = zc.batch(zc.N, seed=4)
    data = TensorDataset(ember.tensor(x), ember.tensor(y))
    sampler = DistributedSampler(data, num_replicas=1, rank=0, seed=3)
    loader = DataLoader(data, batch_size=zc.B, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        zc.epoch(net, opt, loader)
    return zc.state(net)


@pytest.mark.parametrize("first,then", [(2, None), (None, 2)], ids=["2 to 1 rank", "1 to 2 ranks"])
def test_a_checkpoint_resumes_on_another_number_of_ranks(tmp_path, first, then):
    """Epoch 1 on one number of ranks, epochs 2-3 on another from rank 0's checkpoint: the
    parameters of 3 epochs on one process, so the sampler's epochs and the Adam state carried on
    (a DistributedSampler's W shards of a global batch of B are the B samples one replica draws)."""
    _launch(first, "_worker_resume.py", str(tmp_path), "-", "0", "1")
    checkpoint = str(tmp_path / "after1.ckpt")
    assert ember.load(checkpoint)["epoch"] == 1
    _launch(then, "_worker_resume.py", str(tmp_path), checkpoint, "1", "3")
    final = dict(np.load(tmp_path / "final3.npz"))
    for k, v in _reference_epochs(3).items():
        np.testing.assert_allclose(final[k], v, **TOL)


def test_one_rank_state_dict_round_trip_and_errors():
    """In this process (a world of one): the wrapper's state dict is Adam's, bit for bit, and
    loads back; the arguments PyTorch rejects are rejected."""
    import ember.distributed as dist
    from ember.distributed.optim import ZeroRedundancyOptimizer

    dist.init_process_group()
    try:
        net, opt = _adam_reference(2)
        twin = zc.model(seed=0)
        first, second = zc.groups(twin)
        zero = ZeroRedundancyOptimizer(first, ember.optim.Adam, lr=0.01)
        zero.add_param_group(second)
        x, y = zc.batch()
        for _ in range(2):
            zc.step(twin, zero, x, y)
        for k, v in zc.state(net).items():
            np.testing.assert_array_equal(zc.state(twin)[k], v)
        with pytest.raises(ember.EmberError, match="consolidate_state_dict"):
            zero.state_dict()
        zero.consolidate_state_dict()
        ours = zc.flat_optimizer_state(zero.state_dict(), "")
        theirs = zc.flat_optimizer_state(opt.state_dict(), "")
        assert ours.keys() == theirs.keys()
        for k in ours:
            np.testing.assert_array_equal(ours[k], theirs[k])
        zero.load_state_dict(opt.state_dict())
        # the loaded buffers equal the source's (shared where the dtypes match, as PyTorch's
        # Optimizer.load_state_dict: only a cast copies)
        loaded = zero.optim.state[first[0]]["exp_avg"]
        np.testing.assert_array_equal(loaded.numpy(), opt.state[net[0].weight]["exp_avg"].numpy())
        with pytest.raises(ember.EmberError, match="state for parameter 9"):
            zero.load_state_dict(
                {"state": {9: {}}, "param_groups": opt.state_dict()["param_groups"]}
            )
        with pytest.raises(ember.EmberError, match="overlap_with_ddp"):
            ZeroRedundancyOptimizer(first, ember.optim.Adam, overlap_with_ddp=True, lr=0.1)
        with pytest.raises(ember.EmberError, match="optimizer_class"):
            ZeroRedundancyOptimizer(first, "adam", lr=0.1)

        @ember.function
        def compiled_step(xs, ys):
            ember.nn.functional.mse_loss(twin(xs), ys).backward()
            zero.step()

        with pytest.raises(ember.EmberError, match="eagerly only"):
            compiled_step(ember.tensor(x), ember.tensor(y))
        zero.zero_grad()
        sched = ember.optim.lr_scheduler.StepLR(zero, step_size=1, gamma=0.5)
        zc.step(twin, zero, x, y)
        sched.step()
        assert zero.param_groups[0]["lr"] == 0.005
        zc.step(twin, zero, x, y)  # the wrapped optimizer steps at the scheduled rate
        assert zero.optim.param_groups[0]["lr"] == 0.005
    finally:
        dist.destroy_process_group()
