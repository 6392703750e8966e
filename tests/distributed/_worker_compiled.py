"""Run under ``ember run -n W`` (or plain python: W=1): DistributedDataParallel and SyncBatchNorm
inside ``ember.function`` training steps, and the functional collectives captured; every rank
writes its results to OUT/rank<r>.npz for tests/distributed/test_compiled.py."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common  # noqa: E402

import ember  # noqa: E402
import ember.distributed as dist  # noqa: E402
from ember import nn  # noqa: E402
from ember.distributed import functional as F  # noqa: E402
from ember.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

out_dir = sys.argv[1]
dist.init_process_group("mpi")
r, w = dist.get_rank(), dist.get_world_size()
res = {}
CONFIGS = ("sgd_small_buckets", "sgd", "adam", "syncbn", "accumulate")


def collectives(graph) -> list:
    """The graph's collective calls, in order: op, attributes, operand shapes."""
    return [
        f"{n.op.name}{tuple(tuple(v.shape) for v in n.inputs)}{sorted(n.attrs.items())}"
        for n in graph.nodes
        if n.kind == "call" and n.op.effect is not None
    ]


def make_step(config, ddp, opt):
    def step(x, y):
        opt.zero_grad()
        if config == "accumulate":  # two halves, the first without reducing (no_sync)
            half = x.shape[0] // 2
            with ddp.no_sync():
                (nn.functional.mse_loss(ddp(x[:half]), y[:half]) * 0.5).backward()
            loss = nn.functional.mse_loss(ddp(x[half:]), y[half:]) * 0.5
        else:
            loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        return loss

    return ember.function(step)


x, y = _common.batch()
rows = slice(r * _common.B // w, (r + 1) * _common.B // w)
for config in CONFIGS:
    net = _common.model(config, seed=r)  # different on each rank: DDP takes rank 0's
    if config == "syncbn":
        net = nn.SyncBatchNorm.convert_sync_batchnorm(net)
    ddp = DDP(net, bucket_cap_mb=1e-4 if config == "sgd_small_buckets" else 25)
    opt = _common.optimizer(config, ddp.parameters())
    step = make_step(config, ddp, opt)
    xs, ys = ember.tensor(x[rows]), ember.tensor(y[rows])
    for _ in range(_common.STEPS):
        step(xs, ys)
    for k, v in _common.state(ddp.module).items():
        res[f"ddp_{config}_{k}"] = v
    res[f"traces_{config}"] = np.array(step.stats.traces)
    res[f"hits_{config}"] = np.array(step.stats.hits)
    res[f"reasons_{config}"] = np.array(" | ".join(step.stats.retrace_reasons))
    for label, graph in (("captured", step._latest().captured_graph), ("optimized", step.graph)):
        res[f"collectives_{label}_{config}"] = np.array(collectives(graph), dtype=str)
    if config == "sgd_small_buckets":
        res["graph_text"] = np.array(str(step.graph))
        nodes = [n for n in step._latest().captured_graph.nodes if n.kind == "call"]
        starts = [i for i, n in enumerate(nodes) if n.op.name == "all_reduce_start"]
        waits = [i for i, n in enumerate(nodes) if n.op.name == "all_reduce_wait"]
        res["starts"], res["waits"] = np.array(starts), np.array(waits)
        # each start's operand is the bucket's flat gradient: the nodes just before it make it
        res["compute_between"] = np.array(
            sum(1 for n in nodes[starts[0] : waits[0]] if n.op.effect is None and n.op.cost)
            if starts
            else 0
        )

# ---- no_sync() around calls of a captured forward and backward (PyTorch's usual pattern):
# the flag is part of the step's key, so each state has its graph; the optimizer steps eagerly
net = _common.model("accumulate", seed=r)
ddp = DDP(net)
opt = _common.optimizer("accumulate", ddp.parameters())


def forward_backward(xb, yb):
    (nn.functional.mse_loss(ddp(xb), yb) * 0.5).backward()


fb = ember.function(forward_backward)
half = len(x[rows]) // 2
parts = [
    (ember.tensor(x[rows][k]), ember.tensor(y[rows][k]))
    for k in (slice(0, half), slice(half, None))
]
for _ in range(_common.STEPS):
    opt.zero_grad()
    with ddp.no_sync():
        fb(*parts[0])
    fb(*parts[1])
    opt.step()
for k, v in _common.state(ddp.module).items():
    res[f"ddp_outside_{k}"] = v
res["traces_outside"] = np.array(fb.stats.traces)
res["reasons_outside"] = np.array(" | ".join(fb.stats.retrace_reasons))

# ---- ember.compile(ddp_model): a captured forward, its AOT backward run by eager autograd;
# the optimizer and the accumulation (no_sync) eager
for config in ("sgd", "accumulate"):
    net = _common.model(config, seed=r)
    ddp = DDP(net)
    model = ember.compile(ddp)
    _common.train(config, model, x[rows], y[rows], ddp.no_sync)
    for k, v in _common.state(net).items():
        res[f"compile_module_{config}_{k}"] = v

# ---- the functional collectives captured, against eager
base = ember.tensor(np.arange(1, 5, dtype=np.float32) + r, requires_grad=True)


def reduce_twice(t):
    s = F.all_reduce(t * 2, "sum")
    b, h = F.all_reduce_start(t, dist.ReduceOp.AVG)
    return s, F.wait_tensor(b, h, "avg"), F.broadcast(t, w - 1)


compiled = ember.function(reduce_twice)
for label, fn in (("eager", reduce_twice), ("compiled", compiled)):
    s, a, b = fn(base)
    res[f"fn_{label}_sum"], res[f"fn_{label}_avg"], res[f"fn_{label}_bcast"] = (
        s.detach().numpy(),
        a.detach().numpy(),
        b.detach().numpy(),
    )
grad_fn = ember.function(
    lambda t: ember.grad(lambda u: (F.all_reduce(u, "sum") * (r + 1)).sum())(t)
)
res["grad_compiled"] = grad_fn(base.detach()).numpy()

np.savez(os.path.join(out_dir, f"rank{r}.npz"), world=np.array(w), **res)
dist.destroy_process_group()
