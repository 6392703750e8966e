"""Regressions of hunt50: what PyTorch programs read of a result's history and memory, and the
checkpoint allowlist.

* ``type(y.grad_fn).__name__`` (and ``grad_fn.name()``, ``next_functions``) is PyTorch's node
  name for the common ops (``MulBackward0``, ``AddmmBackward0``, ``MeanBackward1``, ...): ops
  name their nodes by their ``grad_fn`` rule, composites rename their result's node.
* ``untyped_storage()`` / ``storage()`` / ``data_ptr()`` answer the usual "do these share
  memory" checks as PyTorch's do.
* ``torch.serialization.add_safe_globals`` / ``safe_globals`` let a checkpoint hold the
  program's own classes (a Namespace of hyperparameters, a dataclass, an enum), in PyTorch's
  files and in ember's, and nothing else.
* Nodes' ``register_hook`` / ``register_prehook`` / ``metadata`` and AccumulateGrad's hook (the
  ``p.expand_as(p).grad_fn.next_functions[0][0]`` idiom); optimizers' step and state-dict
  hooks, also on a program's own Optimizer subclass.
* Embedding's ``max_norm`` renorm is PyTorch's bit for bit; a scripted module is saved once it
  has run.
"""

import argparse
import dataclasses
import enum
import importlib
import io

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _expressions(lib):
    F = lib.nn.functional
    x = lib.tensor(np.linspace(0.1, 1.2, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    x3 = lib.tensor(np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4), requires_grad=True)
    w = lib.tensor(np.ones((4, 5), np.float32), requires_grad=True)
    v = lib.tensor(np.ones(4, np.float32), requires_grad=True)
    lin = lib.nn.Linear(4, 5)
    lin_nb = lib.nn.Linear(4, 5, bias=False)
    index = lib.tensor([0, 2])
    return {
        "mul": lambda: x * 2,
        "add": lambda: x + x,
        "linear": lambda: lin(x),
        "linear 3-d": lambda: lin(x3),
        "linear without bias": lambda: lin_nb(x),
        "mm": lambda: x @ w,
        "bmm": lambda: lib.bmm(x3, x3.transpose(1, 2)),
        "dot": lambda: v @ v,
        "mv": lambda: x @ v,
        "view": lambda: x.view(12),
        "flatten": lambda: x3.flatten(1),
        "t": lambda: x.t(),
        "transpose": lambda: x.transpose(0, 1),
        "permute": lambda: x3.permute(2, 0, 1),
        "unsqueeze": lambda: x.unsqueeze(0),
        "squeeze dim": lambda: x[None].squeeze(0),
        "select": lambda: x[0],
        "slice": lambda: x[1:],
        "select in dim 1": lambda: x[:, 1],
        "new axis": lambda: x[None],
        "index": lambda: x[index],
        "cat": lambda: lib.cat([x, x]),
        "stack": lambda: lib.stack([x, x]),
        "expand": lambda: v.expand(3, 4),
        "sum": lambda: x.sum(),
        "sum over a dim": lambda: x.sum(1),
        "mean": lambda: x.mean(),
        "mean over a dim": lambda: x.mean(1),
        "max": lambda: x.max(),
        "max over a dim": lambda: x.max(1)[0],
        "amax": lambda: x.amax(1),
        "min over a dim kept": lambda: lib.min(x, 0, keepdim=True).values,
        "var": lambda: x.var(),
        "std": lambda: x.std(),
        "relu": lambda: lib.relu(x),
        "sigmoid": lambda: lib.sigmoid(x),
        "tanh": lambda: lib.tanh(x),
        "softmax": lambda: lib.softmax(x, 1),
        "log_softmax": lambda: F.log_softmax(x, 1),
        "clone": lambda: x.clone(),
        "to float64": lambda: x.to(lib.float64),
        "clamp": lambda: x.clamp(0, 1),
        "repeat": lambda: x.repeat(2, 1),
        "masked_fill": lambda: x.masked_fill(x > 0.5, 0.0),
        "where": lambda: lib.where(x > 0.5, x, x * 2),
        "embedding": lambda: F.embedding(index, x),
        "layer_norm": lambda: F.layer_norm(x, (4,)),
        "batch_norm": lambda: lib.nn.BatchNorm1d(4)(x),
        "conv2d": lambda: F.conv2d(x[None, None], x[None, None, :2, :2]),
        "max_pool2d": lambda: F.max_pool2d(x[None, None], 2),
        "avg_pool2d": lambda: F.avg_pool2d(x[None, None], 2),
        "cross_entropy": lambda: F.cross_entropy(x, lib.tensor([0, 1, 2])),
        "nll_loss": lambda: F.nll_loss(x, lib.tensor([0, 1, 2])),
        "mse_loss": lambda: F.mse_loss(x, x.detach() * 2),
        "mse_loss summed": lambda: F.mse_loss(x, x.detach() * 2, reduction="sum"),
        "l1_loss": lambda: F.l1_loss(x, x.detach() * 2),
        "smooth_l1_loss": lambda: F.smooth_l1_loss(x, x.detach() * 2),
        "bce_with_logits": lambda: F.binary_cross_entropy_with_logits(x, x.detach() / 2),
        "bce": lambda: F.binary_cross_entropy(
            lib.sigmoid(x).detach().requires_grad_(), x.detach() / 2
        ),
        "norm": lambda: x.norm(),
        "logsigmoid": lambda: F.logsigmoid(x),
    }


@pytest.mark.parametrize("case", sorted(_expressions(torch)))
def test_grad_fn_class_names_are_pytorchs(case):
    theirs = _expressions(torch)[case]()
    ours = _expressions(ember)[case]()
    name = type(theirs.grad_fn).__name__
    assert type(ours.grad_fn).__name__ == name
    assert ours.grad_fn.name() == name and repr(ours.grad_fn).startswith(f"<{name}")
    assert isinstance(ours.grad_fn, ember.autograd.graph.Node)


def test_next_functions_name_the_producers():
    def chain(lib):
        x = lib.ones(3, 4, requires_grad=True)
        w = lib.ones(4, 2, requires_grad=True)
        y = (x * 2) @ w
        fn = y.sum().grad_fn
        names = []
        while fn is not None:
            names.append(type(fn).__name__)
            fn = next((f for f, _ in fn.next_functions if f is not None), None)
        leaf = y.grad_fn.next_functions[1][0]
        return names, type(leaf).__name__, leaf.variable is w

    assert chain(ember) == chain(torch)


def test_custom_function_nodes_are_named_after_the_function():
    class MyExp(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    y = MyExp.apply(ember.ones(2, requires_grad=True))
    assert type(y.grad_fn).__name__ == "MyExpBackward" == y.grad_fn.name()
    y.sum().backward()


def _sharing(lib):
    x = lib.arange(12.0).reshape(3, 4)

    def same(a, b):
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()

    return [
        same(x, x.view(12)),
        same(x, x[1:]),
        same(x, x.t()),
        same(x, x.detach()),
        same(x, x.clone()),
        same(x, x.contiguous()),
        same(x, x.t().contiguous()),
        same(x, x + 0),
        x.untyped_storage().nbytes(),
        x[1:].untyped_storage().nbytes(),
        x[1].data_ptr() - x.data_ptr(),
        x[1].storage_offset(),
        x.untyped_storage().data_ptr() == x.data_ptr(),
        len(x.untyped_storage()),
    ]


def test_storage_sharing_answers_as_pytorchs():
    assert _sharing(ember) == _sharing(torch)


def test_typed_storage_reads_the_elements():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = ember.arange(6.0)[2:].storage(), torch.arange(6.0)[2:].storage()
    assert ours.tolist() == theirs.tolist() and len(ours) == len(theirs)
    assert ours.element_size() == theirs.element_size() and ours[1] == theirs[1]


class Mode(enum.Enum):
    TRAIN = "train"
    EVAL = "eval"


@dataclasses.dataclass
class Config:
    lr: float
    widths: list
    mode: Mode = Mode.TRAIN


def _checkpoint(lib):
    model = lib.nn.Linear(3, 2)
    opt = lib.optim.Adam(model.parameters(), lr=0.1)
    model(lib.ones(4, 3)).sum().backward()
    opt.step()
    return {
        "model": model.state_dict(),
        "optim": opt.state_dict(),
        "args": argparse.Namespace(lr=0.1, epochs=3),
        "config": Config(0.1, [8, 4], Mode.EVAL),
    }


@pytest.mark.parametrize("writer", ["torch", "ember"])
def test_safe_globals_allow_the_programs_own_classes(writer):
    buf = io.BytesIO()
    if writer == "torch":
        torch.save(_checkpoint(torch), buf)
    else:
        ember.save(_checkpoint(ember), buf)
    buf.seek(0)
    with pytest.raises(ember.errors.CheckpointError, match="add_safe_globals"):
        ember.load(buf, weights_only=True)
    assert ember.serialization.get_safe_globals() == []
    buf.seek(0)
    try:
        ember.serialization.add_safe_globals([argparse.Namespace])
        with ember.serialization.safe_globals([Config, Mode]):
            out = ember.load(buf, weights_only=True)
        assert ember.serialization.get_safe_globals() == [argparse.Namespace]
    finally:
        ember.serialization.clear_safe_globals()
    assert out["args"] == argparse.Namespace(lr=0.1, epochs=3)
    assert out["config"] == Config(0.1, [8, 4], Mode.EVAL)
    model = ember.nn.Linear(3, 2)
    model.load_state_dict(out["model"])
    opt = ember.optim.Adam(model.parameters())
    opt.load_state_dict(out["optim"])
    assert opt.param_groups[0]["lr"] == 0.1
    assert float(opt.state_dict()["state"][0]["step"]) == 1.0


def _node_hook_log(lib):
    p = lib.nn.Parameter(lib.tensor([1.0, -2.0, 3.0]))
    log = []
    acc = p.expand_as(p).grad_fn.next_functions[0][0]
    acc.register_hook(lambda gi, go: log.append(("acc", len(gi), go[0].tolist(), p.grad.tolist())))
    y = (p * 2).exp().sum()
    node = y.grad_fn.next_functions[0][0]  # ExpBackward0
    node.register_prehook(lambda go: log.append(("pre", go[0].tolist())))
    node.register_hook(lambda gi, go: (gi[0] * 0.5,))  # halves what reaches p
    handle = node.register_hook(lambda gi, go: log.append(("removed",)))
    handle.remove()
    node.metadata["seen"] = True
    y.backward()
    (p * 3).sum().backward()
    return log, p.grad.tolist(), type(node).__name__, node.metadata


def test_node_hooks_and_accumulate_grad_hooks_run_as_pytorchs():
    ours, theirs = _node_hook_log(ember), _node_hook_log(torch)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)
    assert ours[2:] == theirs[2:]
    assert [e[:2] for e in ours[0]] == [e[:2] for e in theirs[0]]
    for a, b in zip(ours[0], theirs[0]):
        for x, y in zip(a[1:], b[1:]):
            np.testing.assert_allclose(x, y, rtol=1e-6)


def _optimizer_hook_log(lib):
    class MySGD(lib.optim.Optimizer):  # a program's own optimizer: its step is hooked too
        def __init__(self, params, lr=0.1):
            super().__init__(params, dict(lr=lr))

        @lib.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.add_(p.grad, alpha=-group["lr"])

    w = lib.tensor([1.0, -2.0], requires_grad=True)
    log = []
    optimizer_module = importlib.import_module(f"{lib.__name__}.optim.optimizer")
    global_pre = optimizer_module.register_optimizer_step_pre_hook(
        lambda opt, args, kwargs: log.append(("global pre", type(opt).__name__))
    )
    try:
        for opt in (MySGD([w]), lib.optim.Adam([w], lr=0.1)):
            opt.register_step_pre_hook(lambda o, a, k: log.append("pre"))
            handle = opt.register_step_post_hook(lambda o, a, k: log.append("post"))
            opt.register_state_dict_post_hook(lambda o, sd: log.append(("sd", len(sd["state"]))))
            opt.register_load_state_dict_pre_hook(lambda o, sd: log.append("load pre"))
            opt.register_load_state_dict_post_hook(lambda o: log.append("load post"))
            (w * w).sum().backward()
            opt.step()
            opt.load_state_dict(opt.state_dict())
            handle.remove()
            opt.step()
    finally:
        global_pre.remove()
    return log, w.detach().numpy().tolist()


def test_optimizer_step_and_state_dict_hooks_run_as_pytorchs():
    ours, theirs = _optimizer_hook_log(ember), _optimizer_hook_log(torch)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)


def test_embedding_max_norm_scales_by_pytorchs_double_precision_factor():
    def renormed(lib):
        emb = lib.nn.Embedding(4, 3, max_norm=1.0)
        with lib.no_grad():
            emb.weight.copy_(lib.arange(12.0).reshape(4, 3))
        emb(lib.tensor([1, 3, 1]))
        return emb.weight.detach().numpy().copy()

    np.testing.assert_array_equal(renormed(ember), renormed(torch))


def test_a_scripted_module_is_saved_once_it_has_run():
    pytest.importorskip("onnx")
    ember.manual_seed(0)
    model = ember.jit.script(ember.nn.Sequential(ember.nn.Linear(2, 3), ember.nn.ReLU()))
    with pytest.raises(RuntimeError, match="call the scripted module once"):
        model.save(io.BytesIO())
    x = ember.tensor(np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2))
    want = model(x)
    buf = io.BytesIO()
    model.save(buf)
    buf.seek(0)
    loaded = ember.jit.load(buf)
    np.testing.assert_allclose(loaded(x).detach().numpy(), want.detach().numpy(), rtol=1e-6)
