"""PyTorch's names of the tape's nodes (``y.grad_fn.name()``, ``type(y.grad_fn).__name__``)
for ~150 calls, table-driven against PyTorch 2.13: the overloads PyTorch tells apart (pow of a
number exponent, a tensor one, a number base; sum and prod over dims; split with sizes),
composite calls with one node of PyTorch's (unfold, as_strided, clamp with tensor bounds) and
``2 / x``, PyTorch's ``x.reciprocal() * 2``.

Left out, with the reason: ``remainder(3.0, x)`` (PyTorch has no gradient formula, its node is
NotImplemented), ``einsum`` (PyTorch's last node depends on how it contracts the equation), and
``linear`` of a 3-d input with a strided bias (PyTorch's AddBackward0 there, its fused
addmm's ViewBackward0 for a contiguous one)."""

import pytest

import ember

torch = pytest.importorskip("torch")


def _cases(torch):
    F = torch.nn.functional
    torch.manual_seed(0)
    x = torch.randn(3, 4, requires_grad=True)
    b3 = torch.randn(2, 3, 4, requires_grad=True)
    img = torch.randn(1, 2, 5, 5, requires_grad=True)
    idx = torch.tensor([0, 2])
    return {
        "pow_s": lambda: x**2,
        "pow_t": lambda: x**x,
        "pow_base": lambda: 2**x,
        "pow_fn_s": lambda: torch.pow(x, 2.5),
        "rem_s": lambda: x % 2,
        "rem_t": lambda: torch.remainder(x, x + 5),
        "fmod_s": lambda: torch.fmod(x, 2),
        "sum": lambda: x.sum(),
        "sum_dim": lambda: x.sum(1),
        "sum_dimk": lambda: x.sum(dim=(0, 1)),
        "split_sizes": lambda: x.split([1, 3], 1)[0],
        "split": lambda: x.split(2, 1)[0],
        "chunk": lambda: x.chunk(2)[0],
        "unbind": lambda: x.unbind()[0],
        "mean": lambda: x.mean(),
        "mean_dim": lambda: x.mean(1),
        "max": lambda: x.max(),
        "max_dim": lambda: x.max(1)[0],
        "min_dim": lambda: x.min(1).values,
        "amax": lambda: x.amax(1),
        "maximum": lambda: torch.maximum(x, x),
        "argsort_sort": lambda: x.sort(1)[0],
        "topk": lambda: x.topk(2)[0],
        "index_sel": lambda: x.index_select(0, idx),
        "getitem_int": lambda: x[0],
        "getitem_slice": lambda: x[1:],
        "getitem_idx": lambda: x[idx],
        "getitem_mask": lambda: x[x > 0],
        "gather": lambda: x.gather(1, torch.zeros(3, 1, dtype=torch.long)),
        "narrow": lambda: x.narrow(1, 0, 2),
        "select": lambda: x.select(1, 0),
        "cat": lambda: torch.cat([x, x]),
        "stack": lambda: torch.stack([x, x]),
        "view": lambda: x.view(12),
        "reshape": lambda: x.reshape(12),
        "reshape_t": lambda: x.t().reshape(12),
        "flatten": lambda: x.flatten(),
        "expand": lambda: x[:, None].expand(3, 2, 4),
        "expand_as": lambda: x.expand_as(b3),
        "permute": lambda: b3.permute(2, 0, 1),
        "transpose": lambda: x.transpose(0, 1),
        "t": lambda: x.t(),
        "mT": lambda: x.mT,
        "squeeze": lambda: x[None].squeeze(),
        "squeeze_d": lambda: x[None].squeeze(0),
        "unsqueeze": lambda: x.unsqueeze(0),
        "clone": lambda: x.clone(),
        "contig": lambda: x.t().contiguous(),
        "to_dtype": lambda: x.to(torch.float64),
        "double": lambda: x.double(),
        "type_as": lambda: x.type_as(torch.zeros(1, dtype=torch.float16)),
        "mm": lambda: x @ x.t(),
        "matmul_3d": lambda: b3 @ x.t(),
        "bmm": lambda: torch.bmm(b3, b3.transpose(1, 2)),
        "mv": lambda: x @ x[0],
        "dot": lambda: x[0] @ x[0],
        "linear": lambda: F.linear(x, x),
        "linear_nob": lambda: F.linear(x, x[:2]),
        "linear3d": lambda: F.linear(b3, x, x[:, 0].contiguous()),
        "Linear": lambda: torch.nn.Linear(4, 2)(x),
        "softmax": lambda: x.softmax(1),
        "log_softmax": lambda: F.log_softmax(x, 1),
        "relu": lambda: F.relu(x),
        "gelu": lambda: F.gelu(x),
        "silu": lambda: F.silu(x),
        "tanh": lambda: x.tanh(),
        "sigmoid": lambda: x.sigmoid(),
        "leaky": lambda: F.leaky_relu(x),
        "elu": lambda: F.elu(x),
        "hardtanh": lambda: F.hardtanh(x),
        "relu6": lambda: F.relu6(x),
        "softplus": lambda: F.softplus(x),
        "conv": lambda: F.conv2d(img, torch.randn(3, 2, 3, 3)),
        "conv1d": lambda: F.conv1d(b3, torch.randn(2, 3, 2)),
        "layer_norm": lambda: F.layer_norm(x, (4,)),
        "group_norm": lambda: F.group_norm(img, 2),
        "batch_norm": lambda: F.batch_norm(img, None, None, training=True),
        "dropout": lambda: F.dropout(x, 0.5),
        "dropout_eval": lambda: F.dropout(x, 0.5, training=False),
        "Dropout": lambda: torch.nn.Dropout()(x),
        "embedding": lambda: F.embedding(idx, x),
        "cross_entropy": lambda: F.cross_entropy(x, torch.tensor([0, 1, 2])),
        "mse": lambda: F.mse_loss(x, x.detach()),
        "l1": lambda: F.l1_loss(x, x.detach()),
        "bce_logits": lambda: F.binary_cross_entropy_with_logits(x, x.detach().sigmoid()),
        "nll": lambda: F.nll_loss(x, torch.tensor([0, 1, 2])),
        "abs": lambda: x.abs(),
        "neg": lambda: -x,
        "sub": lambda: x - 1,
        "rsub": lambda: 1 - x,
        "div_s": lambda: x / 2,
        "rdiv": lambda: 2 / x,
        "rdiv_3": lambda: 3.5 / x,
        "pow_0d": lambda: x ** torch.tensor(2.0),
        "rpow_int": lambda: 3**x,
        "add_s": lambda: x + 1,
        "mul_s": lambda: x * 2,
        "clamp": lambda: x.clamp(0, 1),
        "clamp_min": lambda: x.clamp(min=0),
        "clamp_t": lambda: x.clamp(min=x.detach()),
        "where": lambda: torch.where(x > 0, x, 0.0),
        "masked_fill": lambda: x.masked_fill(x > 0, 0.0),
        "cumsum": lambda: x.cumsum(1),
        "prod": lambda: x.prod(),
        "prod_dim": lambda: x.prod(1),
        "norm": lambda: x.norm(),
        "norm_dim": lambda: x.norm(dim=1),
        "vnorm": lambda: torch.linalg.vector_norm(x),
        "var": lambda: x.var(),
        "var_dim": lambda: x.var(1),
        "std": lambda: x.std(1),
        "logsumexp": lambda: x.logsumexp(1),
        "sqrt": lambda: x.abs().sqrt(),
        "rsqrt": lambda: x.abs().rsqrt(),
        "max_pool": lambda: F.max_pool2d(img, 2),
        "avg_pool": lambda: F.avg_pool2d(img, 2),
        "adaptive": lambda: F.adaptive_avg_pool2d(img, 1),
        "interp": lambda: F.interpolate(img, scale_factor=2),
        "interp_bl": lambda: F.interpolate(img, scale_factor=2, mode="bilinear"),
        "pad": lambda: F.pad(x, (1, 1)),
        "pad_reflect": lambda: F.pad(img, (1, 1, 1, 1), mode="reflect"),
        "repeat": lambda: x.repeat(2, 1),
        "flip": lambda: x.flip(0),
        "roll": lambda: x.roll(1),
        "tril": lambda: x.tril(),
        "diag": lambda: x.diagonal(),
        "trace": lambda: x[:3, :3].trace(),
        "outer": lambda: torch.outer(x[0], x[0]),
        "addmm": lambda: torch.addmm(x[:, :3], x, x.t()),
        "baddbmm": lambda: torch.baddbmm(b3[:, :, :3], b3, b3.transpose(1, 2)),
        "lerp": lambda: x.lerp(x.detach(), 0.5),
        "addcmul": lambda: x.addcmul(x, x),
        "square": lambda: x.square(),
        "exp2": lambda: x.exp2(),
        "erf": lambda: x.erf(),
        "atan2": lambda: torch.atan2(x, x),
        "hypot": lambda: torch.hypot(x, x),
        "unfold": lambda: x.unfold(1, 2, 1),
        "movedim": lambda: b3.movedim(0, 2),
        "view_as": lambda: x.view_as(x),
        "as_strided": lambda: x.as_strided((2, 2), (1, 1)),
        "real": lambda: x.real,
        "sum_to": lambda: x.sum_to_size(1, 4),
        "flatten_2": lambda: img.flatten(1),
        "log_sigmoid": lambda: F.logsigmoid(x),
        "prelu": lambda: F.prelu(x, torch.tensor([0.2])),
        "glu": lambda: F.glu(x),
        "normalize": lambda: F.normalize(x),
        "cos_sim": lambda: F.cosine_similarity(x, x),
        "pixel_shuffle": lambda: F.pixel_shuffle(torch.randn(1, 4, 2, 2, requires_grad=True), 2),
        "scaled_dot": lambda: F.scaled_dot_product_attention(b3, b3, b3),
        "mha_softmax": lambda: torch.softmax(b3, -1),
        "triu": lambda: x.triu(),
        "index_add": lambda: x.index_add(0, idx, x[:2]),
        "scatter": lambda: x.scatter(0, torch.zeros(1, 4, dtype=torch.long), x[:1]),
        "scatter_add": lambda: x.scatter_add(0, torch.zeros(1, 4, dtype=torch.long), x[:1]),
        "masked_select": lambda: x.masked_select(x > 0),
        "nonzero_idx": lambda: x[x.detach() > 0],
        "index_put": lambda: x.index_put((idx,), x[:2]),
        "take": lambda: x.take(idx),
    }


NAMES = list(_cases(torch))


@pytest.fixture(scope="module")
def both():
    return _cases(torch), _cases(ember)


@pytest.mark.parametrize("name", NAMES)
def test_grad_fn_name_as_pytorch(both, name):
    expected, got = both[0][name](), both[1][name]()
    assert type(got.grad_fn).__name__ == type(expected.grad_fn).__name__
    if expected.grad_fn is not None:  # (dropout in eval mode, x.real: x itself, a leaf)
        assert got.grad_fn.name() == expected.grad_fn.name()
