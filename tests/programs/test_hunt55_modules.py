"""Module-API and numerics programs of hunt55, each run on PyTorch and on ember: a module with a
shared submodule, ParameterDict/ParameterList, a None parameter, non-persistent buffers and
extra state, read through every named_* walk (remove_duplicate both ways), state_dict with
prefix and keep_vars, reprs of every container (ParameterDict names the tensor type, as
PyTorch's), container surgery (slicing, append/insert/extend/pop, del), deepcopy keeping ties,
zero_grad, channels_last parameters and load_state_dict(assign=True); and losses, pooling and
resampling at their less common arguments (probability targets with label smoothing and weights,
antialiased bilinear/bicubic downsampling, ceil_mode with dilation, quantile interpolations,
cdist modes, unique along a dimension, stft/istft round trips, CTC with zero_infinity, the
margin and NLL losses), with gradients.
"""

import copy

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def module_api(torch, ctx):
    nn = torch.nn
    torch.manual_seed(0)
    shared = nn.Linear(3, 3)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = shared
            self.b = shared
            self.seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
            self.pd = nn.ParameterDict(
                {"alpha": nn.Parameter(torch.ones(2)), "beta": nn.Parameter(torch.zeros(3))}
            )
            self.pl = nn.ParameterList([nn.Parameter(torch.full((2,), float(i))) for i in range(3)])
            self.register_parameter("maybe", None)
            self.register_buffer("step", torch.tensor(0))
            self.register_buffer("tmp", torch.ones(1), persistent=False)
            self.md = nn.ModuleDict({"x": nn.Identity(), "y": nn.Tanh()})
            self.extra = {"k": 1}

        def get_extra_state(self):
            return {"k": self.extra["k"]}

        def set_extra_state(self, state):
            self.extra = dict(state)

        def forward(self, x):
            return self.seq(self.b(self.a(x))) * self.pd["alpha"] + self.pl[1]

    net = Net()
    res = []
    res.append([n for n, _ in net.named_parameters()])
    res.append([n for n, _ in net.named_parameters(remove_duplicate=False)])
    res.append([n for n, _ in net.named_modules()])
    res.append([n for n, _ in net.named_modules(remove_duplicate=False)])
    res.append([n for n, _ in net.named_buffers()])
    res.append([n for n, _ in net.named_children()])
    res.append(len(list(net.parameters(recurse=False))))
    sd = net.state_dict()
    res.append(sorted(sd.keys()))
    res.append(sd["_extra_state"])
    sd2 = net.state_dict(prefix="model.", keep_vars=True)
    res.append([type(v).__name__ for k, v in sorted(sd2.items()) if k != "model._extra_state"])
    net.extra = {"k": 5}
    net2 = Net()
    net2.load_state_dict(net.state_dict())
    res.append(net2.extra)
    res.append(repr(net).replace("ember.", "torch."))
    seq = net.seq
    res.append([type(m).__name__ for m in seq[1:]])
    seq2 = seq[:2]
    res.append(repr(seq2).replace("ember.", "torch."))
    seq.append(nn.Sigmoid())
    seq.insert(0, nn.Identity())
    seq.extend([nn.Identity()])
    res.append(len(seq))
    popped = seq.pop(0)
    res.append(type(popped).__name__)
    ml = nn.ModuleList([nn.ReLU()])
    ml += [nn.Tanh()]
    ml.insert(1, nn.GELU())
    ml.extend([nn.SiLU()])
    res.append([type(m).__name__ for m in ml[1:3]])
    res.append(repr(ml).replace("ember.", "torch."))
    del ml[0]
    res.append(len(ml))
    pd = net.pd
    pd.update({"gamma": nn.Parameter(torch.ones(1))})
    res.append(sorted(pd.keys()))
    res.append(pd.pop("gamma").shape)
    res.append(sorted(k for k, _ in pd.items()))
    net.add_module("late", nn.Linear(2, 2))
    res.append("late" in dict(net.named_children()))
    del net.late
    res.append(hasattr(net, "late"))
    dc = copy.deepcopy(net)
    res.append(dc.a is dc.b)
    res.append(dc.a.weight is not net.a.weight)
    x = torch.ones(2, 3)
    res.append(dc(x))
    net.zero_grad()
    net(x).sum().backward()
    net.zero_grad(set_to_none=True)
    res.append([p.grad is None for p in net.parameters()])
    net.train(False)
    res.append([m.training for m in net.modules()][:3])
    net.requires_grad_(False)
    res.append(any(p.requires_grad for p in net.parameters()))
    res.append(net.seq[0].extra_repr())
    conv = nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last)
    res.append(conv.weight.is_contiguous(memory_format=torch.channels_last))
    res.append(conv.weight.stride())
    m3 = Net()
    r = m3.load_state_dict({k: v for k, v in net.state_dict().items()}, assign=True)
    res.append(m3.seq[0].weight is not None)
    res.append(str(r))
    return res


def numerics_edge(torch, ctx):
    F = torch.nn.functional
    rng = np.random.default_rng(8)
    x = ctx.t(rng.standard_normal((4, 5)).astype(np.float32), requires_grad=True)
    img = ctx.t(rng.standard_normal((1, 2, 13, 11)).astype(np.float32), requires_grad=True)
    p = ctx.t(rng.dirichlet(np.ones(5), 4).astype(np.float32))
    w = ctx.t(np.linspace(0.5, 2, 5).astype(np.float32))
    o = []
    o.append(F.cross_entropy(x, p, weight=w, label_smoothing=0.2))
    o.append(
        F.cross_entropy(
            x,
            ctx.t(np.array([0, 4, -100, 2])),
            weight=w,
            label_smoothing=0.1,
            ignore_index=-100,
            reduction="sum",
        )
    )
    o.append(
        F.nll_loss(F.log_softmax(x, 1), ctx.t(np.array([1, 1, 3, 0])), weight=w, reduction="mean")
    )
    for mode in ("bilinear", "bicubic"):
        o.append(F.interpolate(img, size=(5, 4), mode=mode, antialias=True, align_corners=False))
        o.append(
            F.interpolate(
                img,
                scale_factor=(0.5, 0.37),
                mode=mode,
                antialias=True,
                recompute_scale_factor=True,
            )
        )
    o.append(F.interpolate(img, size=(7, 3), mode="area"))
    o.append(F.interpolate(img, scale_factor=1.7, mode="nearest-exact"))
    o.append(F.interpolate(img[:, :, 0], size=9, mode="linear", align_corners=True))
    o.append(F.adaptive_avg_pool2d(img, (4, 3)))
    o.append(F.adaptive_max_pool2d(img, (4, 5)))
    o.append(
        F.avg_pool2d(
            img,
            3,
            stride=2,
            padding=1,
            ceil_mode=True,
            count_include_pad=False,
            divisor_override=None,
        )
    )
    o.append(F.max_pool2d(img, 3, stride=2, padding=1, dilation=2, ceil_mode=True))
    o.append(
        torch.quantile(
            x, ctx.t(np.array([0.1, 0.5, 0.9], dtype=np.float32)), dim=1, interpolation="midpoint"
        )
    )
    o.append(torch.quantile(x, 0.3, dim=0, keepdim=True, interpolation="lower"))
    o.append(torch.nanquantile(x, 0.7, interpolation="nearest"))
    o.append(F.normalize(x, p=1, dim=0, eps=1e-3))
    o.append(torch.cdist(x, x[:3] + 0.5, p=2, compute_mode="donot_use_mm_for_euclid_dist"))
    o.append(torch.cdist(x, x[:3] + 0.5, p=0.7))
    u = ctx.t(np.array([[1, 2], [0, 1], [1, 2], [0, 0], [0, 1]]))
    o.append(torch.unique(u, dim=0, return_inverse=True, return_counts=True, sorted=True))
    o.append(torch.unique(ctx.t(np.array([3, 1, 3, 2, 1])), sorted=False, return_counts=True))
    o.append(torch.topk(x, 3, dim=1, largest=False, sorted=True))
    o.append(
        F.embedding_bag(
            ctx.t(np.array([1, 2, 3, 3, 0])),
            x,
            ctx.t(np.array([0, 2])),
            mode="sum",
            per_sample_weights=ctx.t(np.array([0.5, 1, 2, -1, 3], dtype=np.float32)),
        )
    )
    emb = torch.nn.Embedding.from_pretrained(
        x.detach().clone(), freeze=False, padding_idx=1, max_norm=None
    )
    e = emb(ctx.t(np.array([[1, 2], [3, 1]])))
    o.append(e)
    sig = ctx.t(np.sin(np.linspace(0, 20, 200)).astype(np.float32), requires_grad=True)
    S = torch.stft(
        sig,
        n_fft=32,
        hop_length=8,
        win_length=24,
        window=torch.hann_window(24),
        center=True,
        pad_mode="reflect",
        normalized=True,
        onesided=True,
        return_complex=True,
    )
    o.append(S.abs().square())
    o.append(
        torch.istft(
            S,
            n_fft=32,
            hop_length=8,
            win_length=24,
            window=torch.hann_window(24),
            normalized=True,
            length=200,
        )
    )
    lp = F.log_softmax(
        ctx.t(rng.standard_normal((12, 2, 6)).astype(np.float32)), 2
    ).requires_grad_()
    o.append(
        F.ctc_loss(
            lp,
            ctx.t(np.array([[1, 2, 2, 3], [4, 5, 0, 0]])),
            ctx.t(np.array([12, 3])),
            ctx.t(np.array([4, 2])),
            blank=0,
            zero_infinity=True,
            reduction="none",
        )
    )
    o.append(F.poisson_nll_loss(x, x.detach().abs(), log_input=True, full=True))
    o.append(F.gaussian_nll_loss(x, x.detach() * 0.5, torch.ones(4, 1) * 0.7, full=True, eps=1e-4))
    o.append(F.multilabel_soft_margin_loss(x, (p > 0.2).float(), weight=w))
    o.append(F.multi_margin_loss(x, ctx.t(np.array([0, 4, 2, 2])), p=2, margin=0.5, weight=w))
    o.append(
        F.triplet_margin_with_distance_loss(
            x,
            x.roll(1, 0),
            x.roll(2, 0),
            distance_function=lambda a, b: 1 - F.cosine_similarity(a, b),
            margin=0.3,
            swap=True,
        )
    )
    o.append(
        F.kl_div(
            F.log_softmax(x, 1),
            F.log_softmax(x.detach() * 2, 1),
            reduction="batchmean",
            log_target=True,
        )
    )
    o.append(F.huber_loss(x, x.detach() ** 2, delta=0.7))
    o.append(F.hinge_embedding_loss(x, torch.ones(4, 5).masked_fill(p < 0.2, -1), margin=0.4))
    o.append(F.cosine_embedding_loss(x, x.flip(0), ctx.t(np.array([1, -1, 1, -1])), margin=0.1))
    o.append(
        F.margin_ranking_loss(x[:, 0], x[:, 1], ctx.t(np.array([1.0, -1.0, 1.0, 1.0])), margin=0.2)
    )
    o.append(F.binary_cross_entropy_with_logits(x, p, pos_weight=w, weight=torch.ones(4, 1) * 2))
    o.append(F.soft_margin_loss(x, torch.ones(4, 5).masked_fill(p < 0.2, -1)))
    loss = sum(t.float().sum() for t in o if isinstance(t, torch.Tensor) and t.requires_grad)
    loss.backward()
    o += [x.grad, img.grad, sig.grad, lp.grad]
    return o


PROGRAMS = [module_api, numerics_edge]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_eager(program):
    check_program(program)
