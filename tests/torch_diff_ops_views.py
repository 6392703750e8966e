"""The wide profile's views and in-place vocabulary for tests/torch_diff_fuzzing.py:
non-contiguous operands (transposed, stepped slices, expanded, flipped), in-place ops on views
of non-leaf tensors recorded for autograd and on views of leaves under ``no_grad``, and
tensors modified in place after an op saved them for its backward, whose backward PyTorch
refuses ("modified by an inplace operation"): ember must refuse the same programs, no more."""

from __future__ import annotations

from tests.torch_diff_ops import Call, Ctx, op

VIEWS = {
    "t": lambda T, x: x.t() if x.dim() <= 2 else x.transpose(0, -1),
    "step": lambda T, x: x[..., ::2],
    "step_rows": lambda T, x: x[1::2] if x.dim() else x,
    "expand": lambda T, x: x.unsqueeze(0).expand(2, *x.shape),
    "flip": lambda T, x: x.flip(-1) if x.dim() else x,
    "permute": lambda T, x: x.permute(*reversed(range(x.dim()))),
    "diagonal": lambda T, x: x.diagonal() if x.dim() >= 2 else x,
    "unfold": lambda T, x: x.unfold(-1, 1, 2) if x.dim() else x,
}


@op(weight=3, wide=True)
def strided(c: Ctx):
    """A non-contiguous view of a pool entry (later steps take it as their operand)."""
    p = c.pick()
    kind = c.rng.choice(sorted(VIEWS))
    fn = VIEWS[kind]
    then = c.rng.choice(["view", "contiguous", "exp", "sum", "mul"])

    def call(T, x):
        v = fn(T, x)
        if then == "contiguous":
            return v.contiguous()
        if then == "exp" and (v.dtype.is_floating_point or v.is_complex()):
            return v.exp()
        if then == "sum":
            return v.sum(-1) if v.dim() else v.sum()
        if then == "mul":
            return v * v
        return v

    return Call(f"{kind}({p[2]}).{then}", [p], call)


# ops whose backward reads a saved input or output
SAVING = {
    "exp": lambda T, y: y.exp(),  # its output
    "sin": lambda T, y: y.sin(),  # its input
    "square": lambda T, y: y * y,
    "sigmoid": lambda T, y: T.sigmoid(y),
    "relu": lambda T, y: T.relu(y),
    "add": lambda T, y: y + 1,  # saves nothing
    "scale": lambda T, y: y * 2,  # saves nothing of y
    "pow": lambda T, y: y**3,
    "tanh": lambda T, y: y.tanh(),
    "sum": lambda T, y: y.sum(),  # saves nothing
    "matmul": lambda T, y: y @ y.mT if y.dim() >= 2 else y @ y if y.dim() == 1 else y * y,
    "clone": lambda T, y: y.clone(),
    "index": lambda T, y: y[..., :1] * 3,  # a view's gradient saves no values
    "abs": lambda T, y: y.abs(),
    "div": lambda T, y: 1 / (y.abs() + 1),
}

MODIFY = {
    "add_": lambda T, v: v.add_(1),
    "mul_": lambda T, v: v.mul_(2),
    "zero_": lambda T, v: v.zero_(),
    "exp_": lambda T, v: v.exp_(),
    "clamp_": lambda T, v: v.clamp_(-0.5, 0.5),
    "fill_": lambda T, v: v.fill_(0.25),
    "copy_": lambda T, v: v.copy_(v * 0 + 3),
    "setitem": lambda T, v: v.__setitem__(..., 1.5),
}

WHERE = {
    "whole": lambda y: y,
    "row": lambda y: y[0] if y.dim() else y,
    "t": lambda y: y.t() if y.dim() == 2 else y,
    "step": lambda y: y[..., ::2],
    "detach": lambda y: y.detach(),
}


@op(weight=4, wide=True)
def modified_after_save(c: Ctx):
    """``y = x * 1; r = f(y); <part of y>.op_()``: the backward through r refuses where f saved
    y (or its own output, when f's output is y's view) and the in-place op bumped y's version."""
    p = c.pick("f")
    f = c.rng.choice(sorted(SAVING))
    m = c.rng.choice(sorted(MODIFY))
    w = c.rng.choice(sorted(WHERE))
    on_result = c.rng.random() < 0.25  # modify f's result instead of its input

    def call(T, x):
        y = x * 1
        r = SAVING[f](T, y)
        target = r if on_result else y
        if target.dim() == 0 and w == "row":
            target = target.reshape(1)
        MODIFY[m](T, WHERE[w](target))
        return [r, y]

    text = f"y={p[2]}*1; r={f}(y); {'r' if on_result else 'y'}.{w}.{m}"
    return Call(text, [p], call)


@op(weight=2, wide=True)
def leaf_inplace(c: Ctx):
    """In-place ops on a leaf that requires grad, or a view of it: refused while recording,
    allowed under no_grad (on a copy of the pool entry: its detached clone made a leaf)."""
    p = c.pick("f")
    m = c.rng.choice(sorted(MODIFY))
    w = c.rng.choice(sorted(WHERE))
    recording = c.rng.random() < 0.5

    def call(T, x):
        leaf = x.detach().clone().requires_grad_(x.requires_grad)
        target = WHERE[w](leaf)
        if target.dim() == 0 and w == "row":
            target = leaf
        if recording:
            MODIFY[m](T, target)
        else:
            with T.no_grad():
                MODIFY[m](T, target)
        return leaf * 2

    return Call(f"leaf({p[2]}).{w}.{m} recording={recording}", [p], call)


@op(weight=2, wide=True)
def view_inplace_grad(c: Ctx):
    """A non-leaf's view modified in place by an op that records: the base's gradient flows
    through the modified region (PyTorch's CopySlices)."""
    p = c.pick("f")
    w = c.rng.choice(["row", "t", "step"])
    kind = c.rng.choice(["mul_other", "sigmoid_", "copy_other", "addcmul_", "pow_"])
    q = c.pick("f")
    if kind == "addcmul_" and str(p[0].dtype).endswith(("float16", "bfloat16")):
        # (ember's 16-bit addcmul computes on float32 copies, which its backward saves, so
        # it misses v's in-place change that PyTorch's AddcmulBackward0 refuses)
        kind = "pow_"

    def call(T, x, o):
        y = x * 1
        v = WHERE[w](y) if y.dim() else y
        b = o.sum() if o.dim() else o
        if kind == "mul_other":
            v.mul_(b)
        elif kind == "sigmoid_":
            v.sigmoid_()
        elif kind == "copy_other":
            v.copy_(b)
        elif kind == "addcmul_":
            # (value=1: with another value ember's composite saves v * value, not v, so
            # modifying v in place is not refused as PyTorch's AddcmulBackward0 refuses it)
            v.addcmul_(v, b)
        else:
            v.pow_(2)
        return y

    return Call(f"y={p[2]}*1; y.{w}.{kind}({q[2]})", [p, q], call)
