"""Layer-heavy programs of hunt57, each run on PyTorch and on ember (eagerly, and the marked
ones with their steps under ``ember.function``): a GCN on a sparse adjacency, a small U-Net,
a video net of 3-d convolutions, a TCN with the old weight_norm, audio features with
SpecAugment masks, sub-pixel super-resolution, squeeze-excitation in channels_last, instance
norm tracking running stats, and DLRM's pairwise feature interaction.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def gcn_sparse(torch, ctx):
    """Kipf's GCN: a symmetric-normalized adjacency with self loops as a sparse COO tensor
    (coalesce, sparse.mm with gradients into the dense features), two layers and a masked
    cross-entropy over the training nodes; the same adjacency dense for comparison."""
    nn, F = torch.nn, torch.nn.functional
    n = 7
    rng = np.random.default_rng(0)
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [0, 6], [1, 4], [1, 2]]).T
    idx = ctx.t(np.concatenate([edges, edges[::-1], np.stack([np.arange(n)] * 2)], axis=1))
    vals = torch.ones(idx.shape[1])
    A = torch.sparse_coo_tensor(idx, vals, (n, n)).coalesce()
    deg = torch.sparse.sum(A, dim=1).to_dense()
    dinv = deg.pow(-0.5)
    r, c = A.indices()
    An = torch.sparse_coo_tensor(A.indices(), dinv[r] * A.values() * dinv[c], (n, n))
    W1 = ctx.init(nn.Linear(4, 8), "w1")
    W2 = ctx.init(nn.Linear(8, 3), "w2")
    x = ctx.t(rng.standard_normal((n, 4)).astype(np.float32), requires_grad=True)
    y = ctx.t(rng.integers(0, 3, n))
    train = ctx.t(np.array([1, 1, 0, 1, 0, 1, 0], dtype=bool))
    h = F.relu(torch.sparse.mm(An, W1(x)))
    out = torch.sparse.mm(An, W2(h))
    loss = F.cross_entropy(out[train], y[train])
    loss.backward()
    dense = An.to_dense()
    h2 = F.relu(dense @ W1(x))
    return [
        A.values(),
        A.indices(),
        deg,
        out,
        loss,
        x.grad,
        W1.weight.grad,
        dense @ W2(h2),
        A._nnz(),
    ]


def unet_small(torch, ctx):
    """A two-level U-Net: conv blocks with BatchNorm, max pooling, a transposed convolution
    up, skip connections by cat (cropped with F.pad when odd sizes mismatch), a 1x1 head;
    a Dice + BCE loss step with Adam."""
    nn, F = torch.nn, torch.nn.functional

    def block(i, o):
        return nn.Sequential(
            nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True)
        )

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2 = block(1, 4), block(4, 8)
            self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
            self.u1 = block(8, 4)
            self.head = nn.Conv2d(4, 1, 1)

        def forward(self, x):
            a = self.d1(x)
            b = self.d2(F.max_pool2d(a, 2))
            u = self.up(b)
            dy, dx = a.shape[2] - u.shape[2], a.shape[3] - u.shape[3]
            u = F.pad(u, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
            return self.head(self.u1(torch.cat([a, u], dim=1)))

    net = ctx.init(UNet(), "unet")
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((2, 1, 9, 7)).astype(np.float32))
    m = ctx.t((rng.random((2, 1, 9, 7)) > 0.6).astype(np.float32))

    def step(x, m):
        logits = net(x)
        p = logits.sigmoid()
        inter = (p * m).sum((1, 2, 3))
        dice = 1 - (2 * inter + 1) / (p.sum((1, 2, 3)) + m.sum((1, 2, 3)) + 1)
        loss = F.binary_cross_entropy_with_logits(logits, m) + dice.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), logits.detach()

    step = ctx.fn(step)
    outs = [step(x, m) for _ in range(2)]
    net.eval()
    outs.append(net(x))
    return [outs, net.d1[1].running_var, net.up.weight]


def video_conv3d(torch, ctx):
    """A clip classifier: Conv3d with (1, 2, 2) strides, BatchNorm3d, MaxPool3d with
    ceil_mode, a (2+1)-d factorized convolution, AdaptiveAvgPool3d, ConvTranspose3d with
    output_padding, and the gradients."""
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv3d(3, 4, (3, 3, 3), stride=(1, 2, 2), padding=1)
            self.bn = nn.BatchNorm3d(4)
            self.pool = nn.MaxPool3d(2, ceil_mode=True)
            self.spatial = nn.Conv3d(4, 4, (1, 3, 3), padding=(0, 1, 1))
            self.temporal = nn.Conv3d(4, 6, (3, 1, 1), padding=(1, 0, 0), dilation=(1, 1, 1))
            self.up = nn.ConvTranspose3d(6, 2, 3, stride=2, padding=1, output_padding=1)
            self.fc = nn.Linear(6, 5)

        def forward(self, x):
            h = self.pool(torch.relu(self.bn(self.c1(x))))
            h = torch.relu(self.temporal(torch.relu(self.spatial(h))))
            logits = self.fc(nn.functional.adaptive_avg_pool3d(h, 1).flatten(1))
            return logits, self.up(h)

    net = ctx.init(Net(), "net")
    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((2, 3, 5, 9, 8)).astype(np.float32), requires_grad=True)
    logits, up = net(x)
    (logits.logsumexp(1).sum() + up.pow(2).mean()).backward()
    return [logits, up.shape, up.sum(), x.grad, net.c1.weight.grad, net.up.weight.grad]


def tcn_weight_norm(torch, ctx):
    """A temporal convolutional network: causal dilated Conv1d (left padding by F.pad and
    chomping), the old torch.nn.utils.weight_norm (weight_g/weight_v), residual 1x1
    downsampling, trained with SGD; remove_weight_norm afterwards."""
    nn, F = torch.nn, torch.nn.functional
    wn = nn.utils.weight_norm

    class TemporalBlock(nn.Module):
        def __init__(self, i, o, d):
            super().__init__()
            self.pad = 2 * d
            self.conv1 = wn(nn.Conv1d(i, o, 3, dilation=d, padding=self.pad))
            self.conv2 = wn(nn.Conv1d(o, o, 3, dilation=d))
            self.down = nn.Conv1d(i, o, 1) if i != o else None

        def forward(self, x):
            h = F.relu(self.conv1(x)[:, :, : -self.pad])
            h = F.relu(self.conv2(F.pad(h, (self.pad, 0))))
            res = x if self.down is None else self.down(x)
            return F.relu(h + res)

    tcn = nn.Sequential(TemporalBlock(2, 4, 1), TemporalBlock(4, 4, 2))
    tcn = ctx.init(tcn, "tcn")
    keys = sorted(tcn.state_dict().keys())
    opt = torch.optim.SGD(tcn.parameters(), lr=0.05, momentum=0.5)
    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((3, 2, 12)).astype(np.float32))
    y = ctx.t(rng.standard_normal((3, 4, 12)).astype(np.float32))
    losses = []
    for _ in range(3):
        loss = F.mse_loss(tcn(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    g = tcn[0].conv1.weight_g.clone()
    nn.utils.remove_weight_norm(tcn[0].conv1)
    after = sorted(k for k in tcn.state_dict() if k.startswith("0.conv1"))
    return [keys, losses, g, tcn[0].conv1.weight, after, tcn(x)]


def audio_specaugment(torch, ctx):
    """Log-mel features: stft with a hann window (center, reflect padding), power
    spectrogram, a triangular mel filterbank built with torch ops, log with clamp, per-
    utterance normalization; SpecAugment's time and frequency masks set in place with
    masked_fill_ from torch.randint; a conv front end and its gradient."""
    nn = torch.nn
    sr, n_fft, hop, n_mels = 8000, 64, 16, 8
    rng = np.random.default_rng(4)
    wave = ctx.t(rng.standard_normal((2, 400)).astype(np.float32), requires_grad=True)
    spec = torch.stft(
        wave, n_fft, hop_length=hop, window=torch.hann_window(n_fft), return_complex=True
    )
    power = spec.abs().pow(2)

    def hz_to_mel(f):
        return 2595 * torch.log10(1 + f / 700)

    mels = torch.linspace(
        hz_to_mel(torch.tensor(0.0)), hz_to_mel(torch.tensor(sr / 2.0)), n_mels + 2
    )
    hz = 700 * (10 ** (mels / 2595) - 1)
    freqs = torch.linspace(0, sr / 2, n_fft // 2 + 1)
    lower = (freqs[None] - hz[:-2, None]) / (hz[1:-1, None] - hz[:-2, None])
    upper = (hz[2:, None] - freqs[None]) / (hz[2:, None] - hz[1:-1, None])
    fb = torch.clamp(torch.minimum(lower, upper), min=0)
    mel = torch.matmul(fb, power)
    logmel = torch.log(mel.clamp(min=1e-10))
    feats = (logmel - logmel.mean(-1, keepdim=True)) / (logmel.std(-1, keepdim=True) + 1e-5)
    torch.manual_seed(7)
    aug = feats.clone()
    for b in range(aug.shape[0]):
        f0 = int(torch.randint(0, n_mels - 2, (1,)))
        t0 = int(torch.randint(0, aug.shape[-1] - 4, (1,)))
        fmask = torch.zeros(n_mels, dtype=torch.bool)
        fmask[f0 : f0 + 2] = True
        aug[b].masked_fill_(fmask[:, None], 0.0)
        aug[b, :, t0 : t0 + 4] = 0
    conv = ctx.init(nn.Conv1d(n_mels, 3, 3, stride=2), "conv")
    out = conv(aug)
    out.pow(2).mean().backward()
    return [power, fb, feats, aug, out, wave.grad]


def superres_pixelshuffle(torch, ctx):
    """ESPCN: convolutions with tanh, a sub-pixel convolution by PixelShuffle(3), against
    bicubic upsampling of the input; PSNR; and PixelUnshuffle inverting it."""
    nn, F = torch.nn, torch.nn.functional
    net = ctx.init(
        nn.Sequential(
            nn.Conv2d(1, 8, 5, padding=2),
            nn.Tanh(),
            nn.Conv2d(8, 4, 3, padding=1),
            nn.Tanh(),
            nn.Conv2d(4, 9, 3, padding=1),
            nn.PixelShuffle(3),
        ),
        "net",
    )
    rng = np.random.default_rng(5)
    lr = ctx.t(rng.random((2, 1, 5, 6)).astype(np.float32))
    hr = F.interpolate(lr, scale_factor=3, mode="bicubic", align_corners=False).clamp(0, 1)
    sr = net(lr)
    mse = F.mse_loss(sr, hr)
    psnr = 10 * torch.log10(1 / mse)
    mse.backward()
    back = nn.PixelUnshuffle(3)(sr)
    return [hr, sr, psnr, back.shape, net[0].weight.grad]


def se_channels_last(torch, ctx):
    """A squeeze-excitation residual block run on a channels_last input (a model moved with
    .to(memory_format=torch.channels_last)): the output's memory format, its values and the
    gradients; contiguous(memory_format) round trips; is_contiguous queries."""
    nn = torch.nn

    class SEBlock(nn.Module):
        def __init__(self, c, r=2):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(c)
            self.fc1 = nn.Conv2d(c, c // r, 1)
            self.fc2 = nn.Conv2d(c // r, c, 1)

        def forward(self, x):
            h = torch.relu(self.bn(self.conv(x)))
            s = torch.sigmoid(self.fc2(torch.relu(self.fc1(h.mean((2, 3), keepdim=True)))))
            return torch.relu(x + h * s)

    blk = ctx.init(SEBlock(4), "se").to(memory_format=torch.channels_last)
    rng = np.random.default_rng(6)
    x = ctx.t(rng.standard_normal((2, 4, 5, 6)).astype(np.float32))
    x = x.contiguous(memory_format=torch.channels_last).requires_grad_(True)
    y = blk(x)
    y.pow(2).sum().backward()
    return [
        y,
        y.is_contiguous(memory_format=torch.channels_last),
        x.is_contiguous(),
        blk.conv.weight.is_contiguous(memory_format=torch.channels_last),
        x.grad,
        blk.conv.weight.grad,
        x.stride(),
        y.contiguous().stride(),
    ]


def instance_norm_tracking(torch, ctx):
    """InstanceNorm2d with affine and track_running_stats (its running statistics in train,
    used in eval), InstanceNorm1d without, LayerNorm over two trailing dims without bias,
    GroupNorm with one group, and LocalResponseNorm; trained a step."""
    nn = torch.nn
    inn = ctx.init(nn.InstanceNorm2d(3, affine=True, track_running_stats=True, momentum=0.3), "in")
    in1 = nn.InstanceNorm1d(3)
    ln = ctx.init(nn.LayerNorm([4, 5], bias=False), "ln")
    gn = ctx.init(nn.GroupNorm(1, 3), "gn")
    lrn = nn.LocalResponseNorm(2, alpha=1e-2, beta=0.75, k=1.0)
    rng = np.random.default_rng(7)
    x = ctx.t(rng.standard_normal((2, 3, 4, 5)).astype(np.float32) * 2 + 1, requires_grad=True)
    a = inn(x)
    b = in1(x.flatten(2))
    c = ln(x)
    d = gn(x)
    e = lrn(x)
    (
        a.pow(3).mean() + b.pow(3).mean() + c.pow(3).mean() + d.pow(3).mean() + e.pow(2).mean()
    ).backward()
    inn.eval()
    f = inn(x.detach() * 0.5)
    return [
        a,
        b,
        c,
        d,
        e,
        inn.running_mean,
        inn.running_var,
        f,
        x.grad,
        inn.weight.grad,
        ln.weight.grad,
    ]


def dlrm_interaction(torch, ctx):
    """DLRM: a bottom MLP for dense features, EmbeddingBag tables (mode sum) for sparse
    ones with offsets, the pairwise dot interaction by bmm with triu_indices(offset=1), a top
    MLP and BCE; Adagrad on the embeddings, SGD on the rest."""
    nn, F = torch.nn, torch.nn.functional
    bot = ctx.init(nn.Sequential(nn.Linear(3, 4), nn.ReLU()), "bot")
    tables = ctx.init(
        nn.ModuleList([nn.EmbeddingBag(10, 4, mode="sum") for _ in range(2)]), "tables"
    )
    top = ctx.init(nn.Sequential(nn.Linear(4 + 3, 4), nn.ReLU(), nn.Linear(4, 1)), "top")
    o1 = torch.optim.Adagrad(tables.parameters(), lr=0.1)
    o2 = torch.optim.SGD(list(bot.parameters()) + list(top.parameters()), lr=0.1)
    rng = np.random.default_rng(8)
    dense = ctx.t(rng.standard_normal((3, 3)).astype(np.float32))
    lS_i = [ctx.t(rng.integers(0, 10, 6)), ctx.t(rng.integers(0, 10, 5))]
    lS_o = [ctx.t(np.array([0, 2, 3])), ctx.t(np.array([0, 1, 4]))]
    y = ctx.t(np.array([[1.0], [0.0], [1.0]], dtype=np.float32))
    li, lj = torch.triu_indices(3, 3, offset=1)
    out = []
    for _ in range(2):
        xd = bot(dense)
        ly = [t(i, o) for t, i, o in zip(tables, lS_i, lS_o)]
        T = torch.stack([xd] + ly, dim=1)
        Z = torch.bmm(T, T.transpose(1, 2))
        inter = Z[:, li, lj]
        p = top(torch.cat([xd, inter], dim=1))
        loss = F.binary_cross_entropy_with_logits(p, y)
        o1.zero_grad()
        o2.zero_grad()
        loss.backward()
        o1.step()
        o2.step()
        out.append([loss.detach(), p.detach()])
    return [out, tables[0].weight, tables[1].weight.grad, li, lj]


PROGRAMS = [
    gcn_sparse,
    unet_small,
    video_conv3d,
    tcn_weight_norm,
    audio_specaugment,
    superres_pixelshuffle,
    se_channels_last,
    instance_norm_tracking,
    dlrm_interaction,
]
CAPTURED = [unet_small]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
