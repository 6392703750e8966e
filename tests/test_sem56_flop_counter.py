"""``torch.utils.flop_counter.FlopCounterMode`` on ember's eager ops, against PyTorch's own
counter on the same programs: totals, per-module and per-operator counts (forward and
backward), the calls PyTorch does not count (mv, dot, bilinear, addbmm, its CPU flash
attention and fused MultiheadAttention kernels), and the table."""

from __future__ import annotations

import importlib

import pytest

import ember

torch = pytest.importorskip("torch")


def _counter(m):
    return importlib.import_module(m.__name__ + ".utils.flop_counter").FlopCounterMode


def _counts(fc):
    return {mod: {str(op): n for op, n in ops.items() if n} for mod, ops in
            fc.get_flop_counts().items()}  # fmt: skip


def _compare(program, *, modules=True):
    out = []
    for m in (torch, ember):
        m.manual_seed(0)
        with _counter(m)(display=False) as fc:
            program(m)
        counts = _counts(fc)
        if not modules:
            counts = {"Global": counts.get("Global", {})}
        out.append((fc.get_total_flops(), {k: v for k, v in counts.items() if v}))
    assert out[1] == out[0]
    return out[0][0]


def _cnn(m):
    nn, F = m.nn, m.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.fc = nn.Linear(8 * 8 * 8, 10)
            self.fc2 = nn.Linear(10, 4, bias=False)

        def forward(self, x):
            return self.fc2(self.fc(F.relu(self.conv(x)).flatten(1)))

    net = Net()
    x = m.randn(2, 3, 8, 8, requires_grad=True)
    net(x).sum().backward()


def test_cnn_training_step_per_module():
    assert _compare(_cnn) == 227808


def test_mlp_in_sequential_with_optimizer():
    def program(m):
        net = m.nn.Sequential(m.nn.Linear(8, 16), m.nn.ReLU(), m.nn.Sequential(m.nn.Linear(16, 4)))
        opt = m.optim.SGD(net.parameters(), lr=0.1)
        loss = m.nn.functional.cross_entropy(net(m.randn(5, 8)), m.tensor([0, 1, 2, 3, 0]))
        loss.backward()
        opt.step()

    _compare(program)


@pytest.mark.parametrize(
    "a, b",
    [((4,), (4, 5)), ((4,), (2, 4, 5)), ((3, 4), (4,)), ((2, 3, 4), (4,)), ((4,), (4,)),
     ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 6)), ((5, 6), (6, 7))],
)  # fmt: skip
def test_matmul_shapes_forward_and_backward(a, b):
    def program(m):
        x = m.randn(*a, requires_grad=True)
        y = m.randn(*b, requires_grad=True)
        (x @ y).sum().backward()

    _compare(program)


def test_products_pytorch_names_and_skips():
    def program(m):
        F = m.nn.functional
        a, b = m.randn(4, 5, 6), m.randn(4, 6, 7)
        m.bmm(a, b)
        m.einsum("bij,bjk->bik", a, b)
        m.addmm(m.randn(5), m.randn(3, 4), m.randn(4, 5))
        m.baddbmm(m.randn(2, 3, 5), m.randn(2, 3, 4), m.randn(2, 4, 5))
        m.addbmm(m.randn(3, 5), m.randn(2, 3, 4), m.randn(2, 4, 5))
        m.mv(m.randn(3, 4), m.randn(4))
        m.addmv(m.randn(3), m.randn(3, 4), m.randn(4))
        m.tensordot(m.randn(3, 4), m.randn(4, 5), dims=1)
        F.bilinear(m.randn(2, 3), m.randn(2, 4), m.randn(5, 3, 4))
        F.linear(m.randn(3, 7, 5), m.randn(6, 5), m.randn(6))
        F.linear(m.randn(7, 3, 5).transpose(0, 1), m.randn(6, 5), m.randn(6))
        F.linear(m.randn(2, 3, 7, 5), m.randn(6, 5), m.randn(6))
        F.linear(m.randn(5), m.randn(6, 5))
        F.conv1d(m.randn(2, 3, 10), m.randn(4, 3, 3), stride=2, padding=1)
        F.conv_transpose2d(m.randn(1, 3, 5, 5), m.randn(3, 2, 3, 3), stride=2)
        F.conv2d(m.randn(1, 4, 6, 6), m.randn(4, 1, 3, 3), groups=4)

    _compare(program)


@pytest.mark.parametrize("ndim", [3, 4])
@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"dropout_p": 0.5}, {"mask": True}])
def test_scaled_dot_product_attention(ndim, kw):
    def program(m):
        F = m.nn.functional
        q = m.randn(*((2, 3, 16, 8)[-ndim:]), requires_grad=True)
        extra = dict(kw)
        if extra.pop("mask", False):
            extra["attn_mask"] = m.randn(16, 16)
        F.scaled_dot_product_attention(q, q * 2, q * 3, **extra).sum().backward()
        with m.no_grad():
            F.scaled_dot_product_attention(q, q, q, **extra)

    _compare(program)


@pytest.mark.parametrize("training", [True, False])
def test_multihead_attention_and_encoder_layer(training):
    def program(m):
        x = m.randn(3, 16, 8)
        mha = m.nn.MultiheadAttention(8, 2, batch_first=True)
        mha.train(training)
        out, _ = mha(x, x, x)
        if training:
            out.sum().backward()
        else:
            with m.no_grad():
                mha(x, x, x)
        enc = m.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        enc(x).sum().backward()

    # (PyTorch's module tracker also files the encoder's backward under its dropout modules)
    _compare(program, modules=False)


def test_counts_restart_and_table(capsys):
    tables = []
    for m in (torch, ember):
        net = m.nn.Sequential(m.nn.Linear(8, 16), m.nn.ReLU(), m.nn.Linear(16, 4))
        fc = _counter(m)(display=False)
        with fc:
            net(m.randn(3, 8))
        first = fc.get_total_flops()
        with fc:  # (entering again starts from zero, as PyTorch's)
            net(m.randn(3, 8))
        assert fc.get_total_flops() == first == 1152
        if m is ember:
            tables.append(fc.get_table())
    table = tables[0]
    assert "Sequential" in table and " - aten.addmm" in table and "Sequential.0" in table
    assert "1152.000" in table and "100.00%" in table
    with _counter(ember)(display=True):
        ember.nn.Linear(4, 2)(ember.randn(2, 4))
    assert "aten.addmm" in capsys.readouterr().out


def test_keys_print_as_pytorch_operators():
    with _counter(ember)(display=False) as fc:
        ember.randn(2, 3) @ ember.randn(3, 4)
    (key,) = fc.get_flop_counts()["Global"]
    assert str(key) == repr(key) == "aten.mm"
    assert fc.get_flop_counts()["Global"]["aten.mm"] == 48


def test_not_reentrant_and_profiler_together():
    fc = _counter(ember)(display=False)
    with fc:
        with pytest.raises(RuntimeError, match="reentrant"):
            fc.__enter__()
    with ember.profiler.profile() as prof, _counter(ember)(display=False) as fc:
        x = ember.randn(4, 5, requires_grad=True)
        (x @ ember.randn(5, 3)).sum().backward()
    assert fc.get_total_flops() == 2 * 4 * 5 * 3 * 2
    assert any(e.name == "matmul" for e in prof.events())
