"""JAX twins of the model zoo (ember/zoo.py) for benchmarks/zoo.py's ``jax`` column.

JAX has no module system of its own, so each zoo model is written here again as a pure function
of a flat dict of arrays keyed by the PyTorch/ember ``state_dict`` names: the twin starts from
ember's initial weights (``JaxTwin(name, ember_model)``), and benchmarks/zoo.py checks its first
result against ember eager's before timing it, as it does for every other column.

* training: one ``jax.jit`` function does the forward pass, cross-entropy, ``jax.grad`` and the
  spec's optimizer update (SGD with momentum, or AdamW with PyTorch's defaults and update rule),
  and returns the new parameters, running statistics and optimizer state (functional updates:
  the inputs' buffers are donated, so XLA may update them in place as PyTorch does);
* inference: ``jax.jit`` of the forward pass in eval mode (BatchNorm on its running statistics).

Written for every zoo model; ``SUPPORTED`` lists them. Imported only by benchmarks/zoo.py, and
only when JAX is installed (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ember import zoo

SUPPORTED = (
    "mlp", "cnn", "resnet18", "mobilenet_v2", "unet", "lstm", "gru", "gpt", "transformer", "vit",
)  # fmt: skip
BN_EPS, BN_MOMENTUM, LN_EPS = 1e-5, 0.1, 1e-5


class _Ctx:
    """One forward pass: the parameters ``p`` and buffers ``s`` (dicts of arrays by state_dict
    name), train or eval mode, and the buffers' new values (BatchNorm's running statistics)."""

    def __init__(self, p, s, train: bool):
        self.p, self.s, self.train = p, s, train
        self.updates: dict = {}

    # ---- layers, each reading its parameters under ``prefix``
    def linear(self, prefix, x):
        y = x @ self.p[f"{prefix}weight"].T
        bias = self.p.get(f"{prefix}bias")
        return y if bias is None else y + bias

    def conv(self, prefix, x, stride=1, padding=0, groups=1):
        w = self.p[f"{prefix}weight"]
        y = lax.conv_general_dilated(
            x, w, (stride, stride), [(padding, padding)] * 2,
            dimension_numbers=("NCHW", "OIHW", "NCHW"), feature_group_count=groups,
        )  # fmt: skip
        bias = self.p.get(f"{prefix}bias")
        return y if bias is None else y + bias[None, :, None, None]

    def conv_transpose(self, prefix, x, stride):
        """ConvTranspose2d with kernel size == stride (no overlap, no padding): each input
        pixel scatters a k x k block."""
        w = self.p[f"{prefix}weight"]  # (in, out, k, k)
        b, _, h, wd = x.shape
        k = w.shape[2]
        assert k == stride, "the zoo's transposed convolution has kernel == stride"
        y = jnp.einsum("bihw,iokl->bohkwl", x, w).reshape(b, w.shape[1], h * k, wd * k)
        return y + self.p[f"{prefix}bias"][None, :, None, None]

    def batch_norm(self, prefix, x):
        axes = (0, 2, 3)
        gamma, beta = self.p[f"{prefix}weight"], self.p[f"{prefix}bias"]
        mean_key, var_key = f"{prefix}running_mean", f"{prefix}running_var"
        if self.train:
            mean = x.mean(axis=axes)
            var = x.var(axis=axes)
            n = x.size // x.shape[1]
            self.updates[mean_key] = (1 - BN_MOMENTUM) * self.s[mean_key] + BN_MOMENTUM * mean
            self.updates[var_key] = (1 - BN_MOMENTUM) * self.s[var_key] + BN_MOMENTUM * var * (
                n / (n - 1)
            )
            count = f"{prefix}num_batches_tracked"
            self.updates[count] = self.s[count] + 1
        else:
            mean, var = self.s[mean_key], self.s[var_key]
        scale = gamma * lax.rsqrt(var + BN_EPS)
        return x * scale[None, :, None, None] + (beta - mean * scale)[None, :, None, None]

    def layer_norm(self, prefix, x):
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        y = (x - mean) * lax.rsqrt(var + LN_EPS)
        return y * self.p[f"{prefix}weight"] + self.p[f"{prefix}bias"]

    def conv_bn(self, prefix, x, stride=1, groups=1, act=None):
        k = self.p[f"{prefix}0.weight"].shape[-1]
        y = self.batch_norm(f"{prefix}1.", self.conv(f"{prefix}0.", x, stride, k // 2, groups))
        return y if act is None else act(y)

    def attention(self, prefix, x, heads, causal=False, packed=True):
        """Multi-head self-attention: nn.MultiheadAttention's packed in-projection
        (``in_proj_weight``) and ``out_proj``, or the GPT block's ``qkv`` and ``proj``."""
        b, t, d = x.shape
        if packed:
            qkv = x @ self.p[f"{prefix}in_proj_weight"].T + self.p[f"{prefix}in_proj_bias"]
        else:
            qkv = self.linear(f"{prefix}qkv.", x)
        qkv = qkv.reshape(b, t, 3, heads, d // heads).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(d // heads)
        if causal:
            scores = jnp.where(jnp.tril(jnp.ones((t, t), bool)), scores, -jnp.inf)
        out = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
        return self.linear(f"{prefix}out_proj." if packed else f"{prefix}proj.", out)


def _relu6(x):
    return jnp.clip(x, 0.0, 6.0)


def _gelu(x):
    return jax.nn.gelu(x, approximate=False)


def _max_pool2(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def _bilinear_x2(x):
    """F.interpolate(scale_factor=2, mode="bilinear", align_corners=False): half-pixel centres,
    edge-clamped (jax.image.resize's "linear" without antialiasing, which only matters when
    shrinking)."""
    b, c, h, w = x.shape
    return jax.image.resize(x, (b, c, 2 * h, 2 * w), "linear", antialias=False)


# ----------------------------------------------------------------------------- the models


def _encoder_layer(c, prefix, x, heads, norm_first, act):
    """nn.TransformerEncoderLayer (batch_first, dropout 0)."""

    def ff(y):
        return c.linear(f"{prefix}linear2.", act(c.linear(f"{prefix}linear1.", y)))

    def sa(y):
        return c.attention(f"{prefix}self_attn.", y, heads)

    if norm_first:
        x = x + sa(c.layer_norm(f"{prefix}norm1.", x))
        return x + ff(c.layer_norm(f"{prefix}norm2.", x))
    x = c.layer_norm(f"{prefix}norm1.", x + sa(x))
    return c.layer_norm(f"{prefix}norm2.", x + ff(x))


def _recurrent(c, x, cell: str):
    """nn.LSTM / nn.GRU, 2 layers, batch_first, zero initial states: ``lax.scan`` over time."""
    hidden = c.p["rnn.weight_hh_l0"].shape[1]
    h = x.transpose(1, 0, 2)  # (T, B, features)
    for layer in range(2):
        w_ih, w_hh = c.p[f"rnn.weight_ih_l{layer}"], c.p[f"rnn.weight_hh_l{layer}"]
        b_ih, b_hh = c.p[f"rnn.bias_ih_l{layer}"], c.p[f"rnn.bias_hh_l{layer}"]
        projected = h @ w_ih.T + b_ih  # every step's input projection in one product
        zeros = jnp.zeros((h.shape[1], hidden), h.dtype)
        if cell == "lstm":

            def step(carry, xp, w_hh=w_hh, b_hh=b_hh):
                hp, cp = carry
                i, f, g, o = jnp.split(xp + hp @ w_hh.T + b_hh, 4, axis=-1)
                cn = jax.nn.sigmoid(f) * cp + jax.nn.sigmoid(i) * jnp.tanh(g)
                hn = jax.nn.sigmoid(o) * jnp.tanh(cn)
                return (hn, cn), hn

            _, h = lax.scan(step, (zeros, zeros), projected)
        else:

            def step(hp, xp, w_hh=w_hh, b_hh=b_hh):
                xr, xz, xn = jnp.split(xp, 3, axis=-1)
                hr, hz, hn = jnp.split(hp @ w_hh.T + b_hh, 3, axis=-1)
                r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
                n = jnp.tanh(xn + r * hn)
                new = (1 - z) * n + z * hp
                return new, new

            _, h = lax.scan(step, zeros, projected)
    return h.transpose(1, 0, 2)


def _forward(name: str, c: _Ctx, x, sizes: dict):
    p = c.p
    if name == "mlp":
        h = jax.nn.relu(c.linear("0.", x))
        return c.linear("4.", jax.nn.relu(c.linear("2.", h)))
    if name == "cnn":
        h = _max_pool2(jax.nn.relu(c.conv("0.", x, padding=1)))
        h = _max_pool2(jax.nn.relu(c.conv("3.", h, padding=1)))
        h = jax.nn.relu(c.linear("7.", h.reshape(h.shape[0], -1)))
        return c.linear("9.", h)
    if name == "resnet18":
        h = c.conv_bn("stem.", x, act=jax.nn.relu)
        for i in range(8):
            pre = f"blocks.{i}."
            stride = 2 if i in (2, 4, 6) else 1
            out = jax.nn.relu(c.batch_norm(f"{pre}bn1.", c.conv(f"{pre}conv1.", h, stride, 1)))
            out = c.batch_norm(f"{pre}bn2.", c.conv(f"{pre}conv2.", out, 1, 1))
            short = h
            if f"{pre}shortcut.0.weight" in p:
                short = c.batch_norm(f"{pre}shortcut.1.", c.conv(f"{pre}shortcut.0.", h, stride))
            h = jax.nn.relu(out + short)
        return c.linear("fc.", h.mean(axis=(2, 3)))
    if name == "mobilenet_v2":
        h = c.conv_bn("features.0.", x, act=_relu6)
        i = 1
        for expansion, _, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 2, 2),
                                   (6, 96, 1, 1)):  # fmt: skip
            for j in range(n):
                pre, stride = f"features.{i}.conv.", s if j == 0 else 1
                y, k = h, 0
                if expansion != 1:
                    y, k = c.conv_bn(f"{pre}0.", y, act=_relu6), 1
                hidden = y.shape[1]
                y = c.conv_bn(f"{pre}{k}.", y, stride, groups=hidden, act=_relu6)
                y = c.conv_bn(f"{pre}{k + 1}.", y)
                h = h + y if stride == 1 and h.shape == y.shape else y
                i += 1
        h = c.conv_bn(f"features.{i}.", h, act=_relu6)
        return c.linear("fc.", h.mean(axis=(2, 3)))
    if name == "unet":
        relu = jax.nn.relu
        e = c.conv_bn("enc.", x, act=relu)
        d1 = c.conv_bn("down1.", e, 2, act=relu)
        m = c.conv_bn("mid.", c.conv_bn("down2.", d1, 2, act=relu), act=relu)
        u2 = c.conv_bn("dec2.", jnp.concatenate([c.conv_transpose("up2.", m, 2), d1], 1), act=relu)
        u1 = _bilinear_x2(u2)
        return c.conv("head.", c.conv_bn("dec1.", jnp.concatenate([u1, e], 1), act=relu))
    if name in ("lstm", "gru"):
        return c.linear("out.", _recurrent(c, p["embed.weight"][x], name))
    if name == "gpt":
        h = p["embed.weight"][x] + p["pos"][:, : x.shape[1]]
        a = c.attention("block.", c.layer_norm("block.ln1.", h), sizes["heads"], True, False)
        h = h + a
        f = c.linear("block.fc2.", _gelu(c.linear("block.fc1.", c.layer_norm("block.ln2.", h))))
        return c.linear("out.", c.layer_norm("ln.", h + f))
    if name == "transformer":
        h = _encoder_layer(c, "layer.", x, sizes["heads"], False, jax.nn.relu)
        return c.linear("out.", h)
    if name == "vit":
        h = c.conv("patch.", x, sizes["patch"])
        h = h.reshape(h.shape[0], h.shape[1], -1).transpose(0, 2, 1)
        cls = jnp.broadcast_to(p["cls"], (h.shape[0], 1, h.shape[2]))
        h = jnp.concatenate([cls, h], axis=1) + p["pos"]
        for i in range(sizes["depth"]):
            h = _encoder_layer(c, f"layers.{i}.", h, sizes["heads"], True, _gelu)
        return c.linear("out.", c.layer_norm("ln.", h[:, 0]))
    raise ValueError(f"no JAX twin of zoo model {name!r}")


def _cross_entropy(out, y):
    if out.ndim == 3:  # per token
        out, y = out.reshape(-1, out.shape[-1]), y.reshape(-1)
    elif out.ndim == 4:  # per pixel: classes on axis 1
        out, y = out.transpose(0, 2, 3, 1).reshape(-1, out.shape[1]), y.reshape(-1)
    logp = jax.nn.log_softmax(out, axis=-1)
    return -jnp.take_along_axis(logp, y[:, None], axis=1).mean()


# ----------------------------------------------------------------------------- the twin


class JaxTwin:
    """Zoo model ``name`` in JAX with ``model``'s (an ember zoo model's) weights: split into
    parameters (what the optimizer updates) and buffers (running statistics)."""

    def __init__(self, name: str, model):
        self.name, self.spec = name, zoo.SPECS[name]
        self.sizes = dict(self.spec.sizes)
        trainable = {k for k, _ in model.named_parameters()}
        state = {k: np.array(zoo._numpy(v)) for k, v in model.state_dict().items()}
        self.params = {k: jnp.asarray(v) for k, v in state.items() if k in trainable}
        self.buffers = {k: jnp.asarray(v) for k, v in state.items() if k not in trainable}

    def forward(self, params, buffers, x, train: bool):
        c = _Ctx(params, buffers, train)
        out = _forward(self.name, c, x, self.sizes)
        return out, {**buffers, **c.updates}

    # ---- training
    def train_step(self, x: np.ndarray, y: np.ndarray):
        """A callable running one jitted training step per call on (x, y), returning the loss
        (as a NumPy scalar: the call waits for the result)."""
        spec = self.spec
        x, y = jnp.asarray(x), jnp.asarray(y)

        def loss_fn(params, buffers):
            out, new_buffers = self.forward(params, buffers, x, True)
            return _cross_entropy(out, y), new_buffers

        def step(params, buffers, opt_state):
            (loss, buffers), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, buffers)
            params, opt_state = _update(spec, params, grads, opt_state)
            return loss, params, buffers, opt_state

        jitted = jax.jit(step, donate_argnums=(0, 1, 2))
        state = [
            jax.tree_util.tree_map(jnp.array, self.params),  # (own copies: donated)
            jax.tree_util.tree_map(jnp.array, self.buffers),
            _init_opt(spec, self.params),
        ]

        def call():
            loss, state[0], state[1], state[2] = jitted(*state)
            return np.asarray(loss)

        return call

    # ---- inference
    def infer(self, x: np.ndarray):
        x = jnp.asarray(x)
        jitted = jax.jit(lambda params, buffers, x: self.forward(params, buffers, x, False)[0])

        def call():
            return np.asarray(jitted(self.params, self.buffers, x))

        return call


def _init_opt(spec, params):
    def zeros():  # (distinct buffers each: all are donated)
        return jax.tree_util.tree_map(jnp.zeros_like, params)

    if spec.optimizer == "adamw":
        return {"step": jnp.zeros((), jnp.float32), "m": zeros(), "v": zeros()}
    return {"momentum": zeros(), "started": jnp.zeros((), bool)}


def _update(spec, params, grads, state):
    """One step of PyTorch's SGD (momentum, dampening 0: the buffer starts as the first
    gradient) or AdamW (betas 0.9/0.999, eps 1e-8, weight decay 0.01, decoupled)."""
    tree = jax.tree_util.tree_map
    if spec.optimizer == "adamw":
        b1, b2, eps, wd, lr = 0.9, 0.999, 1e-8, 1e-2, spec.lr
        t = state["step"] + 1
        m = tree(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
        v = tree(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)
        c1, c2 = 1 - b1**t, 1 - b2**t

        def new(p, m, v):
            return p * (1 - lr * wd) - (lr / c1) * m / (jnp.sqrt(v) / jnp.sqrt(c2) + eps)

        return tree(new, params, m, v), {"step": t, "m": m, "v": v}
    mu, lr = spec.momentum, spec.lr
    buf = tree(lambda b, g: jnp.where(state["started"], mu * b + g, g), state["momentum"], grads)
    params = tree(lambda p, b: p - lr * b, params, buf)
    return params, {"momentum": buf, "started": jnp.ones((), bool)}
