"""The meta device (ember/_meta.py) against PyTorch 2.13: meta tensors from factories, from the
default device and from modules; ops, layers and backward on them giving PyTorch's shapes,
dtypes and devices without data or random draws; the loaders' pattern (a model built on the
meta device, then ``to_empty`` + ``reset_parameters`` or ``load_state_dict(assign=True)``)
giving PyTorch's model; and the refusals of reading a meta tensor's values."""

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _described(value):
    """What a PyTorch and an ember result are compared by: shapes, dtypes and devices."""
    if isinstance(value, (torch.Tensor, ember.Tensor)):
        return (tuple(value.shape), str(value.dtype).split(".")[-1], str(value.device))
    if isinstance(value, (list, tuple)):
        return [_described(v) for v in value]
    return value


def _both(fn):
    return _described(fn(torch)), _described(fn(ember))


def _net(lib):
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, 8)
            self.conv = nn.Conv1d(8, 8, 3, padding=1)
            self.norm = nn.BatchNorm1d(8)
            self.rnn = nn.GRU(8, 6, batch_first=True)
            self.attn = nn.MultiheadAttention(6, 2, batch_first=True)
            self.ln = nn.LayerNorm(6)
            self.head = nn.Linear(6, 3)
            self.drop = nn.Dropout(0.1)

        def forward(self, ids):
            h = self.emb(ids).transpose(1, 2)
            h = self.norm(self.conv(h).relu()).transpose(1, 2)
            h, _ = self.rnn(h)
            a, _ = self.attn(h, h, h, need_weights=False)
            return self.head(self.drop(self.ln(h + a)).mean(1))

    return Net


@pytest.mark.parametrize(
    "make",
    [
        lambda lib: lib.empty(2, 3, device="meta"),
        lambda lib: lib.zeros((4,), dtype=lib.int64, device=lib.device("meta")),
        lambda lib: lib.randn(3, 2, device="meta", requires_grad=True),
        lambda lib: lib.arange(5, device="meta"),
        lambda lib: lib.full((2,), 1.5, device="meta", dtype=lib.float16),
        lambda lib: lib.tensor([1, 2, 3], device="meta"),
        lambda lib: lib.zeros_like(lib.empty(2, device="meta")),
        lambda lib: lib.zeros_like(lib.empty(2, device="meta"), device="cpu"),
        lambda lib: lib.empty(2, device="meta").new_zeros(3),
        lambda lib: lib.empty(2, 3).to("meta"),
        lambda lib: lib.empty(2, device="meta").float().double(),
        lambda lib: lib.empty(2, 3, device="meta") @ lib.empty(3, 4, device="meta"),
        lambda lib: lib.empty(2, 5, device="meta").softmax(-1).argmax(-1),
        lambda lib: lib.cat([lib.empty(2, device="meta")] * 3).view(2, 3).t().contiguous(),
        lambda lib: lib.empty(2, device="meta").add_(1).mul_(2),
        lambda lib: lib.nn.functional.scaled_dot_product_attention(
            *[lib.empty(2, 2, 5, 4, device="meta")] * 3, is_causal=True
        ),
        lambda lib: lib.nn.functional.cross_entropy(
            lib.empty(4, 5, device="meta"), lib.empty(4, dtype=lib.int64, device="meta")
        ),
    ],
)
def test_meta_tensors_have_pytorchs_shapes_dtypes_and_devices(make):
    expected, actual = _both(make)
    assert actual == expected


def test_a_meta_model_runs_forward_and_backward_without_data():
    def run(lib):
        with lib.device("meta"):
            model = _net(lib)()
        ids = lib.randint(0, 11, (2, 7), device="meta")
        out = model(ids)
        out.sum().backward()
        grads = [p.grad for p in model.parameters()]
        states = list(model.state_dict().values())
        return [out, *grads, *states, sum(p.numel() for p in model.parameters())]

    expected, actual = _both(run)
    assert actual == expected


def test_meta_tensors_draw_nothing_from_the_generator():
    def run(lib):
        lib.manual_seed(0)
        lib.randn(1000, device="meta")
        lib.nn.Linear(100, 100, device="meta")
        with lib.device("meta"):
            lib.nn.Conv2d(3, 8, 3)
        return lib.rand(3).numpy()

    np.testing.assert_array_equal(run(ember), run(torch))


@pytest.mark.parametrize("materialize", ["to_empty", "assign"])
def test_the_loaders_pattern_gives_pytorchs_model(materialize):
    def run(lib):
        Net = _net(lib)
        lib.manual_seed(0)
        reference = Net().eval()
        with lib.device("meta"):
            model = Net()
        if materialize == "to_empty":
            model.to_empty(device="cpu")
            lib.manual_seed(0)
            for m in model.modules():
                if hasattr(m, "reset_parameters") and not isinstance(m, lib.nn.GRU):
                    m.reset_parameters()
            model.rnn.load_state_dict(reference.rnn.state_dict())
            model.attn.load_state_dict(reference.attn.state_dict())
        else:
            result = model.load_state_dict(reference.state_dict(), assign=True)
            assert not result.missing_keys and not result.unexpected_keys
        model.eval()
        ids = lib.tensor(np.arange(14).reshape(2, 7) % 11)
        out = model(ids)
        devices = {str(t.device) for t in model.state_dict().values()}
        params = [type(p).__name__ for p in model.parameters()]
        return out.detach().numpy(), reference(ids).detach().numpy(), devices, params

    t_out, t_ref, t_devices, t_params = run(torch)
    e_out, e_ref, e_devices, e_params = run(ember)
    np.testing.assert_allclose(e_out, t_out, rtol=1e-4, atol=1e-5)
    if materialize == "assign":  # (re-initializing draws in another order than building)
        np.testing.assert_allclose(e_out, e_ref, rtol=1e-6, atol=1e-6)
    assert e_devices == t_devices == {"cpu"}
    assert e_params == t_params


def test_loading_into_a_meta_model_without_assign_warns_and_stays_meta():
    model = ember.nn.Linear(2, 2, device="meta")
    with pytest.warns(UserWarning, match="assign=True"):
        model.load_state_dict(ember.nn.Linear(2, 2).state_dict())
    assert model.weight.is_meta and str(model.bias.device) == "meta"


@pytest.mark.parametrize(
    "read",
    [
        lambda t: t.item(),
        lambda t: t.numpy(),
        lambda t: t.tolist(),
        lambda t: bool(t),
        lambda t: float(t),
        lambda t: t.to("cpu"),
        lambda t: t.cpu(),
    ],
)
def test_reading_a_meta_tensors_values_raises_as_pytorchs(read):
    with pytest.raises(Exception) as expected:
        read(torch.empty(1, device="meta"))
    with pytest.raises(ember.EmberError) as actual:
        read(ember.empty(1, device="meta"))
    assert isinstance(actual.value, type(expected.value))


def test_meta_repr_and_flags_match_pytorchs():
    for lib in (torch, ember):
        x = lib.empty(2, 3, device="meta", dtype=lib.int64)
        w = lib.empty(2, device="meta", requires_grad=True)
        texts = [repr(x), repr(w), repr(w * 2), repr(lib.empty((), device="meta"))]
        flags = (x.is_meta, x.is_cpu, lib.empty(1).is_meta, x.device == lib.device("meta"))
        if lib is torch:
            expected = [t.replace("torch.", "") for t in texts], flags
        else:
            actual = [t.replace("ember.", "") for t in texts], flags
    assert actual == expected


def test_default_device_meta_and_back():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for lib in (torch, ember):
            lib.set_default_device("meta")
            try:
                assert lib.zeros(2).is_meta and lib.nn.Linear(2, 2).weight.is_meta
            finally:
                # (PyTorch's None: its "cpu" keeps a device mode entered, which every later
                # PyTorch call in the process would go through; it then skips its own fast
                # paths, such as TransformerEncoder's nested tensors, as for a subclass)
                lib.set_default_device(None if lib is torch else "cpu")
            assert not lib.zeros(2).is_meta


def test_captured_functions_of_meta_tensors_infer_shapes_as_pytorchs():
    """ember.function / ember.compile called with meta tensors (or over a meta model) run
    them through the ops' shape rules, as PyTorch's compiled functions do, instead of a
    program that would compute on the stand-ins' zeros."""

    def run(lib, compile_):
        model = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2))
        model = model.to("meta")
        step = compile_(lambda x: model(x).softmax(-1).sum(0))
        return [
            step(lib.empty(5, 3, device="meta")),
            compile_(model)(lib.empty(2, 3, device="meta")),
        ]

    expected = _described(run(torch, lambda f: f))  # (torch.compile fails on meta with grads)
    assert _described(run(ember, ember.function)) == expected
    assert _described(run(ember, ember.compile)) == expected
