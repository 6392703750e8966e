"""MultiheadAttention, TransformerEncoderLayer and TransformerEncoder against PyTorch with the
same weights and dropout 0: outputs, attention weights, masks, gradients, layouts and reprs."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import nn

from .compare import EMBER_DTYPES, TORCH_DTYPES, compare_module, same_state_layout, torch

tnn = torch.nn
r = np.random.default_rng(2)


def randn(*shape):
    return r.standard_normal(shape)


def _mask_pair(mask: np.ndarray | None):
    if mask is None:
        return None, None
    return ember.tensor(mask), torch.tensor(mask)


def mha_call(key_padding_mask=None, attn_mask=None, self_attention=False, **kwargs):
    """A call for compare_module passing each framework its own copy of the masks."""
    e_kpm, t_kpm = _mask_pair(key_padding_mask)
    e_am, t_am = _mask_pair(attn_mask)

    def call(m, q, k=None, v=None):
        ours = isinstance(m, nn.Module)
        if self_attention:
            k = v = q
        am = e_am if ours else t_am
        if am is not None and am.is_floating_point():
            am = am.to(q.dtype)  # a float mask in the dtype of the run
        return m(q, k, v, key_padding_mask=e_kpm if ours else t_kpm, attn_mask=am, **kwargs)

    return call


causal = np.triu(np.ones((4, 4), dtype=bool), k=1)
padding = np.array([[False, False, False, True, True], [False] * 5])
float_mask = randn(4, 5)

MHA_CASES = [
    (
        "self",
        lambda n: n.MultiheadAttention(8, 2),
        (randn(4, 2, 8),),
        mha_call(self_attention=True),
    ),
    (
        "cross-kpm",
        lambda n: n.MultiheadAttention(8, 4),
        (randn(4, 2, 8), randn(5, 2, 8), randn(5, 2, 8)),
        mha_call(key_padding_mask=padding),
    ),
    (
        "causal-perhead-weights",
        lambda n: n.MultiheadAttention(6, 3, batch_first=True),
        (randn(2, 4, 6),),
        mha_call(attn_mask=causal, self_attention=True, average_attn_weights=False),
    ),
    (
        "float-mask-kpm",
        lambda n: n.MultiheadAttention(8, 2),
        (randn(4, 2, 8), randn(5, 2, 8), randn(5, 2, 8)),
        mha_call(key_padding_mask=padding, attn_mask=float_mask),
    ),
    (
        "kdim-vdim",
        lambda n: n.MultiheadAttention(8, 2, kdim=3, vdim=5),
        (randn(4, 2, 8), randn(6, 2, 3), randn(6, 2, 5)),
        mha_call(),
    ),
    (
        "nobias-no-weights",
        lambda n: n.MultiheadAttention(8, 2, bias=False),
        (randn(3, 2, 8), randn(4, 2, 8), randn(4, 2, 8)),
        mha_call(need_weights=False),
    ),
    (
        "bias-kv-zero-attn",
        lambda n: n.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True),
        (randn(3, 2, 8), randn(4, 2, 8), randn(4, 2, 8)),
        mha_call(key_padding_mask=np.array([[False, False, True, True], [False] * 4])),
    ),
    (
        "unbatched",
        lambda n: n.MultiheadAttention(4, 2),
        (randn(3, 4),),
        mha_call(self_attention=True),
    ),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", MHA_CASES, ids=[c[0] for c in MHA_CASES])
def test_multihead_attention_matches_torch(case, dtype):
    _, make, inputs, call = case
    e, t = make(nn), make(tnn)
    same_state_layout(e, t)
    assert repr(e) == repr(t)
    compare_module(e, t, list(inputs), dtype=dtype, call=call)


def test_mha_parameter_names_are_torchs():
    names = [n for n, _ in nn.MultiheadAttention(8, 2).named_parameters()]
    assert names == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    separate = [n for n, _ in nn.MultiheadAttention(8, 2, kdim=3).named_parameters()]
    assert separate[:3] == ["q_proj_weight", "k_proj_weight", "v_proj_weight"]


def test_mha_errors():
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(10, 3)
    mha = nn.MultiheadAttention(8, 2)
    x = ember.zeros(3, 2, 8)
    with pytest.raises(ember.ShapeError, match="attn_mask"):
        mha(x, x, x, attn_mask=ember.zeros(2, 3))
    with pytest.raises(ember.ShapeError, match="key_padding_mask"):
        mha(x, x, x, key_padding_mask=ember.zeros(2, 4, dtype=ember.bool))
    with pytest.raises(ValueError, match="is_causal"):
        mha(x, x, x, is_causal=True)


ENCODER_CASES = [
    ("post-norm", dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0), False),
    (
        "pre-norm-gelu-batchfirst",
        dict(
            d_model=8,
            nhead=4,
            dim_feedforward=12,
            dropout=0.0,
            activation="gelu",
            norm_first=True,
            batch_first=True,
            layer_norm_eps=1e-6,
        ),
        True,
    ),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", ENCODER_CASES, ids=[c[0] for c in ENCODER_CASES])
def test_transformer_encoder_layer_matches_torch(case, dtype):
    _, kwargs, batch_first = case
    e, t = nn.TransformerEncoderLayer(**kwargs), tnn.TransformerEncoderLayer(**kwargs)
    same_state_layout(e, t)
    assert repr(e) == repr(t)
    x = randn(2, 5, 8) if batch_first else randn(5, 2, 8)
    compare_module(e, t, [x], dtype=dtype)
    e_kpm, t_kpm = _mask_pair(padding)
    compare_module(
        e,
        t,
        [x],
        dtype=dtype,
        call=lambda m, a: m(a, src_key_padding_mask=e_kpm if isinstance(m, nn.Module) else t_kpm),
    )


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_transformer_encoder_matches_torch(dtype):
    def make(n):
        layer = n.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=n.GELU())
        return n.TransformerEncoder(layer, 2, norm=n.LayerNorm(8), enable_nested_tensor=False)

    e, t = make(nn), make(tnn)
    same_state_layout(e, t)
    assert repr(e) == repr(t)
    layers = e.layers
    assert layers[0].linear1.weight is not layers[1].linear1.weight  # independent copies
    mask = nn.generate_square_subsequent_mask(5, dtype=EMBER_DTYPES[dtype])
    t_mask = tnn.Transformer.generate_square_subsequent_mask(5, dtype=TORCH_DTYPES[dtype])
    np.testing.assert_array_equal(mask.numpy(), t_mask.numpy())
    e_mask = mask
    compare_module(
        e,
        t,
        [randn(5, 2, 8)],
        dtype=dtype,
        call=lambda m, a: m(a, mask=e_mask if isinstance(m, nn.Module) else t_mask),
    )


def test_dropout_in_attention_only_while_training():
    mha = nn.MultiheadAttention(8, 2, dropout=0.5)
    x = ember.randn(4, 2, 8)
    mha.eval()
    out, w = mha(x, x, x)
    np.testing.assert_allclose(w.detach().numpy().sum(-1), 1.0, rtol=1e-6)
    mha.train()
    ember.manual_seed(0)
    _, dropped = mha(x, x, x, average_attn_weights=False)
    assert np.any(dropped.detach().numpy() == 0)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True:UserWarning")
@pytest.mark.parametrize(
    "pads, norm_first, float_mask",
    [([2, 0], False, False), ([1, 3], False, True), ([2, 0], True, False)],
)
def test_encoder_padding_in_inference_matches_torch_nested_path(pads, norm_first, float_mask):
    """PyTorch's TransformerEncoder runs inference with a padding mask on nested tensors, whose
    padded positions come out as zeros (then the final norm); ember gives the same, and the
    plain composition where PyTorch does (norm_first, training, gradients)."""
    from .compare import copy_weights

    def make(n):
        layer = n.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                          norm_first=norm_first)  # fmt: skip
        return n.TransformerEncoder(layer, 2, norm=n.LayerNorm(8))

    t, e = make(tnn), make(nn)
    copy_weights(e, t)
    t.eval()
    e.eval()
    x = np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32)
    pad = np.zeros((2, 5), dtype=bool)
    for row, k in enumerate(pads):
        pad[row, 5 - k :] = True
    mask = np.where(pad, -np.inf, 0.0).astype(np.float32) if float_mask else pad
    with torch.no_grad():
        want = t(torch.tensor(x), src_key_padding_mask=torch.tensor(mask)).numpy()
    with ember.no_grad():
        got = e(ember.tensor(x), src_key_padding_mask=ember.tensor(mask)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_layer_built_before_a_tensor_subclass_keeps_the_nested_path():
    """A program's first Tensor subclass wraps ember's public functions for dispatch for the
    rest of the process; a layer built before holds ``F.relu`` itself, and still counts as
    ReLU for PyTorch's nested-tensor path (its padded outputs zeros). In a fresh process: the
    switch is process-wide and may already be on here."""
    import subprocess
    import sys

    script = (
        "import ember\n"
        "layer = ember.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)\n"
        "class Tagged(ember.Tensor):\n"
        "    pass\n"
        "assert ember.nn.functional.relu is not layer.activation\n"
        "print(ember.nn.TransformerEncoder(layer, 2).use_nested_tensor)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split()[-1] == "True", out.stdout + out.stderr
