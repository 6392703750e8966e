"""Train with DistributedDataParallel, ZeroRedundancyOptimizer(Adam) and a DistributedSampler
(global batch B, B/W rows a rank) from epoch START to STOP, resuming from CHECKPOINT when it is
not "-"; rank 0 writes the checkpoint (ember.save: atomic) to OUT/after<STOP>.ckpt and the final
parameters to OUT/final<STOP>.npz. Run on any number of ranks, including a plain python (W=1):
a checkpoint written on one number of ranks resumes on another.

usage: _worker_resume.py OUT CHECKPOINT START STOP"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _zero_common as zc  # noqa: E402

import ember  # noqa: E402
import ember.distributed as dist  # noqa: E402
from ember.distributed.optim import ZeroRedundancyOptimizer  # noqa: E402
from ember.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from ember.utils.data import DataLoader, DistributedSampler, TensorDataset  # noqa: E402

out_dir, checkpoint, start, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
dist.init_process_group()
r, w = dist.get_rank(), dist.get_world_size()
net = zc.model(seed=0)
ddp = DDP(net)
first, second = zc.groups(net)
opt = ZeroRedundancyOptimizer([{"params": first}, second], ember.optim.Adam, lr=0.01)
if checkpoint != "-":
    saved = ember.load(checkpoint)
    assert saved["epoch"] == start, (saved["epoch"], start)
    net.load_state_dict(saved["model"])
    opt.load_state_dict(saved["optimizer"])
x, y = zc.batch(zc.N, seed=4)
data = TensorDataset(ember.tensor(x), ember.tensor(y))
sampler = DistributedSampler(data, seed=3)
loader = DataLoader(data, batch_size=zc.B // w, sampler=sampler)
for epoch in range(start, stop):
    sampler.set_epoch(epoch)
    zc.epoch(ddp, opt, loader)
opt.consolidate_state_dict(to=0)
if r == 0:
    state = {"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": stop}
    ember.save(state, os.path.join(out_dir, f"after{stop}.ckpt"))
    np.savez(os.path.join(out_dir, f"final{stop}.npz"), **zc.state(net))
dist.destroy_process_group()
