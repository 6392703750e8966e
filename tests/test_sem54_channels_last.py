"""Eager results' memory format against PyTorch 2.13 for channels-last operands
(ops/_memory_format.py `result_format`, the ops' ``layout`` rules, the leaves' gradient layout):
whether each result is row-major and whether it is channels-last, and its values."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _cases(lib):
    F = lib.nn.functional
    cl = lib.channels_last
    rng = np.random.default_rng(0)

    def t(*shape, last=False):
        out = lib.tensor(rng.standard_normal(shape).astype(np.float32))
        return out.to(memory_format=cl) if last else out

    x, c = t(2, 3, 5, 5, last=True), t(2, 3, 5, 5)
    w, w1, wd, wt = t(4, 3, 3, 3), t(4, 3, 1, 1), t(3, 1, 3, 3), t(3, 4, 3, 3)
    w_last = t(4, 3, 3, 3, last=True)
    mean, var = lib.zeros(3), lib.ones(3)
    row, chan = t(5), t(1, 3, 1, 1, last=True)
    return {
        "conv2d": lambda: F.conv2d(x, w),
        "conv2d_weight_last": lambda: F.conv2d(c, w_last),
        "conv2d_1x1": lambda: F.conv2d(x, w1),
        "conv2d_depthwise": lambda: F.conv2d(x, wd, groups=3),
        "conv_transpose2d": lambda: F.conv_transpose2d(x, wt),
        "batch_norm_eval": lambda: F.batch_norm(x, mean, var),
        "batch_norm_train": lambda: F.batch_norm(x, None, None, training=True),
        "group_norm": lambda: F.group_norm(x, 3),
        "max_pool2d": lambda: F.max_pool2d(x, 2),
        "avg_pool2d": lambda: F.avg_pool2d(x, 2),
        "adaptive_max_pool2d": lambda: F.adaptive_max_pool2d(x, 2),
        "adaptive_avg_pool2d": lambda: F.adaptive_avg_pool2d(x, 2),
        "interpolate_nearest": lambda: F.interpolate(x, scale_factor=2),
        "interpolate_bilinear": lambda: F.interpolate(x, size=(7, 7), mode="bilinear"),
        "pad_constant": lambda: F.pad(x, (1, 1, 1, 1)),
        "pad_reflect": lambda: F.pad(x, (1, 1, 1, 1), mode="reflect"),
        "relu": lambda: F.relu(x),
        "sigmoid": lambda: lib.sigmoid(x),
        "gelu": lambda: F.gelu(x),
        "hardswish": lambda: F.hardswish(x),
        "add_last_first": lambda: x + c,
        "add_last_second": lambda: c + x,
        "add_number": lambda: 1 + x,
        "add_row": lambda: x + row,
        "add_channel_parameter": lambda: c + chan,
        "mul_broadcast_first": lambda: c * x[:1],
        "where": lambda: lib.where(c > 0, c, x),
        "clamp": lambda: x.clamp(0, 1),
        "double": lambda: x.double(),
        "dropout_eval": lambda: F.dropout(x, 0.5, training=False),
        "softmax": lambda: x.softmax(1),
        "layer_norm": lambda: F.layer_norm(x, (5,)),
        "flatten": lambda: x.flatten(1),
        "sum_keepdim": lambda: x.sum(1, keepdim=True),
    }


NAMES = list(_cases(torch))


@pytest.mark.parametrize("name", NAMES)
def test_result_memory_format_as_pytorch(name):
    want = _cases(torch)[name]()
    got = _cases(ember)[name]()
    for fmt_t, fmt_e in [
        (torch.contiguous_format, ember.contiguous_format),
        (torch.channels_last, ember.channels_last),
    ]:
        assert got.is_contiguous(memory_format=fmt_e) == want.is_contiguous(memory_format=fmt_t)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5)


def _model_grads(lib):
    cl = lib.channels_last
    lib.manual_seed(0)
    m = lib.nn.Sequential(
        lib.nn.Conv2d(3, 8, 3, padding=1),
        lib.nn.BatchNorm2d(8),
        lib.nn.ReLU(),
        lib.nn.MaxPool2d(2),
        lib.nn.Conv2d(8, 4, 1),
    ).to(memory_format=cl)
    x = lib.tensor(np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32))
    x = x.to(memory_format=cl).requires_grad_()
    out = m(x)
    out.sum().backward()
    grads = [p.grad for p in m.parameters() if p.dim() == 4]
    return [out, x.grad, *grads]


def test_channels_last_model_outputs_and_gradients_as_pytorch():
    for want, got in zip(_model_grads(torch), _model_grads(ember)):
        assert got.is_contiguous() == want.is_contiguous()
        assert got.is_contiguous(memory_format=ember.channels_last) == want.is_contiguous(
            memory_format=torch.channels_last
        )


def test_leaf_gradient_takes_the_leaf_layout():
    for lib in (torch, ember):
        x = lib.randn(3, 4, requires_grad=True)
        (x.t() @ lib.randn(3, 2)).sum().backward()
        assert x.grad.is_contiguous()
        y = lib.randn(2, 3, 4, 4).to(memory_format=lib.channels_last).requires_grad_()
        (y * 2).sum().backward()
        assert y.grad.is_contiguous(memory_format=lib.channels_last)
