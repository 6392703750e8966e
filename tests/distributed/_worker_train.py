"""Run under ``ember run -n W`` (or plain python: W=1): collectives, DistributedDataParallel,
SyncBatchNorm and DistributedSampler; every rank writes its results to OUT/rank<r>.npz for
tests/distributed/test_distributed.py to compare with references."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common  # noqa: E402

import ember  # noqa: E402
import ember.distributed as dist  # noqa: E402
from ember import nn  # noqa: E402
from ember.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from ember.utils.data import DistributedSampler  # noqa: E402

out_dir = sys.argv[1]
dist.init_process_group("mpi")
r, w = dist.get_rank(), dist.get_world_size()
res = {}
Op = dist.ReduceOp

# ---- collectives
base = np.arange(1, 5, dtype=np.float32) + r
for op in (Op.SUM, Op.AVG, Op.MAX, Op.MIN, Op.PRODUCT):
    t = ember.tensor(base)
    dist.all_reduce(t, op=op)
    res[f"all_reduce_{op.name}"] = t.numpy()
t = ember.tensor(base)
work = dist.all_reduce(t, async_op=True)
work.wait()
res["async_done"] = np.array(work.is_completed())
res["async_sum"] = t.numpy()
t = ember.tensor(base).to(ember.bfloat16)
dist.all_reduce(t)
res["bf16_sum"] = t.float().numpy()
t = ember.tensor(np.array([r == 0, True, False]))
dist.all_reduce(t, op=Op.MAX)
res["bool_max"] = t.numpy()
t = ember.tensor(np.array([6 + r, 3], dtype=np.int64))
dist.all_reduce(t, op=Op.BAND)
res["int_band"] = t.numpy()
nc = ember.tensor(np.arange(6, dtype=np.float64).reshape(2, 3) * (r + 1)).t()  # non-contiguous
dist.broadcast(nc, src=w - 1)
res["broadcast"] = nc.numpy()
parts = [ember.zeros(2, 3) for _ in range(w)]
dist.all_gather(parts, ember.full((2, 3), float(r)))
res["all_gather"] = np.stack([p.numpy() for p in parts])
cat = ember.zeros(2 * w, 3)
dist.all_gather_into_tensor(cat, ember.full((2, 3), float(r)))
res["all_gather_into_tensor"] = cat.numpy()
out = ember.zeros(2)
dist.reduce_scatter(out, [ember.full((2,), float(10 * r + i)) for i in range(w)])
res["reduce_scatter"] = out.numpy()
out = ember.zeros(2)
dist.reduce_scatter_tensor(
    out, ember.tensor(np.arange(2 * w, dtype=np.float32) * (r + 1)), op=Op.AVG
)
res["reduce_scatter_tensor_avg"] = out.numpy()
got = ember.zeros(3)
sent = dist.isend(ember.full((3,), float(r)), (r + 1) % w)
dist.irecv(got, (r - 1) % w).wait()
sent.wait()
res["ring"] = got.numpy()
if w > 1:
    try:
        dist.all_reduce(ember.zeros(2 + r))
        res["mismatch"] = np.array("no error")
    except dist.DistributedError as exc:
        res["mismatch"] = np.array(str(exc))
    try:
        dist.broadcast(ember.zeros(2, dtype=ember.float64 if r else ember.float32), 0)
        res["mismatch_dtype"] = np.array("no error")
    except dist.DistributedError as exc:
        res["mismatch_dtype"] = np.array(str(exc))
dist.barrier()

# ---- DistributedDataParallel against one process on the whole batch
x, y = _common.batch()
rows = slice(r * _common.B // w, (r + 1) * _common.B // w)
for config in _common.CONFIGS:
    net = _common.model(config, seed=r)  # different on each rank: DDP takes rank 0's
    if config == "syncbn":
        net = nn.SyncBatchNorm.convert_sync_batchnorm(net)
    ddp = DDP(
        net,
        bucket_cap_mb=1e-4 if config == "sgd_small_buckets" else 25,
        find_unused_parameters=config == "unused",
    )
    if config == "sgd_small_buckets":
        res["buckets"] = np.array(len(ddp._buckets))
    _common.train(config, ddp, x[rows], y[rows], ddp.no_sync)
    for k, v in _common.state(ddp.module).items():
        res[f"ddp_{config}_{k}"] = v
    if config == "unused":
        res["unused_grad_is_none"] = np.array(net.unused.weight.grad is None)

try:
    DDP(nn.Linear(3, 2 + r))
    res["ddp_shape_error"] = np.array("no error")
except dist.DistributedError as exc:
    res["ddp_shape_error"] = np.array(str(exc))

# ---- SyncBatchNorm on (N, C, H, W): each rank's rows of the global batch
rng = np.random.RandomState(2)
gx = rng.standard_normal((8, 3, 4, 4))
gc = rng.standard_normal((8, 3, 4, 4))
rows = slice(r * 8 // w, (r + 1) * 8 // w)
bn = nn.SyncBatchNorm(3, momentum=0.3).double()
with ember.no_grad():
    bn.weight.copy_(ember.tensor([1.5, 0.5, -1.0]))
    bn.bias.copy_(ember.tensor([0.1, 0.2, 0.3]))
xs = ember.tensor(gx[rows], requires_grad=True)
out = bn(xs)
(out * ember.tensor(gc[rows])).sum().backward()
res["sbn_y"] = out.detach().numpy()
res["sbn_dx"] = xs.grad.numpy()
res["sbn_dw"] = bn.weight.grad.numpy()
res["sbn_db"] = bn.bias.grad.numpy()
res["sbn_rm"] = bn.running_mean.numpy()
res["sbn_rv"] = bn.running_var.numpy()

# ---- DistributedSampler from the process group
sampler = DistributedSampler(range(11), seed=3)
sampler.set_epoch(2)
res["sampler"] = np.array(list(sampler))

np.savez(os.path.join(out_dir, f"rank{r}.npz"), world=np.array(w), **res)
dist.destroy_process_group()
