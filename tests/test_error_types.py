"""The built-in exception type of each error matches the one PyTorch raises, so a program that
catches IndexError or RuntimeError around a call behaves the same under ember (ember's errors
are EmberError subclasses that are also the built-in type)."""

import pytest

import ember
from ember.errors import EmberError

torch = pytest.importorskip("torch")


def _bad_calls(lib):
    x = lib.ones(3, 4)
    return {
        "dim out of range": lambda: x.sum(5),
        "cat dim out of range": lambda: lib.cat([x, x], 3),
        "squeeze dim out of range": lambda: x.squeeze(4),
        "float index tensor": lambda: x[lib.tensor([0.0])],
        "truth value of many": lambda: bool(x),
        "load_state_dict shapes": lambda: lib.nn.Linear(2, 2).load_state_dict(
            {"weight": lib.ones(3, 3), "bias": lib.ones(2)}
        ),
        "arange step 0": lambda: lib.arange(0, 10, 0),
        "float arange step 0": lambda: lib.arange(0.0, 1.0, 0.0),
        "negative size": lambda: lib.zeros(-1),
        "negative random size": lambda: lib.randn(2, -3),
        "arange step of the wrong sign": lambda: lib.arange(0, 10, -1),
        "arange step of the wrong sign, descending": lambda: lib.arange(10, 0, 1),
        "matmul shapes": lambda: x @ lib.ones(3, 2),
        "matmul dtypes": lambda: x @ lib.ones(4, 2, dtype=lib.float64),
        "mm dtypes": lambda: lib.mm(x, lib.ones(4, 2, dtype=lib.float64)),
        "bmm dtypes": lambda: lib.bmm(x[None], lib.ones(1, 4, 2, dtype=lib.float64)),
        "linear dtypes": lambda: lib.nn.functional.linear(x, lib.ones(2, 4, dtype=lib.float64)),
        "integer matmul float": lambda: lib.ones(3, 4, dtype=lib.long) @ lib.ones(4, 2),
        "cat shapes": lambda: lib.cat([x, lib.ones(3, 5)]),
        "stack shapes": lambda: lib.stack([x, lib.ones(4, 3)]),
        "view of a transposed tensor": lambda: x.t().view(12),
        "view numel": lambda: x.view(5),
        "reshape numel": lambda: x.reshape(5),
        "two inferred sizes": lambda: x.reshape(-1, -1),
        "index out of range": lambda: x[5],
        "index out of range in dim 1": lambda: x[:, 7],
        "tensor index out of range": lambda: x[lib.tensor([5])],
        "gather index out of range": lambda: x.gather(1, lib.tensor([[9]])),
        "embedding index out of range": lambda: lib.nn.functional.embedding(
            lib.tensor([7]), lib.ones(3, 2)
        ),
        "index_select out of range": lambda: x.index_select(0, lib.tensor([4])),
        "scatter out of range": lambda: lib.zeros(3).scatter(0, lib.tensor([4]), lib.ones(1)),
        "broadcast": lambda: x + lib.ones(5),
        "expand": lambda: lib.ones(3).expand(4),
        "permute dims": lambda: x.permute(0),
        "transpose dim": lambda: x.transpose(0, 3),
        "unsqueeze dim": lambda: x.unsqueeze(4),
        "split sizes": lambda: x.split([1, 1]),
        "chunk of 0": lambda: x.chunk(0),
        "item of many": lambda: x.item(),
        "int of many": lambda: int(x),
        "float of many": lambda: float(x),
        "requires_grad of int": lambda: lib.ones(2, dtype=lib.long).requires_grad_(),
        "numpy of requires_grad": lambda: lib.ones(2, requires_grad=True).numpy(),
        "backward of no grad": lambda: lib.ones(2).sum().backward(),
        "backward of non-scalar": lambda: (lib.ones(2, requires_grad=True) * 2).backward(),
        "in-place on a leaf": lambda: lib.ones(2, requires_grad=True).add_(1),
        "softmax of ints": lambda: lib.softmax(lib.tensor([1, 2]), 0),
        "where of an int condition": lambda: lib.where(lib.tensor([1, 0]), x[0, :2], x[1, :2]),
        "cross_entropy target range": lambda: lib.nn.functional.cross_entropy(
            x, lib.tensor([0, 1, 9])
        ),
        "nll_loss target range": lambda: lib.nn.functional.nll_loss(x, lib.tensor([0, 1, 9])),
        "binary_cross_entropy range": lambda: lib.nn.functional.binary_cross_entropy(
            lib.tensor([2.0]), lib.tensor([1.0])
        ),
        "one_hot range": lambda: lib.nn.functional.one_hot(lib.tensor([4]), 3),
        "linear in_features": lambda: lib.nn.Linear(3, 4)(x),
        "conv channels": lambda: lib.nn.Conv2d(3, 4, 3)(lib.ones(1, 2, 5, 5)),
        "layer_norm shape": lambda: lib.nn.LayerNorm(5)(x),
        "masked_fill mask shape": lambda: x.masked_fill(lib.ones(5, dtype=lib.bool), 0),
        "copy_ shape": lambda: x.copy_(lib.ones(5)),
        "setitem shape": lambda: x.__setitem__(0, lib.ones(5)),
        "multinomial negative": lambda: lib.multinomial(lib.tensor([-1.0, 2.0]), 1),
        "normal std negative": lambda: lib.normal(0.0, -1.0, (2,)),
        "randint empty range": lambda: lib.randint(5, 2, (3,)),
        "view dtype size": lambda: lib.ones(3).view(lib.float64),
        "optimizer lr": lambda: lib.optim.SGD([lib.ones(2, requires_grad=True)], lr=-1.0),
        "optimizer non-leaf": lambda: lib.optim.SGD([lib.ones(2, requires_grad=True) * 2]),
        # (validate_args given: a test elsewhere in the session may turn the default off)
        "categorical probs": lambda: lib.distributions.Categorical(
            probs=lib.tensor([0.5, -0.5]), validate_args=True
        ),
        "normal scale": lambda: lib.distributions.Normal(0.0, lib.tensor(-1.0), validate_args=True),
        "pad too large": lambda: lib.nn.functional.pad(x, (5, 5), mode="reflect"),
        "interpolate bad size": lambda: lib.nn.functional.interpolate(x[None], size=(2, 2)),
        "max_pool kernel too large": lambda: lib.nn.functional.max_pool2d(x[None], 5),
        "topk k too large": lambda: x.topk(9),
        "repeat too few dims": lambda: x.repeat(2),
        "diag of 3-D": lambda: lib.diag(lib.ones(2, 2, 2)),
        "inverse of singular": lambda: lib.linalg.inv(lib.zeros(2, 2)),
        "cholesky of negative": lambda: lib.linalg.cholesky(-lib.eye(2)),
        "state_dict missing key": lambda: lib.nn.Linear(2, 2).load_state_dict({}),
        "tensor of ragged lists": lambda: lib.tensor([[1, 2], [3]]),
        "sum of a string dim": lambda: x.sum("a"),
        "dropout p": lambda: lib.nn.functional.dropout(x, p=1.5),
        "lstm input size": lambda: lib.nn.LSTM(3, 4)(lib.ones(2, 1, 5)),
        "embedding of floats": lambda: lib.nn.Embedding(3, 2)(lib.tensor([0.0])),
        "mse shapes": lambda: lib.nn.functional.mse_loss(lib.ones(3), lib.ones(4)),
        "cat of nothing": lambda: lib.cat([]),
        "to an unknown device": lambda: lib.ones(2).to("gpu"),
        "cuda of a tensor": lambda: lib.ones(2).cuda(),
        "a tensor made on cuda": lambda: lib.ones(2, device="cuda"),
        "a module moved to cuda": lambda: lib.nn.Linear(1, 1).to("cuda"),
        "load of a missing file": lambda: lib.load("/nonexistent/checkpoint.pt"),
    }


@pytest.mark.parametrize("case", sorted(_bad_calls(torch)))
def test_error_types_match_pytorch(case):
    with pytest.raises(Exception) as theirs:
        _bad_calls(torch)[case]()
    with pytest.raises(EmberError) as ours:
        _bad_calls(ember)[case]()
    # every built-in class of PyTorch's error (torch's own, LinAlgError, derive from them)
    builtin = [c for c in type(theirs.value).__mro__ if c.__module__ == "builtins"]
    assert all(isinstance(ours.value, c) for c in builtin), (type(ours.value), builtin)


def test_pytorch_handlers_catch_embers_errors():
    # the idioms PyTorch programs use around calls: each catches ember's error
    x = ember.ones(3, 4)
    with pytest.raises(RuntimeError, match="reshape"):
        x.t().view(12)
    with pytest.raises(RuntimeError, match="detach"):
        ember.ones(2, requires_grad=True).numpy()
    with pytest.raises(IndexError):
        x[7]
    with pytest.raises(RuntimeError, match="dtype"):
        x @ ember.ones(4, 2, dtype=ember.float64)
    with pytest.raises(RuntimeError, match="step sign"):
        ember.arange(0, 10, -1)
