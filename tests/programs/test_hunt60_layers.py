"""Programs of hunt60 built from layers tutorials use and earlier hunts did not: AlexNet's
LocalResponseNorm with ceil-mode pooling, SegNet's max-unpooling decoder with class weights and
an ignored label, a Glow step (data-initialised ActNorm, an invertible 1x1 convolution through
slogdet, an affine coupling) scored in bits per dimension, a GRU language model with
AdaptiveLogSoftmaxWithLoss, DeepSurv's Cox partial likelihood through logcumsumexp, GATv2
message passing with scatter_reduce("amax") and index_add_, a Siamese pair scorer with
nn.Bilinear, a Llama-style block with nn.RMSNorm and grouped-query attention, a ShuffleNet-ish
stem with ChannelShuffle/PixelUnshuffle/LPPool2d, and a self-normalising SELU network.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def alexnet_lrn(torch, ctx):
    """A small AlexNet: conv, ReLU, LocalResponseNorm, ceil-mode max pooling, adaptive average
    pooling, dropout (eval for the logits; a training step with SGD momentum+nesterov)."""
    nn = torch.nn

    class AlexNet(nn.Module):
        def __init__(self, num_classes=5):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 8, kernel_size=5, stride=2, padding=2), nn.ReLU(inplace=True),
                nn.LocalResponseNorm(size=5, alpha=1e-4, beta=0.75, k=2.0),
                nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
                nn.Conv2d(8, 12, kernel_size=3, padding=1), nn.ReLU(inplace=True),
                nn.LocalResponseNorm(3),
                nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            )
            self.avgpool = nn.AdaptiveAvgPool2d((3, 3))
            self.classifier = nn.Sequential(nn.Dropout(), nn.Linear(12 * 9, 16), nn.ReLU(inplace=True), nn.Linear(16, num_classes))

        def forward(self, x):
            x = self.features(x)
            x = self.avgpool(x)
            x = torch.flatten(x, 1)
            return self.classifier(x)

    model = ctx.init(AlexNet())
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((4, 3, 23, 23)).astype(np.float32))
    y = ctx.t(rng.integers(0, 5, 4))
    model.eval()
    step = ctx.fn(lambda x: model(x))
    logits = step(x)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    model.train()
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return [logits, losses, model.features[0].weight.grad, model.classifier[3].bias]


def segnet_unpool(torch, ctx):
    """SegNet: encoder max pooling returns indices, the decoder's MaxUnpool2d puts values back
    at them (output_size given for an odd input), per-class weights and ignore_index=255 in the
    pixel-wise cross-entropy."""
    nn = torch.nn
    F = nn.functional

    class SegNet(nn.Module):
        def __init__(self, n=4):
            super().__init__()
            self.enc1 = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1, bias=False), nn.BatchNorm2d(6), nn.ReLU())
            self.enc2 = nn.Sequential(nn.Conv2d(6, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
            self.pool = nn.MaxPool2d(2, 2, return_indices=True)
            self.unpool = nn.MaxUnpool2d(2, 2)
            self.dec2 = nn.Sequential(nn.Conv2d(8, 6, 3, padding=1, bias=False), nn.BatchNorm2d(6), nn.ReLU())
            self.dec1 = nn.Conv2d(6, n, 3, padding=1)

        def forward(self, x):
            s1 = x.size()
            x, i1 = self.pool(self.enc1(x))
            s2 = x.size()
            x, i2 = self.pool(self.enc2(x))
            x = self.unpool(x, i2, output_size=s2)
            x = self.dec2(x)
            x = self.unpool(x, i1, output_size=s1)
            return self.dec1(x)

    model = ctx.init(SegNet())
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((2, 3, 11, 10)).astype(np.float32))
    target = rng.integers(0, 4, (2, 11, 10))
    target[:, 0, :] = 255
    target = ctx.t(target)
    weight = ctx.t(np.array([0.5, 1.0, 2.0, 1.5], np.float32))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out, target, weight=weight, ignore_index=255)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    pred = ctx.fn(lambda x: model(x).log_softmax(1))(x)
    return [losses, model.enc1[0].weight.grad, model.enc2[1].running_var, pred]


def glow_step(torch, ctx):
    """One Glow flow step: squeeze, ActNorm initialised from the first batch's statistics (a
    buffer flag), an invertible 1x1 convolution whose log-determinant is slogdet of the
    weight, an affine coupling with a sigmoid scale; the loss is bits per dimension."""
    nn = torch.nn
    F = nn.functional

    class ActNorm(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.loc = nn.Parameter(torch.zeros(1, c, 1, 1))
            self.logs = nn.Parameter(torch.zeros(1, c, 1, 1))
            self.register_buffer("initialized", torch.tensor(0, dtype=torch.uint8))

        def forward(self, x):
            if self.initialized.item() == 0:
                with torch.no_grad():
                    mean = x.mean(dim=(0, 2, 3), keepdim=True)
                    std = x.std(dim=(0, 2, 3), keepdim=True)
                    self.loc.data.copy_(-mean)
                    self.logs.data.copy_(torch.log(1 / (std + 1e-6)))
                    self.initialized.fill_(1)
            h, w = x.shape[2:]
            return (x + self.loc) * torch.exp(self.logs), h * w * self.logs.sum()

    class InvConv(nn.Module):
        def __init__(self, c):
            super().__init__()
            w = torch.linalg.qr(torch.randn(c, c))[0]
            self.weight = nn.Parameter(w)

        def forward(self, x):
            h, w = x.shape[2:]
            logdet = h * w * torch.slogdet(self.weight)[1]
            return F.conv2d(x, self.weight.unsqueeze(2).unsqueeze(3)), logdet

    class Coupling(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.net = nn.Sequential(nn.Conv2d(c // 2, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, c, 3, padding=1))

        def forward(self, x):
            a, b = x.chunk(2, 1)
            log_s, t = self.net(a).chunk(2, 1)
            s = torch.sigmoid(log_s + 2)
            b = (b + t) * s
            return torch.cat([a, b], 1), torch.sum(torch.log(s).view(x.shape[0], -1), 1)

    def squeeze(x):
        b, c, h, w = x.shape
        x = x.view(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4).contiguous()
        return x.view(b, c * 4, h // 2, w // 2)

    class Flow(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.actnorm = ActNorm(c)
            self.invconv = InvConv(c)
            self.coupling = Coupling(c)

        def forward(self, x):
            x, l1 = self.actnorm(x)
            x, l2 = self.invconv(x)
            x, l3 = self.coupling(x)
            return x, l1 + l2 + l3

    flow = ctx.init(Flow(12))
    flow.actnorm.initialized.fill_(0)
    rng = np.random.default_rng(2)
    img = ctx.t(rng.uniform(0, 1, (4, 3, 8, 8)).astype(np.float32))
    opt = torch.optim.Adam(flow.parameters(), lr=1e-3)
    n_pixel = 3 * 8 * 8
    out = []
    for _ in range(3):
        x = squeeze(img - 0.5)
        z, logdet = flow(x)
        log_p = (-0.5 * (z**2 + np.log(2 * np.pi))).view(4, -1).sum(1)
        ll = log_p + logdet - np.log(256) * n_pixel
        loss = (-ll / (np.log(2) * n_pixel)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return [out, flow.actnorm.loc, flow.invconv.weight.grad, int(flow.actnorm.initialized)]


def adaptive_softmax_lm(torch, ctx):
    """A word-level GRU language model whose output layer is nn.AdaptiveLogSoftmaxWithLoss
    (a head and two tail clusters, div_value 2): the training loss, log_prob over the whole
    vocabulary, and predict()."""
    nn = torch.nn

    class LM(nn.Module):
        def __init__(self, vocab=40, dim=12):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.rnn = nn.GRU(dim, dim, batch_first=True)
            self.crit = nn.AdaptiveLogSoftmaxWithLoss(dim, vocab, cutoffs=[8, 20], div_value=2.0, head_bias=True)

        def forward(self, ids, targets):
            h, _ = self.rnn(self.emb(ids))
            h = h.reshape(-1, h.size(-1))
            return self.crit(h, targets.reshape(-1)), h

    model = ctx.init(LM())
    rng = np.random.default_rng(3)
    ids = ctx.t(rng.integers(0, 40, (3, 7)))
    tgt = ctx.t(rng.integers(0, 40, (3, 7)))
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        res, h = model(ids, tgt)
        res.loss.backward()
        opt.step()
        losses.append(res.loss.item())
    with torch.no_grad():
        _, h = model(ids, tgt)
        lp = model.crit.log_prob(h)
        pred = model.crit.predict(h)
    return [losses, res.output, lp, pred, model.crit.tail[1][0].weight.grad]


def cox_deepsurv(torch, ctx):
    """DeepSurv: an MLP's risk scores, samples sorted by descending survival time, the Cox
    partial log-likelihood via logcumsumexp over the risk set, averaged over observed events;
    a concordance index computed from pairwise comparisons."""
    nn = torch.nn
    model = ctx.init(nn.Sequential(nn.Linear(6, 16), nn.SELU(), nn.Dropout(0.0), nn.Linear(16, 1)))
    rng = np.random.default_rng(4)
    x = ctx.t(rng.standard_normal((20, 6)).astype(np.float32))
    time = ctx.t(rng.exponential(5, 20).astype(np.float32))
    event = ctx.t((rng.uniform(size=20) < 0.7).astype(np.float32))

    def cox_loss(risk, time, event):
        order = torch.argsort(time, descending=True)
        risk, event = risk[order], event[order]
        log_risk = torch.logcumsumexp(risk, dim=0)
        uncensored = (risk - log_risk) * event
        return -uncensored.sum() / event.sum()

    opt = torch.optim.RMSprop(model.parameters(), lr=1e-2, alpha=0.9, centered=True)
    step = ctx.fn(lambda x, t, e: cox_loss(model(x).squeeze(-1), t, e))
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = step(x, time, event)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        r = model(x).squeeze(-1)
        comparable = (time[:, None] < time[None, :]) & (event[:, None] == 1)
        concordant = (r[:, None] > r[None, :]) & comparable
        cindex = concordant.sum().float() / comparable.sum()
    return [losses, cindex, model[0].weight.grad]


def gatv2_scatter(torch, ctx):
    """GATv2 on an edge list: scores a^T LeakyReLU(W [h_i || h_j]), a per-destination softmax
    computed with scatter_reduce("amax", include_self=False) and index_add_, messages summed
    with index_add_; two layers, node classification loss on a mask."""
    nn = torch.nn
    F = nn.functional

    class GATv2(nn.Module):
        def __init__(self, din, dout, heads=2):
            super().__init__()
            self.heads, self.dout = heads, dout
            self.W = nn.Linear(2 * din, heads * dout, bias=False)
            self.Wv = nn.Linear(din, heads * dout)
            self.att = nn.Parameter(torch.randn(heads, dout) * 0.3)

        def forward(self, h, src, dst):
            n = h.size(0)
            e = F.leaky_relu(self.W(torch.cat([h[dst], h[src]], -1)), 0.2).view(-1, self.heads, self.dout)
            score = (e * self.att).sum(-1)
            smax = torch.full((n, self.heads), float("-inf")).scatter_reduce(0, dst[:, None].expand(-1, self.heads), score, reduce="amax", include_self=False)
            ex = torch.exp(score - smax[dst])
            denom = torch.zeros(n, self.heads).index_add_(0, dst, ex)
            alpha = ex / denom[dst]
            msg = self.Wv(h)[src].view(-1, self.heads, self.dout) * alpha[..., None]
            out = torch.zeros(n, self.heads, self.dout).index_add_(0, dst, msg)
            return out.mean(1)

    rng = np.random.default_rng(5)
    n = 9
    src = rng.integers(0, n, 24)
    dst = rng.integers(0, n, 24)
    src = np.concatenate([src, np.arange(n)])
    dst = np.concatenate([dst, np.arange(n)])
    l1, l2 = GATv2(5, 8), GATv2(8, 3)
    model = ctx.init(nn.ModuleList([l1, l2]))
    x = ctx.t(rng.standard_normal((n, 5)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, n))
    mask = ctx.t(rng.uniform(size=n) < 0.6)
    s, d = ctx.t(src), ctx.t(dst)

    def fwd(x, s, d):
        h = F.elu(model[0](x, s, d))
        return model[1](h, s, d)

    out = ctx.fn(fwd)(x, s, d)
    loss = F.cross_entropy(out[mask], y[mask])
    loss.backward()
    return [out, loss, model[0].att.grad, model[1].W.weight.grad]


def bilinear_siamese(torch, ctx):
    """Sentence-pair scoring: a shared encoder, nn.Bilinear interaction, cosine similarity and
    pairwise distance features, MarginRankingLoss against shuffled negatives and
    CosineEmbeddingLoss; gradients of the shared encoder."""
    nn = torch.nn
    F = nn.functional

    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(10, 8), nn.Tanh())
            self.bil = nn.Bilinear(8, 8, 4)
            self.cos = nn.CosineSimilarity(dim=1, eps=1e-6)
            self.pd = nn.PairwiseDistance(p=1.5, keepdim=True)
            self.head = nn.Linear(4 + 2, 1)

        def forward(self, a, b):
            ea, eb = self.enc(a), self.enc(b)
            feats = torch.cat([self.bil(ea, eb), self.cos(ea, eb)[:, None], self.pd(ea, eb)], 1)
            return self.head(feats).squeeze(1), ea, eb

    model = ctx.init(Pair())
    rng = np.random.default_rng(6)
    a = ctx.t(rng.standard_normal((6, 10)).astype(np.float32))
    b = ctx.t(rng.standard_normal((6, 10)).astype(np.float32))
    perm = ctx.t(np.array([3, 4, 5, 0, 1, 2]))
    lbl = ctx.t(np.array([1, -1, 1, 1, -1, -1], np.float32))
    pos, ea, eb = model(a, b)
    neg, _, _ = model(a, b[perm])
    rank = nn.MarginRankingLoss(margin=0.5)(pos, neg, torch.ones_like(pos))
    cel = nn.CosineEmbeddingLoss(margin=0.1)(ea, eb, lbl)
    (rank + cel).backward()
    return [pos, neg, rank, cel, model.bil.weight.grad, model.enc[0].weight.grad]


def llama_gqa_block(torch, ctx):
    """A Llama-style block: nn.RMSNorm, grouped-query attention (4 query heads, 2 key/value
    heads) through scaled_dot_product_attention(is_causal=True, enable_gqa=True), and the same
    with repeat_interleave'd keys; SwiGLU feed-forward; a training step."""
    nn = torch.nn
    F = nn.functional

    class Block(nn.Module):
        def __init__(self, d=16, nh=4, nkv=2):
            super().__init__()
            self.nh, self.nkv, self.hd = nh, nkv, d // nh
            self.norm1 = nn.RMSNorm(d, eps=1e-5)
            self.q = nn.Linear(d, d, bias=False)
            self.kv = nn.Linear(d, 2 * nkv * self.hd, bias=False)
            self.o = nn.Linear(d, d, bias=False)
            self.norm2 = nn.RMSNorm(d)
            self.w1 = nn.Linear(d, 24, bias=False)
            self.w3 = nn.Linear(d, 24, bias=False)
            self.w2 = nn.Linear(24, d, bias=False)

        def forward(self, x, gqa=True):
            B, T, C = x.shape
            h = self.norm1(x)
            q = self.q(h).view(B, T, self.nh, self.hd).transpose(1, 2)
            k, v = self.kv(h).view(B, T, 2, self.nkv, self.hd).unbind(2)
            k, v = k.transpose(1, 2), v.transpose(1, 2)
            if gqa:
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                rep = self.nh // self.nkv
                a = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(B, T, C))
            h = self.norm2(x)
            return x + self.w2(F.silu(self.w1(h)) * self.w3(h))

    model = ctx.init(Block())
    rng = np.random.default_rng(7)
    x = ctx.t(rng.standard_normal((2, 5, 16)).astype(np.float32))
    y1 = ctx.fn(lambda x: model(x))(x)
    y2 = model(x, gqa=False)
    y1.pow(2).mean().backward()
    return [y1, y2, model.norm1.weight.grad, model.kv.weight.grad]


def shuffle_stem(torch, ctx):
    """A ShuffleNet-ish stem: ReflectionPad2d, a grouped convolution, nn.ChannelShuffle,
    nn.PixelUnshuffle, LPPool2d (power 2), nn.Unflatten of the head's features, Hardswish and
    Mish; loss and gradients."""
    nn = torch.nn
    model = ctx.init(nn.Sequential(
        nn.ReflectionPad2d((1, 1, 1, 1)), nn.Conv2d(4, 8, 3, groups=2), nn.ChannelShuffle(2), nn.Hardswish(),
        nn.PixelUnshuffle(2), nn.Conv2d(32, 8, 1), nn.Mish(), nn.LPPool2d(2, 2), nn.Flatten(), nn.Linear(8 * 16, 12),
        nn.Unflatten(1, (3, 4)), nn.Softmax(dim=-1)))
    rng = np.random.default_rng(8)
    x = ctx.t(rng.standard_normal((2, 4, 16, 16)).astype(np.float32))
    y = ctx.fn(lambda x: model(x))(x)
    (y * ctx.t(rng.standard_normal((2, 3, 4)).astype(np.float32))).sum().backward()
    return [y, model[1].weight.grad, model[5].weight.grad]


def selu_snn(torch, ctx):
    """A self-normalising network: LeCun-normal initialisation through nn.init (kaiming_normal_
    with nonlinearity='linear', fan_in) applied with Module.apply, SELU, AlphaDropout in eval,
    and the activations' mean and variance after each layer (should stay near 0 and 1)."""
    nn = torch.nn

    def init(m):
        if isinstance(m, nn.Linear):
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="linear")
            nn.init.zeros_(m.bias)

    layers = []
    for _ in range(4):
        layers += [nn.Linear(32, 32), nn.SELU(), nn.AlphaDropout(0.1)]
    model = nn.Sequential(*layers)
    model.apply(init)
    model = ctx.init(model)
    model.eval()
    rng = np.random.default_rng(9)
    x = ctx.t(rng.standard_normal((64, 32)).astype(np.float32))
    stats = []
    h = x
    for m in model:
        h = m(h)
        if isinstance(m, nn.SELU):
            stats.append([h.mean().item(), h.var().item()])
    gain = nn.init.calculate_gain("selu")
    return [h, stats, gain, nn.init.calculate_gain("leaky_relu", 0.2)]


PROGRAMS = [alexnet_lrn, segnet_unpool, glow_step, adaptive_softmax_lm, cox_deepsurv, gatv2_scatter, bilinear_siamese, llama_gqa_block, shuffle_stem, selu_snn]
CAPTURED = [alexnet_lrn, segnet_unpool, cox_deepsurv, gatv2_scatter, llama_gqa_block, shuffle_stem]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True, rtol=2e-4, atol=2e-5)
