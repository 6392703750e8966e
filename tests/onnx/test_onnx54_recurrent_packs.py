"""Imported recurrent layers keep their recurrent weight's packed panels: torch.onnx.export's
LSTM, GRU and RNN (tanh or relu) import as whole-layer ops (the RNN no longer a step-by-step
scan) whose W_hh is a frozen graph constant (the import's reordered copy, read-only), so the
node's implementation packs it once (ops/recurrent.py `kept_pack_compile`) instead of at
every call; the results stay onnxruntime's and PyTorch's, and a kept pack gives the packing
call's bits."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from ember.kernels import ccompile, crnn  # noqa: E402
from ember.kernels.cconv_constant import frozen_array  # noqa: E402

# (the layer, W_hh's operand position in its whole-layer op)
LAYERS = {
    "lstm": (torch.nn.LSTM, 3),
    "gru": (torch.nn.GRU, 2),
    "rnn": (torch.nn.RNN, 2),
    "rnn_relu": (lambda *a, **k: torch.nn.RNN(*a, nonlinearity="relu", **k), 2),
}
RECURRENT_OPS = {"lstm_layer", "gru_layer", "rnn_layer"}


def _export(kind: str, bidirectional: bool, batch: int) -> tuple[bytes, np.ndarray, object]:
    torch.manual_seed(0)
    layer, _ = LAYERS[kind]

    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = layer(16, 24, num_layers=2, bidirectional=bidirectional)
            self.head = torch.nn.Linear(48 if bidirectional else 24, 5)

        def forward(self, x):
            return self.head(self.rnn(x)[0])

    model = Tagger().eval()
    x = torch.randn(7, batch, 16)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), buffer, dynamo=False, opset_version=17)
    with torch.no_grad():
        want = model(x).numpy()
    return buffer.getvalue(), x.numpy(), want


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_imported_layers_keep_frozen_recurrent_weights(kind, bidirectional):
    data, x, want = _export(kind, bidirectional, batch=1)
    function = ember.onnx.load(data)
    got = [function(ember.tensor(x)).numpy() for _ in range(3)]  # (the kept packs reread)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    (theirs,) = session.run(None, {session.get_inputs()[0].name: x})
    for g in got:
        np.testing.assert_allclose(g, theirs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
    nodes = [n for n in function.graph.nodes if n.kind == "call" and n.op.name in RECURRENT_OPS]
    assert len(nodes) == 2 * (2 if bidirectional else 1)
    for node in nodes:
        assert frozen_array(node, LAYERS[kind][1]) is not None
        assert node.op.compile(node) is not None


@pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
def test_a_kept_pack_gives_the_packing_calls_bits():
    rng = np.random.default_rng(0)
    steps, rows, hidden = 9, 3, 40
    xg = rng.standard_normal((steps, rows, 4 * hidden)).astype(np.float32)
    h0, c0 = (rng.standard_normal((rows, hidden)).astype(np.float32) for _ in range(2))
    w_hh = (0.2 * rng.standard_normal((4 * hidden, hidden))).astype(np.float32)
    plain = crnn.lstm_forward(xg, h0, c0, w_hh, False)
    packs: dict = {}
    first = crnn.lstm_forward(xg, h0, c0, w_hh, False, packs=packs)
    assert plain is not None and len(packs) == 1
    kept = next(iter(packs.values()))
    again = crnn.lstm_forward(xg, h0, c0, w_hh, False, packs=packs)
    assert next(iter(packs.values())) is kept
    for a, b, c in zip(plain, first, again):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
