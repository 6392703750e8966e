"""A torch.compile'd audio model whose Python pads the sequence to a multiple of a window
(``pad = (window - T % window) % window``) after a strided convolution (dyn57), run on PyTorch
(its eager backend) and on ember (automatic dynamic shapes). The symbolic trace at an even
length takes ``T % 4 == 0`` as an assumption of aligned sizes; a later odd length breaks it,
which must send that call to another trace (ember raised the size check's ShapeError), traced
at that length with ``T % 4`` and the padding as sizes the graph computes."""

import numpy as np

from .harness import check_program


def padded_windows_audio(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Audio(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv1d(1, 8, 5, stride=2, padding=2)
            self.bn = nn.BatchNorm1d(8)
            self.c2 = nn.Conv1d(8, 8, 3, padding=1)
            self.gru = nn.GRU(8, 10, batch_first=True)
            self.fc = nn.Linear(10, 4)

        def forward(self, wav, window=4):
            x = F.relu(self.bn(self.c1(wav.unsqueeze(1))))
            T = x.size(-1)  # noqa: N806
            x = F.pad(x, (0, (window - T % window) % window))
            x = x.view(x.size(0), x.size(1), -1, window).mean(-1)
            x = F.relu(self.c2(x)).transpose(1, 2)
            out, hn = self.gru(x, torch.zeros(1, x.size(0), 10))
            return self.fc(hn[-1]), out.shape[1]

    model = ctx.init(Audio())
    compiled = torch.compile(model, backend="eager") if ctx.is_torch else torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    rng = np.random.default_rng(3)
    out = []
    for length in [64, 80, 64, 50, 99, 72]:
        wav = ctx.t(rng.standard_normal((3, length)).astype(np.float32))
        logits, steps = compiled(wav)
        loss = logits.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out += [loss, steps]
    if not ctx.is_torch:
        c = compiled.__dict__["_compiled"]
        auto = c.automatic
        traces = (c.function.stats.traces, [f.stats.traces for f in auto.functions.values()])
        # the first length; T symbolic where 4 divides it, then T symbolic at an odd length
        # (the pad a size the graph computes), which serves the rest
        assert not auto.failed and traces == (1, [1, 1]), traces
    return out, model.bn.running_var, [p.detach() for p in model.parameters()]


def test_padded_windows_audio():
    check_program(padded_windows_audio)
