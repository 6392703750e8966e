"""Run under ``ember run -n W``: DistributedDataParallel with ZeroRedundancyOptimizer(Adam) on
rows of the global batch (two param groups, the second added by add_param_group; with and
without parameters_as_bucket_view), the consolidated state dict, a load into a fresh ZeRO
optimizer that then keeps training, and the state memory report. Rank r writes OUT/rank<r>.npz
for tests/distributed/test_zero.py."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _zero_common as zc  # noqa: E402

import ember  # noqa: E402
import ember.distributed as dist  # noqa: E402
from ember.distributed.optim import ZeroRedundancyOptimizer  # noqa: E402
from ember.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

out_dir = sys.argv[1]
dist.init_process_group()
r, w = dist.get_rank(), dist.get_world_size()
rows = slice(r * zc.B // w, (r + 1) * zc.B // w)
x, y = zc.batch()
res = {}

for bucket_view in (False, True):
    net = zc.model(seed=r)  # different on each rank: DDP takes rank 0's
    ddp = DDP(net)
    first, second = zc.groups(net)
    opt = ZeroRedundancyOptimizer(
        first, ember.optim.Adam, parameters_as_bucket_view=bucket_view, lr=0.01
    )
    opt.add_param_group(second)
    for _ in range(3):
        zc.step(ddp, opt, x[rows], y[rows])
    tag = f"bv{int(bucket_view)}_"
    res.update({tag + k: v for k, v in zc.state(net).items()})
    res[tag + "owned"] = np.array([len(g["params"]) for g in opt.optim.param_groups])

    if bucket_view:
        break
    report = opt.memory_report()
    res["state_bytes"] = np.array(report.per_rank)
    res["report"] = np.array(str(report))
    # the state gathered on the last rank; the others have none to give
    opt.consolidate_state_dict(to=w - 1)
    try:
        full = opt.state_dict()
    except dist.DistributedError as exc:
        res["state_dict_error"] = np.array(str(exc))
    else:
        res.update(zc.flat_optimizer_state(full, "sd_"))
        res["sd_lrs"] = np.array([g["lr"] for g in full["param_groups"]])
        ember.save(full, os.path.join(out_dir, "zero_optimizer.ckpt"))
        ember.save(net.state_dict(), os.path.join(out_dir, "zero_model.ckpt"))
    dist.barrier()
    # a fresh model and optimizer from the saved state continue for two steps
    net2 = zc.model(seed=5)
    net2.load_state_dict(ember.load(os.path.join(out_dir, "zero_model.ckpt")))
    ddp2 = DDP(net2)
    a, b = zc.groups(net2)
    opt2 = ZeroRedundancyOptimizer([{"params": a}, b], ember.optim.Adam, lr=0.01)
    opt2.load_state_dict(ember.load(os.path.join(out_dir, "zero_optimizer.ckpt")))
    for _ in range(2):
        zc.step(ddp2, opt2, x[rows], y[rows])
    res.update({"resumed_" + k: v for k, v in zc.state(net2).items()})

np.savez(os.path.join(out_dir, f"rank{r}.npz"), world=np.array(w), **res)
dist.destroy_process_group()
