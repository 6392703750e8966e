"""TransformerDecoderLayer, TransformerDecoder and the encoder-decoder Transformer against
PyTorch with torch's state_dict copied in (dropout 0 / eval): outputs, input and parameter
gradients, masks of every kind, layouts and reprs; and the same model captured by
``ember.function``."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import nn

from .compare import (
    EMBER_DTYPES,
    TORCH_DTYPES,
    compare_module,
    copy_weights,
    same_state_layout,
    torch,
)

tnn = torch.nn
r = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _seed_torch():
    torch.manual_seed(0)  # torch draws the weights ember copies: the same ones every run


def randn(*shape):
    return r.standard_normal(shape)


def masks(dtype, **arrays):
    """Ember and torch copies of each mask; float masks in the run's dtype."""
    e, t = {}, {}
    for name, a in arrays.items():
        if a is not None and a.dtype.kind == "f":
            a = a.astype(dtype)
        e[name] = None if a is None else ember.tensor(a)
        t[name] = None if a is None else torch.tensor(a)
    return e, t


def call_with(e_kwargs, t_kwargs, **fixed):
    def call(m, *xs):
        kwargs = e_kwargs if isinstance(m, nn.Module) else t_kwargs
        return m(*xs, **kwargs, **fixed)

    return call


T, S, N, E = 4, 5, 2, 8
causal = np.triu(np.full((T, T), -np.inf), k=1)
bool_causal = np.triu(np.ones((T, T), dtype=bool), k=1)
tgt_pad = np.array([[False, False, False, True], [False] * T])
mem_pad = np.array([[False, False, True, True, True], [False] * S])
memory_mask = np.where(randn(T, S) > 1.0, -np.inf, randn(T, S) * 0.1)
memory_mask[:, 0] = 0.0  # every query keeps one key

LAYER_CASES = [
    ("post-norm", dict(d_model=E, nhead=2, dim_feedforward=16, dropout=0.0), {}),
    (
        "causal-float-mask",
        dict(d_model=E, nhead=2, dim_feedforward=16, dropout=0.0),
        dict(tgt_mask=causal, tgt_is_causal=True),
    ),
    (
        "all-masks",
        dict(d_model=E, nhead=4, dim_feedforward=16, dropout=0.0),
        dict(
            tgt_mask=bool_causal,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_pad,
            memory_key_padding_mask=mem_pad,
        ),
    ),
    (
        "pre-norm-gelu-batchfirst-nobias",
        dict(
            d_model=E,
            nhead=2,
            dim_feedforward=12,
            dropout=0.0,
            activation="gelu",
            norm_first=True,
            batch_first=True,
            layer_norm_eps=1e-6,
            bias=False,
        ),
        dict(tgt_mask=causal, memory_key_padding_mask=mem_pad),
    ),
]


def _inputs(kwargs, batched=True):
    if not batched:
        return [randn(T, E), randn(S, E)]
    if kwargs.get("batch_first"):
        return [randn(N, T, E), randn(N, S, E)]
    return [randn(T, N, E), randn(S, N, E)]


def _split(call_kwargs, dtype):
    arrays = {k: v for k, v in call_kwargs.items() if isinstance(v, np.ndarray)}
    fixed = {k: v for k, v in call_kwargs.items() if not isinstance(v, np.ndarray)}
    e, t = masks(dtype, **arrays)
    return call_with(e, t, **fixed)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", LAYER_CASES, ids=[c[0] for c in LAYER_CASES])
def test_decoder_layer_matches_torch(case, dtype):
    _, kwargs, call_kwargs = case
    e, t = nn.TransformerDecoderLayer(**kwargs), tnn.TransformerDecoderLayer(**kwargs)
    same_state_layout(e, t)
    assert repr(e) == repr(t)
    compare_module(e, t, _inputs(kwargs), dtype=dtype, call=_split(call_kwargs, dtype))


def test_decoder_layer_unbatched_matches_torch():
    kwargs = dict(d_model=E, nhead=2, dim_feedforward=16, dropout=0.0)
    e, t = nn.TransformerDecoderLayer(**kwargs), tnn.TransformerDecoderLayer(**kwargs)
    call = _split(dict(tgt_mask=causal, memory_key_padding_mask=mem_pad[0]), np.float64)
    compare_module(e, t, _inputs(kwargs, batched=False), call=call)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_decoder_stack_matches_torch(dtype):
    def make(n):
        # a string: torch's TransformerDecoderLayer.__setstate__ turns a module activation
        # back into relu when TransformerDecoder deep-copies the layer (ember keeps it)
        layer = n.TransformerDecoderLayer(E, 2, 16, dropout=0.0, activation="gelu")
        return n.TransformerDecoder(layer, 2, norm=n.LayerNorm(E))

    e, t = make(nn), make(tnn)
    same_state_layout(e, t)
    assert repr(e) == repr(t)
    assert e.layers[0].linear1.weight is not e.layers[1].linear1.weight  # independent copies
    call = _split(dict(tgt_mask=causal, tgt_key_padding_mask=tgt_pad), dtype)
    compare_module(e, t, _inputs({}), dtype=dtype, call=call)


TRANSFORMER_CASES = [
    ("default-post-norm", dict(batch_first=False)),
    ("pre-norm-batchfirst-gelu", dict(norm_first=True, batch_first=True, activation="gelu")),
    ("nobias-eps", dict(bias=False, layer_norm_eps=1e-6)),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", TRANSFORMER_CASES, ids=[c[0] for c in TRANSFORMER_CASES])
def test_transformer_matches_torch(case, dtype):
    _, extra = case
    kwargs = dict(
        d_model=E,
        nhead=2,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=16,
        dropout=0.0,
        **extra,
    )
    e, t = nn.Transformer(**kwargs), tnn.Transformer(**kwargs)
    same_state_layout(e, t)
    assert repr(e) == repr(t)
    bf = extra.get("batch_first", False)
    src, tgt = (randn(N, S, E), randn(N, T, E)) if bf else (randn(S, N, E), randn(T, N, E))
    call = _split(
        dict(
            tgt_mask=causal,
            src_key_padding_mask=mem_pad,
            memory_key_padding_mask=mem_pad,
            tgt_key_padding_mask=tgt_pad,
            tgt_is_causal=True,
        ),
        dtype,
    )
    # float32: a few ulps per layer through four layers' gradients
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype is np.float32 else None
    compare_module(e, t, [src, tgt], dtype=dtype, call=call, tol=tol)


def test_transformer_eval_mode_with_dropout_matches_torch():
    """Dropout > 0 but eval(): the whole model is deterministic and equals torch's."""
    kwargs = dict(d_model=E, nhead=4, num_encoder_layers=1, num_decoder_layers=2)
    kwargs["dim_feedforward"] = 32
    e, t = nn.Transformer(**kwargs), tnn.Transformer(**kwargs)
    compare_module(e, t, [randn(S, N, E), randn(T, N, E)], train=False)


def test_generate_square_subsequent_mask_is_torchs():
    for dtype in (np.float64, np.float32):
        mine = nn.Transformer.generate_square_subsequent_mask(5, dtype=EMBER_DTYPES[dtype])
        theirs = tnn.Transformer.generate_square_subsequent_mask(5, dtype=TORCH_DTYPES[dtype])
        assert str(mine.dtype) == str(theirs.dtype).replace("torch.", "ember.")
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    assert nn.Transformer.generate_square_subsequent_mask(3).dtype == ember.float32


def test_custom_encoder_and_decoder_are_used():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, 2, 16, dropout=0.0), 1)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, 2, 16, dropout=0.0), 3)
    model = nn.Transformer(E, 2, custom_encoder=enc, custom_decoder=dec)
    assert model.encoder is enc and model.decoder is dec
    assert len(model.decoder.layers) == 3


def test_transformer_errors():
    model = nn.Transformer(E, 2, 1, 1, 16)
    with pytest.raises(ember.ShapeError, match="batch number"):
        model(ember.zeros(S, 2, E), ember.zeros(T, 3, E))
    with pytest.raises(ember.ShapeError, match="d_model=8"):
        model(ember.zeros(S, 2, E), ember.zeros(T, 2, 4))
    layer = nn.TransformerDecoderLayer(E, 2, 16)
    with pytest.raises(ValueError, match="is_causal"):
        layer(ember.zeros(T, 2, E), ember.zeros(S, 2, E), tgt_is_causal=True)


def test_transformer_captured_matches_eager_and_torch():
    """ember.function over the whole model (loss and its gradients) equals eager, which
    equals torch."""
    kwargs = dict(d_model=E, nhead=2, num_encoder_layers=1, num_decoder_layers=2)
    kwargs.update(dim_feedforward=16, dropout=0.0)
    e, t = nn.Transformer(**kwargs).double(), tnn.Transformer(**kwargs).double()
    copy_weights(e, t)
    src, tgt = randn(S, N, E), randn(T, N, E)
    mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=ember.float64)

    def loss(src, tgt):
        return (e(src, tgt, tgt_mask=mask, memory_key_padding_mask=pad) ** 2).sum()

    pad = ember.tensor(mem_pad)
    step = ember.function(lambda s, g: ember.grad(loss, argnums=(0, 1))(s, g))
    g_src, g_tgt = step(ember.tensor(src), ember.tensor(tgt))
    eager = loss(ember.tensor(src), ember.tensor(tgt))
    ts, tt = torch.tensor(src, requires_grad=True), torch.tensor(tgt, requires_grad=True)
    t_mask = tnn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)
    t_loss = (t(ts, tt, tgt_mask=t_mask, memory_key_padding_mask=torch.tensor(mem_pad)) ** 2).sum()
    t_loss.backward()
    np.testing.assert_allclose(eager.item(), t_loss.item(), rtol=1e-10)
    np.testing.assert_allclose(
        g_src.detach().numpy(), ts.grad.detach().numpy(), rtol=1e-8, atol=1e-10
    )
    np.testing.assert_allclose(
        g_tgt.detach().numpy(), tt.grad.detach().numpy(), rtol=1e-8, atol=1e-10
    )
    traced = ember.function(loss)(ember.tensor(src), ember.tensor(tgt))
    np.testing.assert_allclose(traced.item(), t_loss.item(), rtol=1e-10)
