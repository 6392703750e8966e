"""A torch.compile'd decoder generating with a key/value cache (dyn57), run on PyTorch (its
eager backend) and on ember (automatic dynamic shapes): each step passes the cache, one longer
per step, and builds its causal mask with ``tril(diagonal=S - T)`` from the sizes. The
diagonal is a symbolic size, so one symbolic trace serves every cache length."""

import numpy as np
import pytest

from .harness import check_program


def kv_cache_decode(torch, ctx):
    nn = torch.nn

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(17, 16)
            self.qkv = nn.Linear(16, 48)
            self.out = nn.Linear(16, 17)

        def forward(self, ids, past=None):
            q, k, v = self.qkv(self.emb(ids)).chunk(3, -1)
            if past is not None:
                k, v = torch.cat([past[0], k], 1), torch.cat([past[1], v], 1)
            T, S = q.size(1), k.size(1)  # noqa: N806
            mask = torch.ones(T, S, dtype=torch.bool).tril(diagonal=S - T)
            att = (q @ k.transpose(1, 2) / 4.0).masked_fill(~mask, float("-inf")).softmax(-1)
            return self.out(att @ v), (k, v)

    model = ctx.init(Decoder())
    compiled = torch.compile(model, backend="eager") if ctx.is_torch else torch.compile(model)
    rng = np.random.default_rng(0)
    out = []
    with torch.no_grad():
        logits, past = compiled(ctx.t(rng.integers(0, 17, (2, 5))))
        out.append(logits)
        for _ in range(8):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            logits, past = compiled(nxt, past)
            out += [nxt, logits]
    if not ctx.is_torch:
        c = compiled.__dict__["_compiled"]
        auto = c.automatic
        symbolic = [f.stats.traces for f in auto.functions.values()]
        # the prompt's and the first step's shapes (two structures), then the cache symbolic
        assert not auto.failed and (c.function.stats.traces, symbolic) == (2, [1]), symbolic
    return out, past


def test_kv_cache_decode():
    check_program(kv_cache_decode)


@pytest.mark.parametrize("opset", [13, 17])
def test_a_symbolic_diagonal_exports_to_onnx(tmp_path, opset):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the exported file")
    import ember

    def scores(q, k):
        return (q @ k.T) * ember.ones(q.shape[0], k.shape[0]).tril(diagonal=k.shape[0] - q.shape[0])

    path = str(tmp_path / "m.onnx")
    ember.onnx.export(
        scores,
        (ember.randn(3, 4), ember.randn(7, 4)),
        path,
        input_names=["q", "k"],
        dynamic_axes={"q": {0: "T"}, "k": {0: "S"}},
        opset_version=opset,
    )
    q, k = ember.randn(2, 4), ember.randn(9, 4)  # (a diagonal of 7, not the export's 4)
    got = ort.InferenceSession(path).run(None, {"q": q.numpy(), "k": k.numpy()})[0]
    np.testing.assert_allclose(got, scores(q, k).numpy(), rtol=1e-5, atol=1e-6)
