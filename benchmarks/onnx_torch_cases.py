"""Realistic-size models written in plain PyTorch, for benchmarks/onnx_runtime.py's ``--cases``.

Each builder returns ``(module, example_inputs)``; the module is in eval mode with seeded weights.
The patterns are those of HuggingFace's BERT, GPT-2 and ViT (rebuilt here, transformers is not
a dependency): erf-GELU, LayerNorm after a residual add, attention as MatMul + scale + mask add +
Softmax + MatMul, a causal mask by ``where``; and an LSTM tagger and a MobileNet-like CNN.
"""

from __future__ import annotations

import math


def _attention_block(torch, hidden: int, heads: int, causal: bool, pre_norm: bool):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(hidden, hidden)
            self.k = nn.Linear(hidden, hidden)
            self.v = nn.Linear(hidden, hidden)
            self.o = nn.Linear(hidden, hidden)
            self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
            self.ln2 = nn.LayerNorm(hidden, eps=1e-12)
            self.up = nn.Linear(hidden, 4 * hidden)
            self.down = nn.Linear(4 * hidden, hidden)

        def split(self, x):
            b, s, _ = x.shape
            return x.view(b, s, heads, hidden // heads).transpose(1, 2)

        def attend(self, x, mask):
            b, s, _ = x.shape
            q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hidden // heads)
            if causal:
                keep = torch.ones(s, s, dtype=torch.bool).tril()
                scores = torch.where(keep, scores, torch.finfo(scores.dtype).min)
            scores = scores + mask
            probs = F.softmax(scores, dim=-1)
            out = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, hidden)
            return self.o(out)

        def forward(self, x, mask):
            if pre_norm:
                x = x + self.attend(self.ln1(x), mask)
                return x + self.down(F.gelu(self.up(self.ln2(x))))
            x = self.ln1(x + self.attend(x, mask))
            return self.ln2(x + self.down(F.gelu(self.up(x))))

    return Block()


def bert(torch, hidden=256, layers=4, seq=128, batch=1, vocab=1000):
    nn = torch.nn

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.words = nn.Embedding(vocab, hidden)
            self.positions = nn.Embedding(512, hidden)
            self.register_buffer("position_ids", torch.arange(512).unsqueeze(0), persistent=False)
            self.ln = nn.LayerNorm(hidden, eps=1e-12)
            self.blocks = nn.ModuleList(
                _attention_block(torch, hidden, hidden // 64, False, False) for _ in range(layers)
            )
            self.pool = nn.Linear(hidden, hidden)

        def forward(self, ids, attention_mask):
            s = ids.shape[1]
            x = self.ln(self.words(ids) + self.positions(self.position_ids[:, :s]))
            mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
            for block in self.blocks:
                x = block(x, mask)
            return torch.tanh(self.pool(x[:, 0]))

    torch.manual_seed(0)
    ids = torch.randint(0, vocab, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[:, seq - seq // 8 :] = 0
    return Bert().eval(), (ids, mask)


def gpt2(torch, hidden=256, layers=4, seq=128, batch=1, vocab=1000):
    nn = torch.nn

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.words = nn.Embedding(vocab, hidden)
            self.positions = nn.Embedding(512, hidden)
            self.blocks = nn.ModuleList(
                _attention_block(torch, hidden, hidden // 64, True, True) for _ in range(layers)
            )
            self.ln = nn.LayerNorm(hidden)
            self.head = nn.Linear(hidden, vocab, bias=False)

        def forward(self, ids):
            s = ids.shape[1]
            x = self.words(ids) + self.positions(torch.arange(s).unsqueeze(0))
            mask = torch.zeros(1, 1, 1, s)
            for block in self.blocks:
                x = block(x, mask)
            return self.head(self.ln(x))

    torch.manual_seed(0)
    return Gpt().eval(), (torch.randint(0, vocab, (batch, seq)),)


def vit(torch, hidden=256, layers=4, image=224, patch=16, batch=1):
    nn = torch.nn

    class Vit(nn.Module):
        def __init__(self):
            super().__init__()
            self.patches = nn.Conv2d(3, hidden, patch, stride=patch)
            count = (image // patch) ** 2
            self.cls = nn.Parameter(torch.randn(1, 1, hidden) * 0.02)
            self.pos = nn.Parameter(torch.randn(1, count + 1, hidden) * 0.02)
            self.blocks = nn.ModuleList(
                _attention_block(torch, hidden, hidden // 64, False, True) for _ in range(layers)
            )
            self.ln = nn.LayerNorm(hidden)
            self.head = nn.Linear(hidden, 1000)

        def forward(self, pixels):
            x = self.patches(pixels).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            mask = torch.zeros(1, 1, 1, x.shape[1])
            for block in self.blocks:
                x = block(x, mask)
            return self.head(self.ln(x)[:, 0])

    torch.manual_seed(0)
    return Vit().eval(), (torch.randn(batch, 3, image, image),)


def lstm(torch, hidden=256, layers=2, seq=64, batch=1, vocab=1000):
    nn = torch.nn

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, hidden)
            self.rnn = nn.LSTM(hidden, hidden, num_layers=layers, batch_first=True)
            self.head = nn.Linear(hidden, 32)

        def forward(self, ids):
            out, _ = self.rnn(self.embed(ids))
            return self.head(out)

    torch.manual_seed(0)
    return Tagger().eval(), (torch.randint(0, vocab, (batch, seq)),)


def rnn(torch, hidden=256, layers=2, seq=64, batch=1, vocab=1000):
    """The LSTM tagger's shape with nn.RNN (tanh): ONNX's RNN node."""
    nn = torch.nn

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, hidden)
            self.rnn = nn.RNN(hidden, hidden, num_layers=layers, batch_first=True)
            self.head = nn.Linear(hidden, 32)

        def forward(self, ids):
            out, _ = self.rnn(self.embed(ids))
            return self.head(out)

    torch.manual_seed(0)
    return Tagger().eval(), (torch.randint(0, vocab, (batch, seq)),)


def mobilenet(torch, width=32, image=224, batch=1):
    nn = torch.nn

    def block(cin, cout, stride, expand=4):
        mid = cin * expand
        return nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False),
            nn.BatchNorm2d(mid),
            nn.ReLU6(),
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False),
            nn.BatchNorm2d(mid),
            nn.ReLU6(),
            nn.Conv2d(mid, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        )

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, width, 3, 2, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU6()
            )
            chans = [width, 24, 32, 64, 96, 160]
            self.blocks = nn.Sequential(
                *(block(chans[i], chans[i + 1], 2 if i < 4 else 1) for i in range(5))
            )
            self.head = nn.Linear(chans[-1], 1000)

        def forward(self, x):
            x = self.blocks(self.stem(x))
            return self.head(x.mean((2, 3)))

    torch.manual_seed(0)
    net = Net()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return net.eval(), (torch.randn(batch, 3, image, image),)


def mobilenet_v2(torch, image=224, batch=1):
    """torchvision's MobileNetV2 (width 1.0) written out: inverted residual blocks (1x1
    expansion, ReLU6, 3x3 depthwise, ReLU6, 1x1 projection, the shortcut where the shape
    stays), random weights and batch-norm statistics."""
    nn = torch.nn

    def conv_bn(cin, cout, kernel, stride=1, groups=1, act=True):
        layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False)]
        return layers + [nn.BatchNorm2d(cout)] + ([nn.ReLU6()] if act else [])

    class Block(nn.Module):
        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            mid = cin * expand
            layers = conv_bn(cin, mid, 1) if expand != 1 else []
            layers += conv_bn(mid, mid, 3, stride, mid) + conv_bn(mid, cout, 1, act=False)
            self.body = nn.Sequential(*layers)
            self.shortcut = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.shortcut else self.body(x)

    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1)]
    settings += [(6, 160, 3, 2), (6, 320, 1, 1)]
    layers, cin = conv_bn(3, 32, 3, 2), 32
    for t, c, n, s in settings:
        for i in range(n):
            layers.append(Block(cin, c, s if i == 0 else 1, t))
            cin = c
    layers += conv_bn(cin, 1280, 1) + [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1280, 1000)]
    torch.manual_seed(0)
    net = nn.Sequential(*layers)
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return net.eval(), (torch.randn(batch, 3, image, image),)


def avgcnn(torch, width=32, image=64, batch=1):
    """A small CNN with average pooling between stages and adaptive average pooling at the end."""
    nn = torch.nn

    def stage(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2)]

    torch.manual_seed(0)
    net = nn.Sequential(
        *stage(3, width),
        *stage(width, 2 * width),
        nn.Conv2d(2 * width, 4 * width, 3, padding=1),
        nn.ReLU(),
        nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False, ceil_mode=True),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4 * width, 10),
    )
    return net.eval(), (torch.randn(batch, 3, image, image),)


def tcn(torch, channels=64, length=256, levels=4, batch=1):
    """A temporal convolutional net: dilated Conv1d blocks with InstanceNorm1d, average pooling
    along time and a linear head."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, dilation):
            super().__init__()
            self.conv = nn.Conv1d(channels, channels, 3, padding=dilation, dilation=dilation)
            self.norm = nn.InstanceNorm1d(channels, affine=True)

        def forward(self, x):
            return x + torch.relu(self.norm(self.conv(x)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv1d(8, channels, 5, padding=2)
            self.blocks = nn.Sequential(*(Block(2**i) for i in range(levels)))
            self.pool = nn.AvgPool1d(4)
            self.head = nn.Linear(channels, 5)

        def forward(self, x):
            x = self.pool(self.blocks(self.stem(x)))
            return self.head(x.mean(2))

    torch.manual_seed(0)
    return Net().eval(), (torch.randn(batch, 8, length),)


def groupnorm(torch, width=32, image=32, batch=1):
    """A CNN with GroupNorm after each convolution (ONNX GroupNormalization or InstanceNorm)."""
    nn = torch.nn
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1),
        nn.GroupNorm(4, width),
        nn.SiLU(),
        nn.Conv2d(width, width, 3, padding=1),
        nn.GroupNorm(8, width),
        nn.SiLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(width, 10),
    )
    return net.eval(), (torch.randn(batch, 3, image, image),)


def bilstm(torch, hidden=128, seq=32, batch=1, vocab=1000):
    """A bidirectional LSTM classifier: the last step's features to a linear head."""
    nn = torch.nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, hidden)
            self.rnn = nn.LSTM(hidden, hidden, batch_first=True, bidirectional=True)
            self.head = nn.Linear(2 * hidden, 4)

        def forward(self, ids):
            out, _ = self.rnn(self.embed(ids))
            return self.head(out[:, -1])

    torch.manual_seed(0)
    return Classifier().eval(), (torch.randint(0, vocab, (batch, seq)),)


def gru(torch, hidden=128, seq=32, batch=1, vocab=1000):
    """A two-layer GRU classifier."""
    nn = torch.nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, hidden)
            self.rnn = nn.GRU(hidden, hidden, num_layers=2, batch_first=True)
            self.head = nn.Linear(hidden, 4)

        def forward(self, ids):
            out, _ = self.rnn(self.embed(ids))
            return self.head(out[:, -1])

    torch.manual_seed(0)
    return Classifier().eval(), (torch.randint(0, vocab, (batch, seq)),)


def encoder(torch, hidden=128, heads=4, layers=2, seq=64, batch=1):
    """nn.TransformerEncoder (post-norm LayerNorm, ReLU feed-forward)."""
    nn = torch.nn
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, dropout=0.0, batch_first=True)
    net = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    return net.eval(), (torch.randn(batch, seq, hidden),)


def unet(torch, width=16, image=64, batch=1):
    """A small U-Net: conv-BN-ReLU pairs, max pooling down, transposed convolutions up, skip
    connections concatenated along channels."""
    nn = torch.nn

    def double(cin, cout):
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(),
        )

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            w = width
            self.down = nn.ModuleList([double(3, w), double(w, 2 * w), double(2 * w, 4 * w)])
            self.pool = nn.MaxPool2d(2)
            self.middle = double(4 * w, 8 * w)
            self.up = nn.ModuleList(
                [nn.ConvTranspose2d(c, c // 2, 2, stride=2) for c in (8 * w, 4 * w, 2 * w)]
            )
            self.fuse = nn.ModuleList([double(c, c // 2) for c in (8 * w, 4 * w, 2 * w)])
            self.head = nn.Conv2d(w, 2, 1)

        def forward(self, x):
            skips = []
            for block in self.down:
                x = block(x)
                skips.append(x)
                x = self.pool(x)
            x = self.middle(x)
            for up, fuse, skip in zip(self.up, self.fuse, reversed(skips)):
                x = fuse(torch.cat([up(x), skip], 1))
            return self.head(x)

    torch.manual_seed(0)
    net = Net()
    for m in net.modules():  # (trained-looking statistics: folding must carry them)
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    return net.eval(), (torch.randn(batch, 3, image, image),)


def efficientnet(torch, image=96, batch=1):
    """EfficientNet-like MBConv blocks: 1x1 expansion, depthwise convolution, SiLU,
    squeeze-and-excitation (global average pooling, two 1x1 convolutions, sigmoid gate), 1x1
    projection with BatchNorm, residual adds."""
    nn = torch.nn

    class MBConv(nn.Module):
        def __init__(self, cin, cout, stride, expand=4, kernel=3):
            super().__init__()
            mid = cin * expand
            self.expand = nn.Sequential(
                nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.SiLU()
            )
            self.depthwise = nn.Sequential(
                nn.Conv2d(mid, mid, kernel, stride, kernel // 2, groups=mid, bias=False),
                nn.BatchNorm2d(mid),
                nn.SiLU(),
            )
            squeeze = max(1, cin // 4)
            self.se = nn.Sequential(
                nn.AdaptiveAvgPool2d(1),
                nn.Conv2d(mid, squeeze, 1),
                nn.SiLU(),
                nn.Conv2d(squeeze, mid, 1),
                nn.Sigmoid(),
            )
            self.project = nn.Sequential(nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = self.depthwise(self.expand(x))
            y = self.project(y * self.se(y))
            return x + y if self.residual else y

    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 16, 3, 2, 1, bias=False),
        nn.BatchNorm2d(16),
        nn.SiLU(),
        MBConv(16, 24, 2),
        MBConv(24, 24, 1),
        MBConv(24, 40, 2, kernel=5),
        MBConv(40, 40, 1, kernel=5),
        MBConv(40, 80, 2),
        MBConv(80, 80, 1),
        nn.Conv2d(80, 320, 1, bias=False),
        nn.BatchNorm2d(320),
        nn.SiLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(320, 10),
    )
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    return net.eval(), (torch.randn(batch, 3, image, image),)


BUILDERS = {
    "bert": bert,
    "gpt2": gpt2,
    "vit": vit,
    "lstm": lstm,
    "rnn": rnn,
    "mobilenet": mobilenet,
    "mobilenet_v2": mobilenet_v2,
    "avgcnn": avgcnn,
    "tcn": tcn,
    "groupnorm": groupnorm,
    "bilstm": bilstm,
    "gru": gru,
    "encoder": encoder,
    "unet": unet,
    "efficientnet": efficientnet,
}

# typical small inference models (benchmarks/c_step_survey.py)
SURVEY = ("avgcnn", "tcn", "groupnorm", "bilstm", "gru", "lstm", "rnn", "encoder", "mobilenet")


def export(torch, name: str, path: str, batch: int, dynamo: bool, opset: int, **sizes) -> None:
    """Writes case ``name`` at ``batch`` with torch.onnx.export (the dynamo or TorchScript
    exporter) to ``path``."""
    import warnings

    module, example = BUILDERS[name](torch, batch=batch, **sizes)
    options = {"external_data": False} if dynamo else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, example, path, dynamo=dynamo, opset_version=opset, **options)
