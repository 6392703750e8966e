"""torch.lstm / torch.gru with flat weights (functional/toplevel_rnn.py) against nn.LSTM /
nn.GRU's own results in PyTorch, captured under ember.function, and the packed overload's
refusal."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_flat_weight_layers_match_torch_modules_and_capture(kind):
    torch.manual_seed(0)
    cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
    m = cls(3, 4, num_layers=2, bidirectional=True).double()
    x = torch.randn(6, 2, 3, dtype=torch.float64)
    h0 = torch.randn(4, 2, 4, dtype=torch.float64)
    hx = (h0, torch.randn(4, 2, 4, dtype=torch.float64)) if kind == "lstm" else h0
    ref = m(x, hx)
    ref = (ref[0], *ref[1]) if kind == "lstm" else ref
    params = [ember.tensor(p.detach().numpy()) for p in m._flat_weights]
    ex = ember.tensor(x.numpy())
    ehx = tuple(ember.tensor(h.numpy()) for h in hx) if kind == "lstm" else ember.tensor(h0.numpy())

    def run(x, hx, *params):
        return getattr(ember, kind)(x, hx, list(params), True, 2, 0.0, False, True, False)

    eager = run(ex, ehx, *params)
    captured = ember.function(run)(ex, ehx, *params)
    for e, c, t in zip(eager, captured, ref):
        np.testing.assert_allclose(e.numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-12, atol=1e-14)


def test_packed_overload_refused():
    x = ember.ones(5, 3)
    with pytest.raises(ember.EmberError, match="packed"):
        ember.gru(x, ember.tensor([3, 2]), ember.zeros(1, 3, 4), [], True, 1, 0.0, False, False)
