"""ember.compile's automatic dynamic shapes (dynamic=None, PyTorch's default): a dimension whose
size varies is traced once more as symbolic, then serves every size there."""

import numpy as np
import pytest

import ember
import ember.nn as nn


def _traces(compiled) -> int:
    auto = compiled._compiled.automatic
    return compiled._compiled.function.stats.traces + sum(
        f.stats.traces for f in auto.functions.values()
    )


class _LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.out = nn.Linear(16, 50)

    def forward(self, ids):
        return self.out(self.layer(self.embed(ids)))


def _train(model, forward, lengths):
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for length in lengths:
        ember.manual_seed(length)
        ids = ember.randint(0, 50, (4, length))
        loss = nn.functional.cross_entropy(forward(ids).flatten(0, 1), ids.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_varying_sequence_lengths_trace_twice_and_train_as_eager():
    lengths = [9, 12, 17, 9, 23, 5, 30, 12]
    ember.manual_seed(0)
    eager_model = _LM()
    compiled_model = _LM()
    compiled_model.load_state_dict(eager_model.state_dict())
    compiled = ember.compile(compiled_model)
    eager = _train(eager_model, eager_model, lengths)
    got = _train(compiled_model, compiled, lengths)
    np.testing.assert_allclose(got, eager, rtol=1e-5, atol=1e-6)
    assert _traces(compiled) == 2  # (the first length, then the length symbolic)
    for p, q in zip(compiled_model.parameters(), eager_model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_a_smaller_last_batch_and_static_dims():
    f = ember.compile(lambda x, w: (x @ w).relu().sum(dim=0))
    w = ember.randn(8, 3)
    for n in (32, 32, 17, 32, 5, 1, 32):
        x = ember.randn(n, 8)
        np.testing.assert_allclose(
            f(x, w).numpy(), (x @ w).relu().sum(dim=0).numpy(), rtol=1e-5, atol=1e-5
        )
    auto = f._compiled.automatic
    assert [tuple(s[0]) for s in next(iter(auto.functions))] == [("s0", 8), (8, 3)]
    # (another rank: a static trace of its own, the symbolic one left as it is)
    f(ember.randn(2, 4, 8), w)
    assert len(auto.functions) == 1


def test_dynamic_false_traces_every_shape():
    f = ember.compile(lambda x: x * 2, dynamic=False)
    for n in (2, 3, 4):
        f(ember.ones(n))
    assert f._compiled.automatic is None and f._compiled.function.stats.traces == 3


def test_a_size_the_python_branches_on_is_guarded():
    def f(x):
        if x.shape[1] > 10:  # (decided at the traced call's size: a guard on later calls)
            return x * 3
        return x + 1

    c = ember.compile(f)
    for n, expected in ((5, 2.0), (12, 3.0), (7, 2.0), (30, 3.0), (9, 2.0), (11, 3.0)):
        assert c(ember.ones(2, n))[0, 0].item() == expected
    auto = c._compiled.automatic
    assert not auto.failed
    # the first shape; then n symbolic with n > 10, and with n <= 10
    assert c._compiled.function.stats.traces == 1
    assert [f.stats.traces for f in auto.functions.values()] == [1, 1]


def test_sizes_that_decide_many_branches_fall_back_to_static_traces():
    def f(x):
        n = x.shape[1]
        for k, threshold in enumerate((8, 16, 24, 32)):
            if n <= threshold:
                return x * k
        return x * 10

    c = ember.compile(f)
    sizes = (6, 12, 20, 28, 40, 13, 7)
    for n in sizes:
        expected = next((k for k, t in enumerate((8, 16, 24, 32)) if n <= t), 10)
        assert c(ember.ones(2, n))[0, 0].item() == expected
    auto = c._compiled.automatic
    assert auto.failed and not auto.functions  # (past MAX_GUARDED: a program per shape)


def test_mark_dynamic_and_mark_static_hints():
    c = ember.compile(lambda x: x.sum(dim=1))
    x = ember.ones(3, 4)
    ember._dynamo.mark_dynamic(x, 1)
    c(x)
    assert c._compiled.function.stats.traces == 0  # (symbolic from the first call)
    for n in (5, 6):
        assert c(ember.ones(3, n)).tolist() == [float(n)] * 3
    assert sum(f.stats.traces for f in c._compiled.automatic.functions.values()) == 1

    s = ember.compile(lambda x: x.sum(dim=1))
    for n in (4, 5, 6):
        y = ember.ones(3, n)
        ember._dynamo.mark_static(y, 1)
        assert s(y).tolist() == [float(n)] * 3
    assert not s._compiled.automatic.functions  # (a static trace per size)


def test_equal_varying_sizes_share_a_symbol():
    def masked_mean(ids, mask):  # (B, T) ids and their (B, T) mask: combined, same T
        return (ids.float() * mask).sum(dim=1) / mask.sum(dim=1)

    c = ember.compile(masked_mean)
    for b, t in ((2, 5), (3, 7), (2, 9), (4, 4), (3, 11)):
        ids = ember.randint(1, 9, (b, t))
        mask = (ember.rand(b, t) > 0.3).float()
        mask[:, 0] = 1.0
        np.testing.assert_allclose(c(ids, mask).numpy(), masked_mean(ids, mask).numpy(), rtol=1e-6)
    assert not c._compiled.automatic.failed
    # (B and T equal in one call: another symbol pattern, its own trace)
    assert len(c._compiled.automatic.functions) == 2


def test_an_error_of_the_program_is_raised_not_hidden():
    c = ember.compile(lambda x, y: x + y)
    c(ember.ones(2, 3), ember.ones(2, 3))
    c(ember.ones(4, 3), ember.ones(4, 3))
    with pytest.raises(ember.EmberError):
        c(ember.ones(5, 3), ember.ones(6, 3))  # (the symbolic trace's error, then static's)


def test_a_size_stored_in_python_state_keeps_static_traces_and_counts_once():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.calls = 0
            self.cache = {}

        def forward(self, x):
            self.calls += 1
            self.cache["last"] = x.shape[0]  # (a symbolic size here: nothing replays it)
            return self.lin(x)

    m = Counter()
    c = ember.compile(m)
    for n in (2, 3, 4):
        c(ember.ones(n, 3))
        assert m.cache["last"] == n and isinstance(m.cache["last"], int)
    assert m.calls == 3  # (the refused symbolic trace's increment undone)
    assert c._compiled.automatic.failed


def test_a_size_stored_in_a_module_attribute_is_set_by_every_call():
    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            self.seq_len = x.size(1)  # (read by the caller after each call, as eagerly)
            self.last_shape = x.shape
            return self.lin(x).sum(1)

    m = Encoder()
    c = ember.compile(m)
    for t in (4, 6, 4, 9, 6):
        x = ember.randn(2, t, 3)
        got, want = c(x).detach().numpy(), m.lin(x).sum(1).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5)
        assert m.seq_len == t and type(m.seq_len) is int
        assert m.last_shape == (2, t, 3) and type(m.last_shape) is ember.Size
    auto = c._compiled.automatic
    assert not auto.failed and c._compiled.function.stats.traces == 1
    # (the symbolic program serves the first length too once it exists: it sets the sizes)
    assert [f.stats.traces for f in auto.functions.values()] == [1]


def test_a_size_compared_equal_to_a_number_is_guarded():
    def f(x):
        if x.shape[1] == 8:  # (False at the symbolic trace's size: a guard, not a constant)
            return x * 2
        return x + 1

    c = ember.compile(f)
    for n in (5, 6, 8, 7, 8, 9):
        assert c(ember.full((2, n), 3.0))[0, 0].item() == (6.0 if n == 8 else 4.0)
    auto = c._compiled.automatic
    assert not auto.failed
    assert [f.stats.traces for f in auto.functions.values()] == [1, 1]

    def g(x):  # (through __ne__, and `in`)
        if x.shape[1] != 8 and x.shape[1] not in (9, 10):
            return x + 1
        return x * 2

    c = ember.compile(g)
    for n in (5, 6, 8, 7, 9, 11):
        assert c(ember.full((2, n), 3.0))[0, 0].item() == (6.0 if n in (8, 9, 10) else 4.0)
