"""torchvision-style model definitions of hunt56, each trained a few steps on PyTorch and on
ember (eagerly; most also with the training step under ``ember.function``): DenseNet with its
memory-efficient checkpointed bottleneck, GoogLeNet with auxiliary logits and a named-tuple
output, ShuffleNetV2's channel shuffle, SqueezeNet's Fire modules, EfficientNet with
StochasticDepth and squeeze-excitation, a Swin V2 block (cosine attention, continuous relative
position bias, shifted-window masks), torchvision's VisionTransformer, VGG with batch norm and
RegNet's OrderedDict stages; torchvision's initialisations throughout.
"""

import math
from collections import OrderedDict
from functools import partial

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E501, UP031, UP008, B007, C408, E731, F841, SIM108


def _train(torch, ctx, model, x, y, steps=2, lr=0.05, opt=None, key="model"):
    ctx.init(model, key)
    opt = opt or torch.optim.SGD(
        model.parameters(), lr=lr, momentum=0.9, nesterov=True, weight_decay=1e-4
    )
    outs = []
    model.train()

    def step(x, y):
        opt.zero_grad()
        out = model(x)
        if isinstance(out, tuple):
            loss = torch.nn.functional.cross_entropy(
                out[0], y
            ) + 0.3 * torch.nn.functional.cross_entropy(out[1], y)
        else:
            loss = torch.nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    for _ in range(steps):
        outs.append(step(x, y))
    model.eval()
    with torch.no_grad():
        outs.append(model(x))
    outs.append({k: v for k, v in model.state_dict().items()})
    return outs


def densenet(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    cp = torch.utils.checkpoint

    class _DenseLayer(nn.Module):
        def __init__(
            self, num_input_features, growth_rate, bn_size, drop_rate, memory_efficient=False
        ):
            super().__init__()
            self.norm1 = nn.BatchNorm2d(num_input_features)
            self.relu1 = nn.ReLU(inplace=True)
            self.conv1 = nn.Conv2d(
                num_input_features, bn_size * growth_rate, kernel_size=1, stride=1, bias=False
            )
            self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
            self.relu2 = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(
                bn_size * growth_rate, growth_rate, kernel_size=3, stride=1, padding=1, bias=False
            )
            self.drop_rate = float(drop_rate)
            self.memory_efficient = memory_efficient

        def bn_function(self, inputs):
            concated_features = torch.cat(inputs, 1)
            return self.conv1(self.relu1(self.norm1(concated_features)))

        def any_requires_grad(self, input):
            for tensor in input:
                if tensor.requires_grad:
                    return True
            return False

        def call_checkpoint_bottleneck(self, input):
            def closure(*inputs):
                return self.bn_function(inputs)

            return cp.checkpoint(closure, *input, use_reentrant=False)

        def forward(self, input):
            if isinstance(input, torch.Tensor):
                prev_features = [input]
            else:
                prev_features = input
            if self.memory_efficient and self.any_requires_grad(prev_features):
                bottleneck_output = self.call_checkpoint_bottleneck(prev_features)
            else:
                bottleneck_output = self.bn_function(prev_features)
            new_features = self.conv2(self.relu2(self.norm2(bottleneck_output)))
            if self.drop_rate > 0:
                new_features = F.dropout(new_features, p=self.drop_rate, training=self.training)
            return new_features

    class _DenseBlock(nn.ModuleDict):
        _version = 2

        def __init__(
            self,
            num_layers,
            num_input_features,
            bn_size,
            growth_rate,
            drop_rate,
            memory_efficient=False,
        ):
            super().__init__()
            for i in range(num_layers):
                layer = _DenseLayer(
                    num_input_features + i * growth_rate,
                    growth_rate=growth_rate,
                    bn_size=bn_size,
                    drop_rate=drop_rate,
                    memory_efficient=memory_efficient,
                )
                self.add_module("denselayer%d" % (i + 1), layer)

        def forward(self, init_features):
            features = [init_features]
            for name, layer in self.items():
                new_features = layer(features)
                features.append(new_features)
            return torch.cat(features, 1)

    class _Transition(nn.Sequential):
        def __init__(self, num_input_features, num_output_features):
            super().__init__()
            self.norm = nn.BatchNorm2d(num_input_features)
            self.relu = nn.ReLU(inplace=True)
            self.conv = nn.Conv2d(
                num_input_features, num_output_features, kernel_size=1, stride=1, bias=False
            )
            self.pool = nn.AvgPool2d(kernel_size=2, stride=2)

    class DenseNet(nn.Module):
        def __init__(
            self,
            growth_rate=4,
            block_config=(2, 2),
            num_init_features=8,
            bn_size=2,
            drop_rate=0.0,
            num_classes=5,
            memory_efficient=True,
        ):
            super().__init__()
            self.features = nn.Sequential(
                OrderedDict(
                    [
                        (
                            "conv0",
                            nn.Conv2d(
                                3, num_init_features, kernel_size=7, stride=2, padding=3, bias=False
                            ),
                        ),
                        ("norm0", nn.BatchNorm2d(num_init_features)),
                        ("relu0", nn.ReLU(inplace=True)),
                        ("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1)),
                    ]
                )
            )
            num_features = num_init_features
            for i, num_layers in enumerate(block_config):
                block = _DenseBlock(
                    num_layers=num_layers,
                    num_input_features=num_features,
                    bn_size=bn_size,
                    growth_rate=growth_rate,
                    drop_rate=drop_rate,
                    memory_efficient=memory_efficient,
                )
                self.features.add_module("denseblock%d" % (i + 1), block)
                num_features = num_features + num_layers * growth_rate
                if i != len(block_config) - 1:
                    trans = _Transition(
                        num_input_features=num_features, num_output_features=num_features // 2
                    )
                    self.features.add_module("transition%d" % (i + 1), trans)
                    num_features = num_features // 2
            self.features.add_module("norm5", nn.BatchNorm2d(num_features))
            self.classifier = nn.Linear(num_features, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.Linear):
                    nn.init.constant_(m.bias, 0)

        def forward(self, x):
            features = self.features(x)
            out = F.relu(features, inplace=True)
            out = F.adaptive_avg_pool2d(out, (1, 1))
            out = torch.flatten(out, 1)
            out = self.classifier(out)
            return out

    rng = np.random.default_rng(0)
    model = DenseNet()
    x = ctx.t(rng.standard_normal((2, 3, 16, 16)).astype(np.float32))
    y = ctx.t(rng.integers(0, 5, 2))
    names = [n for n, _ in model.named_modules()]
    return [names] + _train(torch, ctx, model, x, y)


def googlenet(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    from collections import namedtuple

    GoogLeNetOutputs = namedtuple("GoogLeNetOutputs", ["logits", "aux_logits2", "aux_logits1"])

    class BasicConv2d(nn.Module):
        def __init__(self, in_channels, out_channels, **kwargs):
            super().__init__()
            self.conv = nn.Conv2d(in_channels, out_channels, bias=False, **kwargs)
            self.bn = nn.BatchNorm2d(out_channels, eps=0.001)

        def forward(self, x):
            x = self.conv(x)
            x = self.bn(x)
            return F.relu(x, inplace=True)

    class Inception(nn.Module):
        def __init__(
            self, in_channels, ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj, conv_block=None
        ):
            super().__init__()
            if conv_block is None:
                conv_block = BasicConv2d
            self.branch1 = conv_block(in_channels, ch1x1, kernel_size=1)
            self.branch2 = nn.Sequential(
                conv_block(in_channels, ch3x3red, kernel_size=1),
                conv_block(ch3x3red, ch3x3, kernel_size=3, padding=1),
            )
            self.branch3 = nn.Sequential(
                conv_block(in_channels, ch5x5red, kernel_size=1),
                conv_block(ch5x5red, ch5x5, kernel_size=3, padding=1),
            )
            self.branch4 = nn.Sequential(
                nn.MaxPool2d(kernel_size=3, stride=1, padding=1, ceil_mode=True),
                conv_block(in_channels, pool_proj, kernel_size=1),
            )

        def _forward(self, x):
            return [self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)]

        def forward(self, x):
            outputs = self._forward(x)
            return torch.cat(outputs, 1)

    class InceptionAux(nn.Module):
        def __init__(self, in_channels, num_classes, conv_block=None, dropout=0.7):
            super().__init__()
            conv_block = conv_block or BasicConv2d
            self.conv = conv_block(in_channels, 8, kernel_size=1)
            self.fc1 = nn.Linear(8 * 2 * 2, 16)
            self.fc2 = nn.Linear(16, num_classes)
            self.dropout = nn.Dropout(p=dropout)

        def forward(self, x):
            x = F.adaptive_avg_pool2d(x, (2, 2))
            x = self.conv(x)
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x), inplace=True)
            x = self.dropout(x)
            return self.fc2(x)

    class GoogLeNet(nn.Module):
        __constants__ = ["aux_logits", "transform_input"]

        def __init__(self, num_classes=6, aux_logits=True, transform_input=True):
            super().__init__()
            self.aux_logits = aux_logits
            self.transform_input = transform_input
            self.conv1 = BasicConv2d(3, 8, kernel_size=7, stride=2, padding=3)
            self.maxpool1 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
            self.inception3a = Inception(8, 4, 4, 8, 2, 4, 4)
            self.maxpool3 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
            self.inception4a = Inception(20, 8, 4, 8, 2, 4, 4)
            self.aux1 = InceptionAux(20, num_classes, dropout=0.7) if aux_logits else None
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.dropout = nn.Dropout(p=0.2)
            self.fc = nn.Linear(24, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d) or isinstance(m, nn.Linear):
                    torch.nn.init.trunc_normal_(m.weight, mean=0.0, std=0.01, a=-2, b=2)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

        def _transform_input(self, x):
            if self.transform_input:
                x_ch0 = torch.unsqueeze(x[:, 0], 1) * (0.229 / 0.5) + (0.485 - 0.5) / 0.5
                x_ch1 = torch.unsqueeze(x[:, 1], 1) * (0.224 / 0.5) + (0.456 - 0.5) / 0.5
                x_ch2 = torch.unsqueeze(x[:, 2], 1) * (0.225 / 0.5) + (0.406 - 0.5) / 0.5
                x = torch.cat((x_ch0, x_ch1, x_ch2), 1)
            return x

        def forward(self, x):
            x = self._transform_input(x)
            x = self.maxpool1(self.conv1(x))
            x = self.inception3a(x)
            x = self.maxpool3(x)
            aux1 = None
            if self.aux1 is not None and self.training:
                aux1 = self.aux1(x)
            x = self.inception4a(x)
            x = self.avgpool(x)
            x = torch.flatten(x, 1)
            x = self.dropout(x)
            x = self.fc(x)
            if self.training and self.aux_logits:
                if torch.jit.is_scripting():
                    return GoogLeNetOutputs(x, None, aux1)
                return GoogLeNetOutputs(x, None, aux1)
            return x

    rng = np.random.default_rng(1)
    model = GoogLeNet()
    ctx.init(model)
    x = ctx.t(rng.standard_normal((4, 3, 29, 29)).astype(np.float32))
    y = ctx.t(rng.integers(0, 6, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    outs = []
    for _ in range(2):
        opt.zero_grad()
        out = model(x)
        outs.append(type(out).__name__)
        outs.append(out._fields)
        loss = F.cross_entropy(out.logits, y) + 0.3 * F.cross_entropy(out.aux_logits1, y)
        loss.backward()
        opt.step()
        outs.append(loss)
    model.eval()
    with torch.no_grad():
        outs.append(model(x))
    return outs


def shufflenet(torch, ctx):
    nn = torch.nn

    def channel_shuffle(x, groups: int):
        batchsize, num_channels, height, width = x.size()
        channels_per_group = num_channels // groups
        x = x.view(batchsize, groups, channels_per_group, height, width)
        x = torch.transpose(x, 1, 2).contiguous()
        x = x.view(batchsize, num_channels, height, width)
        return x

    class InvertedResidual(nn.Module):
        def __init__(self, inp, oup, stride):
            super().__init__()
            if not (1 <= stride <= 3):
                raise ValueError("illegal stride value")
            self.stride = stride
            branch_features = oup // 2
            if self.stride > 1:
                self.branch1 = nn.Sequential(
                    self.depthwise_conv(inp, inp, kernel_size=3, stride=self.stride, padding=1),
                    nn.BatchNorm2d(inp),
                    nn.Conv2d(inp, branch_features, kernel_size=1, stride=1, padding=0, bias=False),
                    nn.BatchNorm2d(branch_features),
                    nn.ReLU(inplace=True),
                )
            else:
                self.branch1 = nn.Sequential()
            self.branch2 = nn.Sequential(
                nn.Conv2d(
                    inp if (self.stride > 1) else branch_features,
                    branch_features,
                    kernel_size=1,
                    stride=1,
                    padding=0,
                    bias=False,
                ),
                nn.BatchNorm2d(branch_features),
                nn.ReLU(inplace=True),
                self.depthwise_conv(
                    branch_features, branch_features, kernel_size=3, stride=self.stride, padding=1
                ),
                nn.BatchNorm2d(branch_features),
                nn.Conv2d(
                    branch_features, branch_features, kernel_size=1, stride=1, padding=0, bias=False
                ),
                nn.BatchNorm2d(branch_features),
                nn.ReLU(inplace=True),
            )

        @staticmethod
        def depthwise_conv(i, o, kernel_size, stride=1, padding=0, bias=False):
            return nn.Conv2d(i, o, kernel_size, stride, padding, bias=bias, groups=i)

        def forward(self, x):
            if self.stride == 1:
                x1, x2 = x.chunk(2, dim=1)
                out = torch.cat((x1, self.branch2(x2)), dim=1)
            else:
                out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
            out = channel_shuffle(out, 2)
            return out

    class ShuffleNetV2(nn.Module):
        def __init__(self, stages_repeats, stages_out_channels, num_classes=4):
            super().__init__()
            self._stage_out_channels = stages_out_channels
            input_channels = 3
            output_channels = self._stage_out_channels[0]
            self.conv1 = nn.Sequential(
                nn.Conv2d(input_channels, output_channels, 3, 2, 1, bias=False),
                nn.BatchNorm2d(output_channels),
                nn.ReLU(inplace=True),
            )
            input_channels = output_channels
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.stage2: nn.Sequential
            self.stage3: nn.Sequential
            stage_names = [f"stage{i}" for i in [2, 3]]
            for name, repeats, output_channels in zip(
                stage_names, stages_repeats, self._stage_out_channels[1:]
            ):
                seq = [InvertedResidual(input_channels, output_channels, 2)]
                for i in range(repeats - 1):
                    seq.append(InvertedResidual(output_channels, output_channels, 1))
                setattr(self, name, nn.Sequential(*seq))
                input_channels = output_channels
            output_channels = self._stage_out_channels[-1]
            self.conv5 = nn.Sequential(
                nn.Conv2d(input_channels, output_channels, 1, 1, 0, bias=False),
                nn.BatchNorm2d(output_channels),
                nn.ReLU(inplace=True),
            )
            self.fc = nn.Linear(output_channels, num_classes)

        def _forward_impl(self, x):
            x = self.conv1(x)
            x = self.maxpool(x)
            x = self.stage2(x)
            x = self.stage3(x)
            x = self.conv5(x)
            x = x.mean([2, 3])
            x = self.fc(x)
            return x

        def forward(self, x):
            return self._forward_impl(x)

    rng = np.random.default_rng(2)
    model = ShuffleNetV2([2, 2], [8, 16, 32, 40])
    x = ctx.t(rng.standard_normal((2, 3, 24, 24)).astype(np.float32))
    y = ctx.t(rng.integers(0, 4, 2))
    return _train(torch, ctx, model, x, y)


def squeezenet(torch, ctx):
    nn = torch.nn
    init = torch.nn.init

    class Fire(nn.Module):
        def __init__(self, inplanes, squeeze_planes, expand1x1_planes, expand3x3_planes):
            super().__init__()
            self.inplanes = inplanes
            self.squeeze = nn.Conv2d(inplanes, squeeze_planes, kernel_size=1)
            self.squeeze_activation = nn.ReLU(inplace=True)
            self.expand1x1 = nn.Conv2d(squeeze_planes, expand1x1_planes, kernel_size=1)
            self.expand1x1_activation = nn.ReLU(inplace=True)
            self.expand3x3 = nn.Conv2d(squeeze_planes, expand3x3_planes, kernel_size=3, padding=1)
            self.expand3x3_activation = nn.ReLU(inplace=True)

        def forward(self, x):
            x = self.squeeze_activation(self.squeeze(x))
            return torch.cat(
                [
                    self.expand1x1_activation(self.expand1x1(x)),
                    self.expand3x3_activation(self.expand3x3(x)),
                ],
                1,
            )

    class SqueezeNet(nn.Module):
        def __init__(self, num_classes=5, dropout=0.5):
            super().__init__()
            self.num_classes = num_classes
            self.features = nn.Sequential(
                nn.Conv2d(3, 16, kernel_size=3, stride=2),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
                Fire(16, 4, 8, 8),
                Fire(16, 4, 8, 8),
                nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
                Fire(16, 8, 12, 12),
            )
            final_conv = nn.Conv2d(24, self.num_classes, kernel_size=1)
            self.classifier = nn.Sequential(
                nn.Dropout(p=dropout),
                final_conv,
                nn.ReLU(inplace=True),
                nn.AdaptiveAvgPool2d((1, 1)),
            )
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    if m is final_conv:
                        init.normal_(m.weight, mean=0.0, std=0.01)
                    else:
                        init.kaiming_uniform_(m.weight)
                    if m.bias is not None:
                        init.constant_(m.bias, 0)

        def forward(self, x):
            x = self.features(x)
            x = self.classifier(x)
            return torch.flatten(x, 1)

    rng = np.random.default_rng(3)
    model = SqueezeNet()
    x = ctx.t(rng.standard_normal((3, 3, 35, 35)).astype(np.float32))
    y = ctx.t(rng.integers(0, 5, 3))
    ctx.init(model)
    model.eval()  # dropout off, compare deterministically
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    outs = []
    for _ in range(2):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        outs.append(loss)
    outs.append(model.features[3].squeeze.weight.grad)
    return outs


def efficientnet(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    Tensor = torch.Tensor

    def stochastic_depth(input: Tensor, p: float, mode: str, training: bool = True) -> Tensor:
        if p < 0.0 or p > 1.0:
            raise ValueError(f"drop probability has to be between 0 and 1, but got {p}")
        if mode not in ["batch", "row"]:
            raise ValueError(f"mode has to be either 'batch' or 'row', but got {mode}")
        if not training or p == 0.0:
            return input
        survival_rate = 1.0 - p
        if mode == "row":
            size = [input.shape[0]] + [1] * (input.ndim - 1)
        else:
            size = [1] * input.ndim
        noise = torch.empty(size, dtype=input.dtype, device=input.device)
        noise = noise.bernoulli_(survival_rate)
        if survival_rate > 0.0:
            noise.div_(survival_rate)
        return input * noise

    class StochasticDepth(nn.Module):
        def __init__(self, p: float, mode: str) -> None:
            super().__init__()
            self.p = p
            self.mode = mode

        def forward(self, input):
            return stochastic_depth(input, self.p, self.mode, self.training)

        def __repr__(self) -> str:
            return f"{self.__class__.__name__}(p={self.p}, mode={self.mode})"

    def _make_divisible(v, divisor, min_value=None):
        if min_value is None:
            min_value = divisor
        new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
        if new_v < 0.9 * v:
            new_v += divisor
        return new_v

    class Conv2dNormActivation(nn.Sequential):
        def __init__(
            self,
            in_channels,
            out_channels,
            kernel_size=3,
            stride=1,
            padding=None,
            groups=1,
            norm_layer=nn.BatchNorm2d,
            activation_layer=nn.ReLU,
            dilation=1,
            inplace=True,
            bias=None,
        ):
            if padding is None:
                padding = (kernel_size - 1) // 2 * dilation
            if bias is None:
                bias = norm_layer is None
            layers = [
                nn.Conv2d(
                    in_channels,
                    out_channels,
                    kernel_size,
                    stride,
                    padding,
                    dilation=dilation,
                    groups=groups,
                    bias=bias,
                )
            ]
            if norm_layer is not None:
                layers.append(norm_layer(out_channels))
            if activation_layer is not None:
                params = {} if inplace is None else {"inplace": inplace}
                layers.append(activation_layer(**params))
            super().__init__(*layers)
            self.out_channels = out_channels

    class SqueezeExcitation(nn.Module):
        def __init__(
            self, input_channels, squeeze_channels, activation=nn.ReLU, scale_activation=nn.Sigmoid
        ):
            super().__init__()
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
            self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
            self.activation = activation()
            self.scale_activation = scale_activation()

        def _scale(self, input):
            scale = self.avgpool(input)
            scale = self.fc1(scale)
            scale = self.activation(scale)
            scale = self.fc2(scale)
            return self.scale_activation(scale)

        def forward(self, input):
            scale = self._scale(input)
            return scale * input

    class MBConv(nn.Module):
        def __init__(self, cnf, stochastic_depth_prob, norm_layer, se_layer=SqueezeExcitation):
            super().__init__()
            expand_ratio, kernel, stride, input_channels, out_channels = cnf
            self.use_res_connect = stride == 1 and input_channels == out_channels
            layers = []
            activation_layer = nn.SiLU
            expanded_channels = _make_divisible(input_channels * expand_ratio, 8)
            if expanded_channels != input_channels:
                layers.append(
                    Conv2dNormActivation(
                        input_channels,
                        expanded_channels,
                        kernel_size=1,
                        norm_layer=norm_layer,
                        activation_layer=activation_layer,
                    )
                )
            layers.append(
                Conv2dNormActivation(
                    expanded_channels,
                    expanded_channels,
                    kernel_size=kernel,
                    stride=stride,
                    groups=expanded_channels,
                    norm_layer=norm_layer,
                    activation_layer=activation_layer,
                )
            )
            squeeze_channels = max(1, input_channels // 4)
            layers.append(
                se_layer(
                    expanded_channels, squeeze_channels, activation=partial(nn.SiLU, inplace=True)
                )
            )
            layers.append(
                Conv2dNormActivation(
                    expanded_channels,
                    out_channels,
                    kernel_size=1,
                    norm_layer=norm_layer,
                    activation_layer=None,
                )
            )
            self.block = nn.Sequential(*layers)
            self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
            self.out_channels = out_channels

        def forward(self, input):
            result = self.block(input)
            if self.use_res_connect:
                result = self.stochastic_depth(result)
                result += input
            return result

    class EfficientNet(nn.Module):
        def __init__(self, settings, dropout=0.2, stochastic_depth_prob=0.2, num_classes=5):
            super().__init__()
            norm_layer = partial(nn.BatchNorm2d, eps=1e-3, momentum=0.01)
            layers = []
            firstconv_output_channels = settings[0][3]
            layers.append(
                Conv2dNormActivation(
                    3,
                    firstconv_output_channels,
                    kernel_size=3,
                    stride=2,
                    norm_layer=norm_layer,
                    activation_layer=nn.SiLU,
                )
            )
            total_stage_blocks = len(settings)
            stage_block_id = 0
            for cnf in settings:
                sd_prob = stochastic_depth_prob * float(stage_block_id) / total_stage_blocks
                layers.append(nn.Sequential(MBConv(cnf, sd_prob, norm_layer)))
                stage_block_id += 1
            lastconv_input_channels = settings[-1][4]
            lastconv_output_channels = 4 * lastconv_input_channels
            layers.append(
                Conv2dNormActivation(
                    lastconv_input_channels,
                    lastconv_output_channels,
                    kernel_size=1,
                    norm_layer=norm_layer,
                    activation_layer=nn.SiLU,
                )
            )
            self.features = nn.Sequential(*layers)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(
                nn.Dropout(p=dropout, inplace=True),
                nn.Linear(lastconv_output_channels, num_classes),
            )
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out")
                    if m.bias is not None:
                        nn.init.zeros_(m.bias)
                elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                    nn.init.ones_(m.weight)
                    nn.init.zeros_(m.bias)
                elif isinstance(m, nn.Linear):
                    init_range = 1.0 / math.sqrt(m.out_features)
                    nn.init.uniform_(m.weight, -init_range, init_range)
                    nn.init.zeros_(m.bias)

        def forward(self, x):
            x = self.features(x)
            x = self.avgpool(x)
            x = torch.flatten(x, 1)
            x = self.classifier(x)
            return x

    rng = np.random.default_rng(4)
    settings = [(1, 3, 1, 8, 8), (6, 3, 2, 8, 12), (6, 5, 1, 12, 12)]
    model = EfficientNet(settings)
    x = ctx.t(rng.standard_normal((4, 3, 24, 24)).astype(np.float32))
    y = ctx.t(rng.integers(0, 5, 4))
    return [repr(model.features[3][0].stochastic_depth)] + _train(torch, ctx, model, x, y, steps=3)


def swin_v2_block(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def _get_relative_position_bias(
        relative_position_bias_table, relative_position_index, window_size
    ):
        N = window_size[0] * window_size[1]
        relative_position_bias = relative_position_bias_table[relative_position_index]
        relative_position_bias = relative_position_bias.view(N, N, -1)
        relative_position_bias = relative_position_bias.permute(2, 0, 1).contiguous().unsqueeze(0)
        return relative_position_bias

    def shifted_window_attention(
        input,
        qkv_weight,
        proj_weight,
        relative_position_bias,
        window_size,
        num_heads,
        shift_size,
        attention_dropout=0.0,
        dropout=0.0,
        qkv_bias=None,
        proj_bias=None,
        logit_scale=None,
        training=True,
    ):
        B, H, W, C = input.shape
        pad_r = (window_size[1] - W % window_size[1]) % window_size[1]
        pad_b = (window_size[0] - H % window_size[0]) % window_size[0]
        x = F.pad(input, (0, 0, 0, pad_r, 0, pad_b))
        _, pad_H, pad_W, _ = x.shape
        shift_size = shift_size.copy()
        if window_size[0] >= pad_H:
            shift_size[0] = 0
        if window_size[1] >= pad_W:
            shift_size[1] = 0
        if sum(shift_size) > 0:
            x = torch.roll(x, shifts=(-shift_size[0], -shift_size[1]), dims=(1, 2))
        num_windows = (pad_H // window_size[0]) * (pad_W // window_size[1])
        x = x.view(
            B, pad_H // window_size[0], window_size[0], pad_W // window_size[1], window_size[1], C
        )
        x = x.permute(0, 1, 3, 2, 4, 5).reshape(B * num_windows, window_size[0] * window_size[1], C)
        if logit_scale is not None and qkv_bias is not None:
            qkv_bias = qkv_bias.clone()
            length = qkv_bias.numel() // 3
            qkv_bias[length : 2 * length].zero_()
        qkv = F.linear(x, qkv_weight, qkv_bias)
        qkv = qkv.reshape(x.size(0), x.size(1), 3, num_heads, C // num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        if logit_scale is not None:
            attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
            logit_scale = torch.clamp(logit_scale, max=math.log(100.0)).exp()
            attn = attn * logit_scale
        else:
            q = q * (C // num_heads) ** -0.5
            attn = q.matmul(k.transpose(-2, -1))
        attn = attn + relative_position_bias
        if sum(shift_size) > 0:
            attn_mask = x.new_zeros((pad_H, pad_W))
            h_slices = (
                (0, -window_size[0]),
                (-window_size[0], -shift_size[0]),
                (-shift_size[0], None),
            )
            w_slices = (
                (0, -window_size[1]),
                (-window_size[1], -shift_size[1]),
                (-shift_size[1], None),
            )
            count = 0
            for h in h_slices:
                for w in w_slices:
                    attn_mask[h[0] : h[1], w[0] : w[1]] = count
                    count += 1
            attn_mask = attn_mask.view(
                pad_H // window_size[0], window_size[0], pad_W // window_size[1], window_size[1]
            )
            attn_mask = attn_mask.permute(0, 2, 1, 3).reshape(
                num_windows, window_size[0] * window_size[1]
            )
            attn_mask = attn_mask.unsqueeze(1) - attn_mask.unsqueeze(2)
            attn_mask = attn_mask.masked_fill(attn_mask != 0, (-100.0)).masked_fill(
                attn_mask == 0, 0.0
            )
            attn = attn.view(x.size(0) // num_windows, num_windows, num_heads, x.size(1), x.size(1))
            attn = attn + attn_mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, num_heads, x.size(1), x.size(1))
        attn = F.softmax(attn, dim=-1)
        attn = F.dropout(attn, p=attention_dropout, training=training)
        x = attn.matmul(v).transpose(1, 2).reshape(x.size(0), x.size(1), C)
        x = F.linear(x, proj_weight, proj_bias)
        x = F.dropout(x, p=dropout, training=training)
        x = x.view(
            B, pad_H // window_size[0], pad_W // window_size[1], window_size[0], window_size[1], C
        )
        x = x.permute(0, 1, 3, 2, 4, 5).reshape(B, pad_H, pad_W, C)
        if sum(shift_size) > 0:
            x = torch.roll(x, shifts=(shift_size[0], shift_size[1]), dims=(1, 2))
        x = x[:, :H, :W, :].contiguous()
        return x

    class ShiftedWindowAttentionV2(nn.Module):
        def __init__(self, dim, window_size, shift_size, num_heads, qkv_bias=True, proj_bias=True):
            super().__init__()
            self.window_size = window_size
            self.shift_size = shift_size
            self.num_heads = num_heads
            self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
            self.proj = nn.Linear(dim, dim, bias=proj_bias)
            self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((num_heads, 1, 1))))
            self.cpb_mlp = nn.Sequential(
                nn.Linear(2, 32, bias=True),
                nn.ReLU(inplace=True),
                nn.Linear(32, num_heads, bias=False),
            )
            if qkv_bias:
                length = self.qkv.bias.numel() // 3
                self.qkv.bias[length : 2 * length].data.zero_()
            relative_coords_h = torch.arange(
                -(self.window_size[0] - 1), self.window_size[0], dtype=torch.float32
            )
            relative_coords_w = torch.arange(
                -(self.window_size[1] - 1), self.window_size[1], dtype=torch.float32
            )
            relative_coords_table = torch.stack(
                torch.meshgrid([relative_coords_h, relative_coords_w], indexing="ij")
            )
            relative_coords_table = relative_coords_table.permute(1, 2, 0).contiguous().unsqueeze(0)
            relative_coords_table[:, :, :, 0] /= self.window_size[0] - 1
            relative_coords_table[:, :, :, 1] /= self.window_size[1] - 1
            relative_coords_table *= 8
            relative_coords_table = (
                torch.sign(relative_coords_table)
                * torch.log2(torch.abs(relative_coords_table) + 1.0)
                / 3.0
            )
            self.register_buffer("relative_coords_table", relative_coords_table)
            coords_h = torch.arange(self.window_size[0])
            coords_w = torch.arange(self.window_size[1])
            coords = torch.stack(torch.meshgrid(coords_h, coords_w, indexing="ij"))
            coords_flatten = torch.flatten(coords, 1)
            relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]
            relative_coords = relative_coords.permute(1, 2, 0).contiguous()
            relative_coords[:, :, 0] += self.window_size[0] - 1
            relative_coords[:, :, 1] += self.window_size[1] - 1
            relative_coords[:, :, 0] *= 2 * self.window_size[1] - 1
            relative_position_index = relative_coords.sum(-1).flatten()
            self.register_buffer("relative_position_index", relative_position_index)

        def get_relative_position_bias(self):
            relative_position_bias = _get_relative_position_bias(
                self.cpb_mlp(self.relative_coords_table).view(-1, self.num_heads),
                self.relative_position_index,
                self.window_size,
            )
            relative_position_bias = 16 * torch.sigmoid(relative_position_bias)
            return relative_position_bias

        def forward(self, x):
            relative_position_bias = self.get_relative_position_bias()
            return shifted_window_attention(
                x,
                self.qkv.weight,
                self.proj.weight,
                relative_position_bias,
                self.window_size,
                self.num_heads,
                shift_size=self.shift_size,
                qkv_bias=self.qkv.bias,
                proj_bias=self.proj.bias,
                logit_scale=self.logit_scale,
                training=self.training,
            )

    class SwinTransformerBlockV2(nn.Module):
        def __init__(self, dim, num_heads, window_size, shift_size):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim, eps=1e-5)
            self.attn = ShiftedWindowAttentionV2(dim, window_size, shift_size, num_heads)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(
                nn.Linear(dim, 4 * dim),
                nn.GELU(),
                nn.Dropout(0.0),
                nn.Linear(4 * dim, dim),
                nn.Dropout(0.0),
            )
            for m in self.mlp.modules():
                if isinstance(m, nn.Linear):
                    nn.init.xavier_uniform_(m.weight)
                    if m.bias is not None:
                        nn.init.normal_(m.bias, std=1e-6)

        def forward(self, x):
            x = x + self.norm1(self.attn(x))
            x = x + self.norm2(self.mlp(x))
            return x

    class PatchMergingV2(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
            self.norm = nn.LayerNorm(2 * dim)

        def forward(self, x):
            H, W, _ = x.shape[-3:]
            x = F.pad(x, (0, 0, 0, W % 2, 0, H % 2))
            x0 = x[..., 0::2, 0::2, :]
            x1 = x[..., 1::2, 0::2, :]
            x2 = x[..., 0::2, 1::2, :]
            x3 = x[..., 1::2, 1::2, :]
            x = torch.cat([x0, x1, x2, x3], -1)
            x = self.reduction(x)
            x = self.norm(x)
            return x

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Sequential(
                nn.Conv2d(3, 16, kernel_size=2, stride=2), torch.nn.modules.Module()
            )
            self.blocks = nn.Sequential(
                SwinTransformerBlockV2(16, 2, [4, 4], [0, 0]),
                SwinTransformerBlockV2(16, 2, [4, 4], [2, 2]),
            )
            self.merge = PatchMergingV2(16)
            self.head = nn.Linear(32, 3)

        def forward(self, x):
            x = self.embed[0](x).permute(0, 2, 3, 1)
            x = self.blocks(x)
            x = self.merge(x)
            x = x.permute(0, 3, 1, 2)
            x = F.adaptive_avg_pool2d(x, 1).flatten(1)
            return self.head(x)

    rng = np.random.default_rng(5)
    model = Net()
    x = ctx.t(rng.standard_normal((2, 3, 22, 18)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    outs = _train(torch, ctx, model, x, y, steps=2, opt=opt)
    outs.append(model.blocks[1].attn.logit_scale.grad)
    outs.append(model.blocks[1].attn.cpb_mlp[0].weight.grad)
    return outs


def torchvision_vit(torch, ctx):
    nn = torch.nn

    class MLPBlock(nn.Sequential):
        _version = 2

        def __init__(self, in_dim, mlp_dim, dropout):
            super().__init__(
                nn.Linear(in_dim, mlp_dim),
                nn.GELU(),
                nn.Dropout(dropout),
                nn.Linear(mlp_dim, in_dim),
                nn.Dropout(dropout),
            )
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    nn.init.xavier_uniform_(m.weight)
                    if m.bias is not None:
                        nn.init.normal_(m.bias, std=1e-6)

    class EncoderBlock(nn.Module):
        def __init__(
            self,
            num_heads,
            hidden_dim,
            mlp_dim,
            dropout,
            attention_dropout,
            norm_layer=partial(nn.LayerNorm, eps=1e-6),
        ):
            super().__init__()
            self.num_heads = num_heads
            self.ln_1 = norm_layer(hidden_dim)
            self.self_attention = nn.MultiheadAttention(
                hidden_dim, num_heads, dropout=attention_dropout, batch_first=True
            )
            self.dropout = nn.Dropout(dropout)
            self.ln_2 = norm_layer(hidden_dim)
            self.mlp = MLPBlock(hidden_dim, mlp_dim, dropout)

        def forward(self, input):
            torch._assert(
                input.dim() == 3, f"Expected (batch_size, seq_length, hidden_dim) got {input.shape}"
            )
            x = self.ln_1(input)
            x, _ = self.self_attention(x, x, x, need_weights=False)
            x = self.dropout(x)
            x = x + input
            y = self.ln_2(x)
            y = self.mlp(y)
            return x + y

    class Encoder(nn.Module):
        def __init__(
            self,
            seq_length,
            num_layers,
            num_heads,
            hidden_dim,
            mlp_dim,
            dropout,
            attention_dropout,
            norm_layer=partial(nn.LayerNorm, eps=1e-6),
        ):
            super().__init__()
            self.pos_embedding = nn.Parameter(
                torch.empty(1, seq_length, hidden_dim).normal_(std=0.02)
            )
            self.dropout = nn.Dropout(dropout)
            layers = OrderedDict()
            for i in range(num_layers):
                layers[f"encoder_layer_{i}"] = EncoderBlock(
                    num_heads, hidden_dim, mlp_dim, dropout, attention_dropout, norm_layer
                )
            self.layers = nn.Sequential(layers)
            self.ln = norm_layer(hidden_dim)

        def forward(self, input):
            input = input + self.pos_embedding
            return self.ln(self.layers(self.dropout(input)))

    class VisionTransformer(nn.Module):
        def __init__(
            self,
            image_size=16,
            patch_size=4,
            num_layers=2,
            num_heads=2,
            hidden_dim=16,
            mlp_dim=32,
            num_classes=4,
        ):
            super().__init__()
            self.image_size, self.patch_size, self.hidden_dim = image_size, patch_size, hidden_dim
            self.conv_proj = nn.Conv2d(
                in_channels=3, out_channels=hidden_dim, kernel_size=patch_size, stride=patch_size
            )
            seq_length = (image_size // patch_size) ** 2
            self.class_token = nn.Parameter(torch.zeros(1, 1, hidden_dim))
            seq_length += 1
            self.encoder = Encoder(seq_length, num_layers, num_heads, hidden_dim, mlp_dim, 0.0, 0.0)
            self.seq_length = seq_length
            heads_layers = OrderedDict()
            heads_layers["pre_logits"] = nn.Linear(hidden_dim, 24)
            heads_layers["act"] = nn.Tanh()
            heads_layers["head"] = nn.Linear(24, num_classes)
            self.heads = nn.Sequential(heads_layers)
            fan_in = (
                self.conv_proj.in_channels
                * self.conv_proj.kernel_size[0]
                * self.conv_proj.kernel_size[1]
            )
            nn.init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in))
            if self.conv_proj.bias is not None:
                nn.init.zeros_(self.conv_proj.bias)
            fan_in = self.heads.pre_logits.in_features
            nn.init.trunc_normal_(self.heads.pre_logits.weight, std=math.sqrt(1 / fan_in))
            nn.init.zeros_(self.heads.pre_logits.bias)

        def _process_input(self, x):
            n, c, h, w = x.shape
            p = self.patch_size
            torch._assert(
                h == self.image_size, f"Wrong image height! Expected {self.image_size} but got {h}!"
            )
            n_h = h // p
            n_w = w // p
            x = self.conv_proj(x)
            x = x.reshape(n, self.hidden_dim, n_h * n_w)
            x = x.permute(0, 2, 1)
            return x

        def forward(self, x):
            x = self._process_input(x)
            n = x.shape[0]
            batch_class_token = self.class_token.expand(n, -1, -1)
            x = torch.cat([batch_class_token, x], dim=1)
            x = self.encoder(x)
            x = x[:, 0]
            x = self.heads(x)
            return x

    rng = np.random.default_rng(6)
    model = VisionTransformer()
    x = ctx.t(rng.standard_normal((3, 3, 16, 16)).astype(np.float32))
    y = ctx.t(rng.integers(0, 4, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    outs = _train(torch, ctx, model, x, y, opt=opt)
    try:
        model._process_input(ctx.t(np.zeros((1, 3, 12, 16), np.float32)))
    except AssertionError as e:
        outs.append(str(e))
    return outs


def vgg_bn(torch, ctx):
    nn = torch.nn
    cfg = [8, "M", 16, 16, "M", 32]

    def make_layers(cfg, batch_norm=False):
        layers = []
        in_channels = 3
        for v in cfg:
            if v == "M":
                layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
            else:
                conv2d = nn.Conv2d(in_channels, v, kernel_size=3, padding=1)
                if batch_norm:
                    layers += [conv2d, nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
                else:
                    layers += [conv2d, nn.ReLU(inplace=True)]
                in_channels = v
        return nn.Sequential(*layers)

    class VGG(nn.Module):
        def __init__(self, features, num_classes=5, init_weights=True, dropout=0.5):
            super().__init__()
            self.features = features
            self.avgpool = nn.AdaptiveAvgPool2d((3, 3))
            self.classifier = nn.Sequential(
                nn.Linear(32 * 3 * 3, 40),
                nn.ReLU(True),
                nn.Dropout(p=dropout),
                nn.Linear(40, 40),
                nn.ReLU(True),
                nn.Dropout(p=dropout),
                nn.Linear(40, num_classes),
            )
            if init_weights:
                for m in self.modules():
                    if isinstance(m, nn.Conv2d):
                        nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                        if m.bias is not None:
                            nn.init.constant_(m.bias, 0)
                    elif isinstance(m, nn.BatchNorm2d):
                        nn.init.constant_(m.weight, 1)
                        nn.init.constant_(m.bias, 0)
                    elif isinstance(m, nn.Linear):
                        nn.init.normal_(m.weight, 0, 0.01)
                        nn.init.constant_(m.bias, 0)

        def forward(self, x):
            x = self.features(x)
            x = self.avgpool(x)
            x = torch.flatten(x, 1)
            x = self.classifier(x)
            return x

    rng = np.random.default_rng(7)
    model = VGG(make_layers(cfg, batch_norm=True))
    x = ctx.t(rng.standard_normal((4, 3, 20, 20)).astype(np.float32))
    y = ctx.t(rng.integers(0, 5, 4))
    model.classifier[2].p = 0.0
    model.classifier[5].p = 0.0
    outs = _train(torch, ctx, model, x, y, steps=3)
    outs.append(str(model.classifier))
    return outs


def regnet(torch, ctx):
    nn = torch.nn

    class SimpleStemIN(nn.Sequential):
        def __init__(self, width_in, width_out, norm_layer, activation_layer):
            super().__init__(
                nn.Conv2d(width_in, width_out, 3, 2, 1, bias=False),
                norm_layer(width_out),
                activation_layer(inplace=True),
            )

    class BottleneckTransform(nn.Sequential):
        def __init__(
            self,
            width_in,
            width_out,
            stride,
            norm_layer,
            activation_layer,
            group_width,
            bottleneck_multiplier,
            se_ratio,
        ):
            layers = OrderedDict()
            w_b = int(round(width_out * bottleneck_multiplier))
            g = w_b // group_width
            layers["a"] = nn.Sequential(
                nn.Conv2d(width_in, w_b, 1, bias=False),
                norm_layer(w_b),
                activation_layer(inplace=True),
            )
            layers["b"] = nn.Sequential(
                nn.Conv2d(w_b, w_b, 3, stride, 1, groups=g, bias=False),
                norm_layer(w_b),
                activation_layer(inplace=True),
            )
            layers["c"] = nn.Sequential(
                nn.Conv2d(w_b, width_out, 1, bias=False), norm_layer(width_out)
            )
            super().__init__(layers)

    class ResBottleneckBlock(nn.Module):
        def __init__(
            self,
            width_in,
            width_out,
            stride,
            norm_layer,
            activation_layer,
            group_width=1,
            bottleneck_multiplier=1.0,
            se_ratio=None,
        ):
            super().__init__()
            self.proj = None
            should_proj = (width_in != width_out) or (stride != 1)
            if should_proj:
                self.proj = nn.Sequential(
                    nn.Conv2d(width_in, width_out, 1, stride, bias=False), norm_layer(width_out)
                )
            self.f = BottleneckTransform(
                width_in,
                width_out,
                stride,
                norm_layer,
                activation_layer,
                group_width,
                bottleneck_multiplier,
                se_ratio,
            )
            self.activation = activation_layer(inplace=True)

        def forward(self, x):
            if self.proj is not None:
                x = self.proj(x) + self.f(x)
            else:
                x = x + self.f(x)
            return self.activation(x)

    class RegNet(nn.Module):
        def __init__(self, num_classes=3):
            super().__init__()
            norm_layer = partial(nn.BatchNorm2d, eps=1e-05, momentum=0.1)
            self.stem = SimpleStemIN(3, 8, norm_layer, nn.ReLU)
            blocks = []
            current_width = 8
            for i, (width_out, stride, depth, group_width) in enumerate(
                [(16, 2, 2, 4), (24, 2, 1, 8)]
            ):
                stage = nn.Sequential(
                    OrderedDict(
                        (
                            f"block{i + 1}-{j}",
                            ResBottleneckBlock(
                                current_width if j == 0 else width_out,
                                width_out,
                                stride if j == 0 else 1,
                                norm_layer,
                                nn.ReLU,
                                group_width,
                            ),
                        )
                        for j in range(depth)
                    )
                )
                blocks.append((f"block{i + 1}", stage))
                current_width = width_out
            self.trunk_output = nn.Sequential(OrderedDict(blocks))
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(in_features=current_width, out_features=num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                    nn.init.normal_(m.weight, mean=0.0, std=math.sqrt(2.0 / fan_out))
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.ones_(m.weight)
                    nn.init.zeros_(m.bias)
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, mean=0.0, std=0.01)
                    nn.init.zeros_(m.bias)

        def forward(self, x):
            x = self.stem(x)
            x = self.trunk_output(x)
            x = self.avgpool(x)
            x = x.flatten(start_dim=1)
            x = self.fc(x)
            return x

    rng = np.random.default_rng(8)
    model = RegNet()
    x = ctx.t(rng.standard_normal((4, 3, 16, 16)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, 4))
    outs = _train(torch, ctx, model, x, y)
    outs.append(list(dict(model.trunk_output.named_children()).keys()))
    outs.append([n for n, _ in model.trunk_output.block1.named_children()])
    return outs


PROGRAMS = [
    densenet,
    googlenet,
    shufflenet,
    squeezenet,
    efficientnet,
    swin_v2_block,
    torchvision_vit,
    vgg_bn,
    regnet,
]
CAPTURED = [efficientnet, torchvision_vit, regnet]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
