"""What hunt14's programs found: comparisons with None or a string (PyTorch's NotImplemented,
so ``t != None`` is True), a second optimizer loaded from one state dict sharing its buffers,
and BatchNorm loading a dict without ``num_batches_tracked``.
"""

import copy

import numpy as np
import pytest

import ember

from .harness import check_program

torch = pytest.importorskip("torch")


def optional_mask(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(8, 24)
            self.bias = None

        def forward(self, x, mask=None):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            s = q @ k.transpose(-2, -1) / 8**0.5
            if mask != None:  # noqa: E711 (the idiom users write)
                s = s.masked_fill(mask == 0, float("-inf"))
            if self.bias == None:  # noqa: E711
                s = s + 0.0
            return F.softmax(s, -1) @ v

    m = ctx.init(Attn())
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 4, 8)).astype(np.float32))
    mask = torch.tril(torch.ones(4, 4))
    flags = [mask == None, mask != None, mask in (None, "causal"), "x" == mask]  # noqa: E711
    return [m(x), m(x, mask), flags]


def test_optional_mask_program():
    check_program(optional_mask)


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_comparisons_with_none_or_a_string(lib):
    t = lib.tensor([1.0, 2.0])
    assert (t == None) is False and (t != None) is True  # noqa: E711
    assert (t == "a") is False and (t != "a") is True
    assert t not in [None, "a"]
    with pytest.raises(TypeError):
        _ = t < None
    assert (t == [1.0, 2.0]) is False and (t != (1.0, 2.0)) is True
    assert lib.eq(t, lib.tensor([1.0, 3.0])).tolist() == [True, False]
    assert (t == np.array([1.0, 3.0])).tolist() == [True, False]


def _bn_missing_count(lib):
    src = lib.nn.BatchNorm1d(3)
    src.train()
    src(lib.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3)))
    dst = lib.nn.BatchNorm1d(3)
    dst.num_batches_tracked.fill_(5)
    partial = {k: v for k, v in src.state_dict().items() if k != "num_batches_tracked"}
    res = dst.load_state_dict(partial)
    return sorted(res.missing_keys), int(dst.num_batches_tracked), dst.running_mean.tolist()


def test_batch_norm_without_num_batches_tracked_keeps_its_count():
    assert _bn_missing_count(ember) == _bn_missing_count(torch)
    assert _bn_missing_count(ember)[:2] == ([], 5)


def _shared_state(lib):
    p = lib.nn.Parameter(lib.ones(3))
    opt = lib.optim.Adam([p], lr=0.1)
    p.grad = lib.tensor([1.0, -2.0, 3.0])
    opt.step()
    q = copy.deepcopy(p)
    opt2 = lib.optim.Adam([q], lr=0.1)
    opt2.load_state_dict(opt.state_dict())
    q.grad = lib.tensor([0.5, 0.5, 0.5])
    opt2.step()  # updates the buffers opt2 shares with opt
    p.grad = lib.tensor([0.5, 0.5, 0.5])
    opt.step()
    return p.detach().numpy(), opt.state[p]["exp_avg"].numpy()


def test_optimizers_loaded_from_one_dict_share_buffers_as_pytorch():
    for e, t in zip(_shared_state(ember), _shared_state(torch)):
        np.testing.assert_allclose(e, t, rtol=1e-6)
