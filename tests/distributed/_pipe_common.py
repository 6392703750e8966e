"""What the pipeline worker and tests/distributed/test_pipelining.py share: the cases (model,
microbatches, schedule, how the stages are cut), the global batch, the reference training step
(one process, the whole batch, eager)."""

from __future__ import annotations

import numpy as np

import ember
from ember import zoo

B = 8
STEPS = 2
# (zoo model, microbatches, schedule, split): split "cost" lets the cost model cut two stages,
# anything else is a module name the second stage begins at
CASES = [
    ("mlp", 4, "gpipe", "cost"),
    ("mlp", 8, "gpipe", "cost"),
    ("mlp", 4, "1f1b", "cost"),
    ("mlp", 8, "1f1b", "cost"),
    ("cnn", 4, "gpipe", "3"),
    ("cnn", 8, "gpipe", "3"),
    ("cnn", 4, "1f1b", "3"),
    ("cnn", 8, "1f1b", "3"),
    ("transformer", 4, "1f1b", "cost"),
    ("transformer", 8, "gpipe", "layer.linear1"),
]
# on 3 ranks: the feed-forward block cut twice, so the block's input (norm1's output) goes from
# stage 0 to stages 1 and 2 (one value, two readers, one of them two stages on); a GPT (token
# ids in, an embedding on stage 0) cut by the cost model
CASES3 = [
    ("transformer", 4, "1f1b", "layer.linear1,layer.linear2"),
    ("gpt", 4, "gpipe", "cost"),
]


def case_id(case) -> str:
    return "-".join(map(str, case))


def build(name: str):
    ember.manual_seed(0)
    sizes = zoo.SPECS[name].test_sizes
    model = zoo.build(name, ember, **sizes)
    x, y = zoo.inputs(name, B, seed=1, **sizes)
    return model, x, y


def optimizer(params):
    """SGD with momentum for every case: Adam divides each gradient by its own size, so where
    the exact gradient is zero (attention's key bias: softmax ignores a shift shared by all
    keys) it turns rounding noise, which differs with the order of the sums, into full steps."""
    return ember.optim.SGD(params, lr=0.05, momentum=0.9)


def loss_fn(out, y):
    return zoo.loss(ember, out, y)


def reference(name: str) -> dict:
    """STEPS eager steps on the whole batch: the losses, the parameters after them and the
    model's output in the first step."""
    model, x, y = build(name)
    opt = optimizer(model.parameters())
    res, losses = {}, []
    for _ in range(STEPS):
        opt.zero_grad()
        out = model(ember.tensor(x))
        res.setdefault("output", out.detach().numpy().copy())
        loss = loss_fn(out, ember.tensor(y))
        loss.backward()
        opt.step()
        losses.append(float(loss.item()))
    res.update({f"param/{n}": p.detach().numpy().copy() for n, p in model.named_parameters()})
    res["losses"] = np.array(losses)
    return res
