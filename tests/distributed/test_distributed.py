"""ember.distributed on 2 MPI ranks (``ember run -n 2``, i.e. ``mpiexec -n 2 --oversubscribe``)
and on 1 (plain python): each job runs one worker script that does many checks in one launch
(MPI starts in about a second) and writes its results; the tests compare them with independent
references: NumPy for the collectives, PyTorch for SyncBatchNorm and DistributedSampler, and
ember in one process on the whole batch for DistributedDataParallel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember import nn

from . import _common

pytest.importorskip("mpi4py", reason="ember.distributed needs mpi4py: pip install 'ember[mpi]'")
# one worker runs the file: its module fixture launches one MPI job for all its tests, which
# each xdist worker running one of them would launch again
pytestmark = pytest.mark.xdist_group("distributed/test_distributed")
torch = pytest.importorskip("torch")

from ember.distributed.launch import find_mpiexec, mpiexec_command, mpiexec_env  # noqa: E402

HERE = Path(__file__).resolve().parent
SRC = str(HERE.parents[1] / "src")
LIMIT_S = 120  # a hang guard for the whole job, not a timing


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return mpiexec_env(env)


def _mpiexec_or_skip() -> None:
    try:
        find_mpiexec()
    except ember.EmberError as exc:
        pytest.skip(str(exc))


def _launch(nproc: int | None, script: str, *args: str) -> subprocess.CompletedProcess:
    if nproc is None:  # a world of one, without mpiexec
        command = [sys.executable, str(HERE / script), *args]
    else:
        command = [sys.executable, "-m", "ember.cli", "run", "-n", str(nproc)]
        command += [str(HERE / script), *args]
    return subprocess.run(
        command, env=_env(), capture_output=True, text=True, timeout=LIMIT_S, cwd=str(HERE)
    )


@pytest.fixture(scope="module", params=[2, None], ids=["2 ranks", "1 rank, no mpiexec"])
def job(request, tmp_path_factory):
    if request.param is not None:
        _mpiexec_or_skip()
    out = tmp_path_factory.mktemp("dist")
    done = _launch(request.param, "_worker_train.py", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    files = sorted(out.glob("rank*.npz"))
    ranks = [dict(np.load(f)) for f in files]
    assert len(ranks) == (request.param or 1)
    return ranks


def test_collectives(job):
    w = len(job)
    for r, res in enumerate(job):
        assert int(res["world"]) == w
        values = np.stack([np.arange(1, 5, dtype=np.float32) + k for k in range(w)])
        expect = {
            "SUM": values.sum(0),
            "AVG": values.mean(0),
            "MAX": values.max(0),
            "MIN": values.min(0),
            "PRODUCT": values.prod(0),
        }
        for name, value in expect.items():
            np.testing.assert_allclose(res[f"all_reduce_{name}"], value, rtol=1e-6)
        assert bool(res["async_done"])
        np.testing.assert_array_equal(res["async_sum"], values.sum(0))
        np.testing.assert_array_equal(res["bf16_sum"], values.sum(0))  # small integers: exact
        np.testing.assert_array_equal(res["bool_max"], [True, True, False])
        band = np.bitwise_and.reduce([np.array([6 + k, 3]) for k in range(w)])
        np.testing.assert_array_equal(res["int_band"], band)
        np.testing.assert_array_equal(res["broadcast"], (np.arange(6.0).reshape(2, 3) * w).T)
        gathered = np.stack([np.full((2, 3), float(k)) for k in range(w)])
        np.testing.assert_array_equal(res["all_gather"], gathered)
        np.testing.assert_array_equal(res["all_gather_into_tensor"], gathered.reshape(-1, 3))
        np.testing.assert_array_equal(
            res["reduce_scatter"], [sum(10 * k + r for k in range(w))] * 2
        )
        rows = np.stack([np.arange(2 * w, dtype=np.float32) * (k + 1) for k in range(w)])
        np.testing.assert_allclose(
            res["reduce_scatter_tensor_avg"], rows.mean(0)[2 * r : 2 * r + 2]
        )
        np.testing.assert_array_equal(res["ring"], [float((r - 1) % w)] * 3)
        if w > 1:
            message = str(res["mismatch"])
            assert "disagree" in message and "shape=(2,)" in message and "shape=(3,)" in message
            message = str(res["mismatch_dtype"])
            assert "float32" in message and "float64" in message
            message = str(res["ddp_shape_error"])
            assert "models differ" in message and "(2, 3)" in message and "(3, 3)" in message


@pytest.mark.parametrize("config", _common.CONFIGS)
def test_ddp_matches_one_process_on_the_whole_batch(job, config):
    net = _common.model(config, seed=0)
    x, y = _common.batch()
    _common.train(config, net, x, y)
    reference = _common.state(net)
    for res in job:
        for k, v in reference.items():
            # float32 sums in another order: a few ulps of the values after 3 steps
            np.testing.assert_allclose(res[f"ddp_{config}_{k}"], v, rtol=1e-5, atol=1e-6)
        if config == "unused":
            assert bool(res["unused_grad_is_none"])
    if len(job) > 1:
        assert int(job[0]["buckets"]) == 4  # 1e-4 MB: one parameter a bucket


def test_sync_batch_norm_matches_torch_on_the_global_batch(job):
    w = len(job)
    rng = np.random.RandomState(2)
    gx = torch.tensor(rng.standard_normal((8, 3, 4, 4)), requires_grad=True)
    gc = torch.tensor(rng.standard_normal((8, 3, 4, 4)))
    bn = torch.nn.BatchNorm2d(3, momentum=0.3).double()
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([1.5, 0.5, -1.0]))
        bn.bias.copy_(torch.tensor([0.1, 0.2, 0.3]))
    y = bn(gx)
    (y * gc).sum().backward()
    tol = {"rtol": 1e-10, "atol": 1e-12}  # float64 throughout
    for r, res in enumerate(job):
        rows = slice(r * 8 // w, (r + 1) * 8 // w)
        np.testing.assert_allclose(res["sbn_y"], y.detach().numpy()[rows], **tol)
        np.testing.assert_allclose(res["sbn_dx"], gx.grad.numpy()[rows], **tol)
        np.testing.assert_allclose(res["sbn_rm"], bn.running_mean.numpy(), **tol)
        np.testing.assert_allclose(res["sbn_rv"], bn.running_var.numpy(), **tol)
    np.testing.assert_allclose(sum(res["sbn_dw"] for res in job), bn.weight.grad.numpy(), **tol)
    np.testing.assert_allclose(sum(res["sbn_db"] for res in job), bn.bias.grad.numpy(), **tol)


def test_distributed_sampler_from_the_group_matches_torch(job):
    w = len(job)
    for r, res in enumerate(job):
        theirs = torch.utils.data.DistributedSampler(range(11), w, r, seed=3)
        theirs.set_epoch(2)
        assert res["sampler"].tolist() == list(theirs)


@pytest.mark.parametrize("mode", ["raise", "kill", "stall", "diverge"])
def test_a_failing_rank_ends_the_job(mode):
    _mpiexec_or_skip()
    done = _launch(2, "_worker_fault.py", mode)  # raises TimeoutExpired if the job hangs
    assert done.returncode != 0
    assert "went unnoticed" not in done.stdout
    if mode == "raise":
        assert "rank 1 fails on purpose" in done.stderr
    if mode == "kill":  # MPI's launcher saw the death and ended the job, naming the rank
        assert "rank 1" in done.stdout + done.stderr
    if mode in ("stall", "diverge"):  # rank 0 gave up waiting, and its error ended the job
        assert "did not complete within the process group's timeout" in done.stderr
    if mode == "stall":  # rank 1 sleeps: it cannot answer rank 0's liveness probe
        assert "rank 1 did not respond" in done.stderr
    if mode == "diverge":  # whichever rank gives up first, the other answers from its wait
        assert "waiting in different calls" in done.stderr
        assert "rank 1 in recv" in done.stderr and "rank 0 in all_reduce" in done.stderr


def test_distributed_sampler_matches_torch_for_every_argument():
    from ember.utils.data import DistributedSampler

    for n in (0, 1, 5, 10, 33):
        for replicas in (1, 2, 3, 4):
            for rank in range(replicas):
                for shuffle in (True, False):
                    for drop_last in (True, False):
                        ours = DistributedSampler(range(n), replicas, rank, shuffle, 7, drop_last)
                        theirs = torch.utils.data.DistributedSampler(
                            range(n), replicas, rank, shuffle, 7, drop_last
                        )
                        for epoch in (0, 1, 2**33):
                            ours.set_epoch(epoch)
                            theirs.set_epoch(epoch)
                            assert list(ours) == list(theirs) and len(ours) == len(theirs)
    with pytest.raises(ValueError, match="Invalid rank"):
        DistributedSampler(range(3), num_replicas=2, rank=2)


def test_ember_run_command_line(tmp_path):
    _mpiexec_or_skip()
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=2\n")
    command = mpiexec_command(3, ["train.py", "--x"], str(hostfile), env={"PYTHONPATH": "a"})
    assert command[1:] == ["-n", "3", "--oversubscribe", "--hostfile", str(hostfile)] + [
        "-x",
        "PYTHONPATH",
        sys.executable,
        "train.py",
        "--x",
    ]
    with pytest.raises(ember.EmberError, match="hostfile"):
        mpiexec_command(2, ["train.py"], str(tmp_path / "missing"))
    env = mpiexec_env({})
    assert ("OMPI_ALLOW_RUN_AS_ROOT" in env) == (os.geteuid() == 0)


def test_post_accumulate_grad_hook_matches_torch():
    seen, theirs = [], []
    w = ember.ones(3, requires_grad=True)
    tw = torch.ones(3, requires_grad=True)
    handle = w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    thandle = tw.register_post_accumulate_grad_hook(lambda t: theirs.append(t.grad.tolist()))
    for k in (2.0, 3.0):
        (w * k).sum().backward()
        (tw * k).sum().backward()
    ember.autograd.grad((w * 5).sum(), w)  # autograd.grad accumulates nothing: no call
    torch.autograd.grad((tw * 5).sum(), tw)
    handle.remove()
    thandle.remove()
    (w * 1).sum().backward()
    assert seen == theirs == [[2.0] * 3, [5.0] * 3]
    with pytest.raises(ember.EmberError, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_without_a_group_the_calls_say_so():
    import ember.distributed as dist

    assert not dist.is_initialized()
    with pytest.raises(ember.EmberError, match="init_process_group"):
        dist.get_rank()
    with pytest.raises(ember.EmberError, match="init_process_group"):
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2))


def test_missing_mpi4py_names_the_extra(monkeypatch):
    from ember.distributed import _mpi

    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py now raises ImportError
    with pytest.raises(ember.EmberError, match=r"pip install 'ember\[mpi\]'"):
        _mpi.mpi()


def test_ember_train_nproc_2(tmp_path):
    """`ember train --nproc 2` starts two ranks; rank 0 alone reports and writes the checkpoint,
    which a one-process run resumes."""
    _mpiexec_or_skip()
    checkpoint = str(tmp_path / "mlp.ckpt")
    common = ["-m", "ember.cli", "train", "--model", "mlp", "--epochs", "2", "--no-progress"]
    common += ["--checkpoint", checkpoint]
    done = subprocess.run(
        [sys.executable, *common, "--nproc", "2", "--stop-after", "1"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=LIMIT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("test accuracy:") == 1
    accuracy = float(done.stdout.split("test accuracy:")[1].split("%")[0]) / 100
    assert accuracy > 0.5  # 10 classes: far above chance after one epoch
    state = ember.load(checkpoint)
    assert state["epoch"] == 1 and not any(k.startswith("module.") for k in state["model"])
    resumed = subprocess.run(
        [sys.executable, *common, "--resume", checkpoint],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=LIMIT_S,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert ember.load(checkpoint)["epoch"] == 2
