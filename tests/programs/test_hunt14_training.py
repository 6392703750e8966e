"""Beginner-style training scripts end to end: an MNIST-style MLP with accuracy, a char-GRU with
multinomial sampling, a DCGAN generator/discriminator step, an autoencoder with MSELoss, a
regression with L1Loss and StepLR, and a WGAN-GP gradient penalty with create_graph.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007


def mnist_mlp(torch, ctx):
    nn = torch.nn
    rng = np.random.default_rng(0)
    X = ctx.t(rng.standard_normal((64, 1, 8, 8)).astype(np.float32))
    Y = ctx.t(rng.integers(0, 10, 64))
    model = ctx.init(
        nn.Sequential(
            nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.0), nn.Linear(32, 10)
        )
    )
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    step = ctx.fn(lambda xb, yb: train_step(xb, yb))

    def train_step(xb, yb):
        optimizer.zero_grad()
        out = model(xb)
        loss = criterion(out, yb)
        loss.backward()
        optimizer.step()
        return loss, out

    hist = []
    for epoch in range(3):
        model.train()
        running, correct, total = 0.0, 0, 0
        for i in range(0, 64, 16):
            xb, yb = X[i : i + 16], Y[i : i + 16]
            loss, out = step(xb, yb)
            running += loss.item() * xb.size(0)
            _, pred = torch.max(out.data, 1)
            total += yb.size(0)
            correct += (pred == yb).sum().item()
        hist.append([running / total, correct / total])
    model.eval()
    with torch.no_grad():
        logits = model(X)
        acc = (logits.argmax(dim=1) == Y).float().mean()
        probs = torch.softmax(logits, dim=1)
        conf, cls = probs.max(1)
    return [hist, acc, acc.item(), conf, cls, type(correct).__name__]


def char_gru(torch, ctx):
    nn = torch.nn
    text = "hello world, hello there, world hello"
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)

    class CharRNN(nn.Module):
        def __init__(self, vocab, hidden):
            super().__init__()
            self.emb = nn.Embedding(vocab, 8)
            self.gru = nn.GRU(8, hidden, num_layers=2, batch_first=True)
            self.fc = nn.Linear(hidden, vocab)

        def forward(self, x, h=None):
            out, h = self.gru(self.emb(x), h)
            return self.fc(out), h

    model = ctx.init(CharRNN(len(chars), 16))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    losses = []
    for it in range(4):
        starts = [0, 5, 11, 17]
        xb = torch.stack([data[s : s + 12] for s in starts])
        yb = torch.stack([data[s + 1 : s + 13] for s in starts])
        logits, _ = model(xb)
        loss = nn.functional.cross_entropy(logits.reshape(-1, len(chars)), yb.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss)
    # sampling: statistics that do not depend on the generator's stream
    model.eval()
    with torch.no_grad():
        x = data[:1].unsqueeze(0)
        h = None
        samples, shapes = [], []
        for _ in range(5):
            logits, h = model(x, h)
            p = torch.softmax(logits[:, -1] / 0.8, dim=-1)
            nxt = torch.multinomial(p, num_samples=1)
            shapes.append([tuple(nxt.shape), nxt.dtype, bool((p[0, nxt[0, 0]] > 0).item())])
            samples.append(int(nxt.item()) in range(len(chars)))
            x = nxt
        draws = torch.multinomial(torch.tensor([0.0, 1.0, 0.0]), 4, replacement=True)
        no_rep = torch.multinomial(torch.tensor([0.2, 0.3, 0.5]), 3).sort().values
        greedy = model(data[:6].unsqueeze(0))[0].argmax(-1)
    return [losses, shapes, samples, draws, no_rep, greedy, h.shape]


def dcgan(torch, ctx):
    nn = torch.nn
    nz = 8

    class G(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.ConvTranspose2d(nz, 16, 4, 1, 0, bias=False),
                nn.BatchNorm2d(16),
                nn.ReLU(True),
                nn.ConvTranspose2d(16, 8, 4, 2, 1, bias=False),
                nn.BatchNorm2d(8),
                nn.ReLU(True),
                nn.ConvTranspose2d(8, 1, 4, 2, 1, bias=False),
                nn.Tanh(),
            )

        def forward(self, z):
            return self.main(z)

    class D(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(1, 8, 4, 2, 1, bias=False),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(8, 16, 4, 2, 1, bias=False),
                nn.BatchNorm2d(16),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(16, 1, 4, 1, 0, bias=False),
                nn.Sigmoid(),
            )

        def forward(self, x):
            return self.main(x).view(-1, 1).squeeze(1)

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            nn.init.normal_(m.weight.data, 1.0, 0.02)
            nn.init.constant_(m.bias.data, 0)

    netG, netD = G(), D()
    netG.apply(weights_init)
    netD.apply(weights_init)
    netG, netD = ctx.init(netG, "g"), ctx.init(netD, "d")
    crit = nn.BCELoss()
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    rng = np.random.default_rng(1)
    real = ctx.t(np.tanh(rng.standard_normal((4, 1, 16, 16))).astype(np.float32))
    out = []
    for i in range(2):
        noise = ctx.t(rng.standard_normal((4, nz, 1, 1)).astype(np.float32))
        netD.zero_grad()
        label = torch.full((4,), 1.0, dtype=torch.float)
        errD_real = crit(netD(real), label)
        errD_real.backward()
        fake = netG(noise)
        label.fill_(0.0)
        output = netD(fake.detach())
        errD_fake = crit(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        optD.step()
        netG.zero_grad()
        label.fill_(1.0)
        output = netD(fake)
        errG = crit(output, label)
        errG.backward()
        optG.step()
        out.append([errD_real + errD_fake, errG, D_G_z1, fake.shape])
    netG.eval()
    with torch.no_grad():
        img = netG(ctx.t(rng.standard_normal((2, nz, 1, 1)).astype(np.float32)))
    return [out, img, netG.main[1].running_mean, netD.main[3].num_batches_tracked]


def autoencoder(torch, ctx):
    nn = torch.nn

    class AE(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(20, 8), nn.ReLU(), nn.Linear(8, 3))
            self.decoder = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 20), nn.Sigmoid())

        def forward(self, x):
            z = self.encoder(x)
            return self.decoder(z), z

    rng = np.random.default_rng(2)
    data = ctx.t(rng.random((32, 20)).astype(np.float32))
    ds = torch.utils.data.TensorDataset(data)
    loader = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=False)
    model = ctx.init(AE())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-4)
    mse = nn.MSELoss(reduction="mean")
    step = ctx.fn(lambda b: _step(b))

    def _step(b):
        recon, _ = model(b)
        loss = mse(recon, b)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    epoch_losses = []
    for epoch in range(3):
        total = 0.0
        for (batch,) in loader:
            total += step(batch).item()
        epoch_losses.append(total / len(loader))
    with torch.inference_mode():
        recon, z = model(data)
        err = ((recon - data) ** 2).mean(dim=1)
        worst = torch.topk(err, 3).indices
    return [epoch_losses, z, err, worst, nn.MSELoss(reduction="sum")(recon, data)]


def regression_steplr(torch, ctx):
    nn = torch.nn
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 3)).astype(np.float32)
    w_true = np.array([[1.5], [-2.0], [0.5]], dtype=np.float32)
    y = X @ w_true + 0.3 + 0.05 * rng.standard_normal((40, 1)).astype(np.float32)
    X, y = ctx.t(X), ctx.t(y)
    model = ctx.init(nn.Linear(3, 1))
    criterion = nn.L1Loss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)
    lrs, losses = [], []
    for epoch in range(12):
        pred = model(X)
        loss = criterion(pred, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
        losses.append(loss.item())
    w = model.weight.detach().clone()
    b = model.bias.item()
    r2 = 1 - ((model(X) - y) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    sl1 = nn.SmoothL1Loss(beta=0.5)(model(X), y)
    huber = nn.HuberLoss(delta=0.5)(model(X), y)
    return [lrs, losses, w, b, r2, sl1, huber, sched.state_dict()["last_epoch"]]


def wgan_gp(torch, ctx):
    nn = torch.nn
    critic = ctx.init(nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1)), "c")
    gen = ctx.init(nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 4)), "g")
    # SGD, not Adam: Adam's first step moves a parameter whose gradient is a rounding residue
    # (1e-8 on one library, 0 on the other) by a whole lr
    optC = torch.optim.SGD(critic.parameters(), lr=1e-2, momentum=0.5)
    optG = torch.optim.SGD(gen.parameters(), lr=1e-2, momentum=0.5)
    rng = np.random.default_rng(4)

    def gradient_penalty(real, fake, alpha):
        interp = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        d = critic(interp)
        grads = torch.autograd.grad(
            outputs=d,
            inputs=interp,
            grad_outputs=torch.ones_like(d),
            create_graph=True,
            retain_graph=True,
        )[0]
        return ((grads.norm(2, dim=1) - 1) ** 2).mean()

    def critic_step(real, fake, alpha):
        gp = gradient_penalty(real, fake, alpha)
        lossC = critic(fake).mean() - critic(real).mean() + 10 * gp
        optC.zero_grad()
        lossC.backward()
        optC.step()
        return gp, lossC

    critic_step = ctx.fn(critic_step)
    out = []
    for _it in range(3):
        real = ctx.t(rng.standard_normal((8, 4)).astype(np.float32))
        z = ctx.t(rng.standard_normal((8, 2)).astype(np.float32))
        alpha = ctx.t(rng.random((8, 1)).astype(np.float32))
        fake = gen(z).detach()
        gp, lossC = critic_step(real, fake, alpha)
        for p in critic.parameters():
            p.requires_grad_(False)
        lossG = -critic(gen(z)).mean()
        optG.zero_grad()
        lossG.backward()
        optG.step()
        for p in critic.parameters():
            p.requires_grad_(True)
        out.append([gp, lossC, lossG, critic[0].weight.grad.clone()])
    return out


PROGRAMS = [mnist_mlp, char_gru, dcgan, autoencoder, regression_steplr, wgan_gp]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", [mnist_mlp, autoencoder, wgan_gp], ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
