"""The forward convolution's epilogue: what of the elementwise ops on a convolution's result
its C kernel stores tile by tile (kernels/cconv.py, kernels/cconv_epilogue.py): a per-channel
bias, a clamp (the ops whose ``clamp`` rule bounds the value: ReLU, hardtanh and so ReLU6,
maximum and minimum with constants, ONNX's Clip as imported), and the ReLU's gradient mask
(``value > 0``, or ``value != 0`` as a graph's ReLU gradient reads it: NaN true).
The C store adds a half-precision bias to the float32 sums before the one rounding (the
convolution's own bias operand: PyTorch's arithmetic), so a separate half-precision ``add`` of
a bias, which rounds the convolution's result first, stays a separate node; a convolution with
its own bias operand takes a clamp and its mask. `epilogue_spec` reads a fused program into
the store's `Spec`; `rule` is the ``conv`` op's `EpilogueRule` (ops/conv.py)."""

from __future__ import annotations

from .. import dtypes as dt
from ..kernels.cclamp import UNBOUNDED
from ..kernels.cconv_activation import Activation
from ..kernels.cconv_epilogue import Spec
from ._registry import REGISTRY
from ._rules import Clamp, EpilogueRule
from .conv_lift import lifted_node
from .program import Input, Instr, Program, Temp

__all__ = ["epilogue_plan", "epilogue_spec", "rule"]


def _per_channel(t, result) -> bool:
    """Whether ``t`` broadcasts against the conv result as one value per output channel."""
    shape = (1,) * (len(result.shape) - len(t.shape)) + tuple(t.shape)
    return (
        len(shape) == len(result.shape)
        and shape[1] == result.shape[1]
        and all(d == 1 for i, d in enumerate(shape) if i != 1)
        and t.dtype == result.dtype
    )


def _clamp_of(instr, sources):
    """The `Clamp` of ``instr`` (its op's ``clamp`` rule) when it bounds one value of the
    chain (its other operands constants), else None."""
    if instr.op.clamp is None:
        return None
    data = [s for s in sources if not (isinstance(s, tuple) and s[0] == "k")]
    if len(data) != 1:
        return None
    constants = tuple(s[1] if isinstance(s, tuple) and s[0] == "k" else None for s in sources)
    return instr.op.clamp(dict(instr.attrs), constants)


def _joined(clamp, more):
    """One clamp doing ``clamp`` then ``more`` (None where no one store does): at most one
    lower and one upper bound in all, the lower strictly below the upper, so that NaN, the
    order of the bounds and ties come out as the ops one by one."""
    inf = float("inf")
    if clamp is None:
        clamp = Clamp(-inf, inf)
    lo, lo_ties = (more.lo, more.lo_ties) if more.lo != -inf else (clamp.lo, clamp.lo_ties)
    hi, hi_ties = (more.hi, more.hi_ties) if more.hi != inf else (clamp.hi, clamp.hi_ties)
    if (more.lo != -inf and clamp.lo != -inf) or (more.hi != inf and clamp.hi != inf):
        return None
    if not lo < hi:
        return None
    return Clamp(lo, hi, lo_ties, hi_ties)


def _chained(source) -> bool:
    """Whether ``source`` is a value of the store's chain: the sum, the biased sum, the sum
    with the residual, a clamp."""
    return source in ("conv", "pre", "res") or (isinstance(source, tuple) and source[0] == "act")


def _full(t, result) -> bool:
    """Whether ``t`` is a residual the store can add: the result's own shape and dtype."""
    return tuple(t.shape) == tuple(result.shape) and t.dtype == result.dtype


def _mask_agrees(clamp) -> bool:
    """Whether ``clamped > 0`` is ``value > 0`` for every value (NaN: both false): a lower
    bound of zero and a positive upper one (ReLU, ReLU6)."""
    return clamp is None or (clamp.lo == 0 and clamp.hi > 0)


def epilogue_spec(program, outputs, out_types, operand_types, slot: int, result) -> Spec | None:
    """What the C store must do for this epilogue program, or None when it cannot: an optional
    ``add`` of the result and a per-channel bias, an optional ``add`` of that and a residual of
    the result's shape (a residual block's shortcut; float32/float64: a half-precision sum
    rounds the convolution's result first, which the store does not), then a chain of ops
    whose ``clamp`` rule bounds the value (relu; maximum, minimum with constants: ReLU6 as
    ONNX's Clip writes it; hardtanh), an optional mask: ``gt(value, 0)``, or ``ne(value, 0)`` of
    the stored value (NaN true: the mask a graph's ReLU gradient reads, ``relu(x) != 0``), with
    one float output (the chain's last value) and at most one mask. The store adds in that
    order, so a program adding the residual before the bias is left alone (its sums round
    otherwise).

    ``operand_types``: the program's input types, the conv result's type at ``slot``."""
    add, gt, ne = REGISTRY["add"], REGISTRY["gt"], REGISTRY["ne"]
    # per program result: "pre" (after the bias), "res" (after the residual), ("act", n): n-th
    # clamp, "mask"
    kinds: list = []
    bias = residual = None
    clamp = None
    clamps = 0
    masked = []  # (what each mask reads, whether it is ``!= 0``)
    tail: list = []  # the activation's instructions, on the chain's last value (`_tail_of`)
    for instr in program:
        sources = []
        for ref in instr.operands:
            if isinstance(ref, Input):
                sources.append("conv" if ref.index == slot else ("in", ref.index))
            elif isinstance(ref, Temp):
                sources.append(kinds[ref.index])
            else:
                sources.append(("k", ref.value))
        bound = _clamp_of(instr, sources)
        latest = _latest(clamps, bias, residual)
        chain_op = bound is not None or instr.op in (add, gt, ne)
        if tail or (not chain_op and _activation_op(instr, sources, latest, result)):
            if not _activation_op(instr, sources, latest, result):
                return None  # (an activation's value read by anything but the activation)
            kinds.append(("tail", len(tail)))
            tail.append(_tail_instr(instr, sources, latest))
            continue
        if bound is not None:
            if latest not in sources:  # (the chain's last value, nothing earlier)
                return None
            clamp = _joined(clamp, bound)
            if clamp is None:
                return None
            clamps += 1
            kinds.append(("act", clamps))
        elif instr.attrs:
            return None
        elif instr.op is add and len(sources) == 2 and latest in sources:
            other = sources[1 - sources.index(latest)]
            if not isinstance(other, tuple) or other[0] != "in":
                return None
            if result.dtype in (dt.float16, dt.bfloat16):
                return None  # (rounded twice: the store rounds the sum with its bias once)
            if not kinds and _per_channel(operand_types[other[1]], result):
                bias = other[1]
                kinds.append("pre")
            elif (
                residual is None
                and not clamps
                and not masked
                and _full(operand_types[other[1]], result)
            ):  # (a mask taken already, or a clamp, reads a value before the residual)
                residual = other[1]
                kinds.append("res")
            else:
                return None
        elif instr.op in (gt, ne) and sources[1] == ("k", 0.0) and _chained(sources[0]):
            if sources[0] != _latest(0, bias, residual) and not isinstance(sources[0], tuple):
                return None  # the mask of a value before the bias or the residual: not stored
            masked.append((sources[0], instr.op is ne))
            kinds.append("mask!=" if instr.op is ne else "mask")
        else:
            return None
    final = _latest(clamps, bias, residual)
    activation = None
    if tail:  # (the store's mask would read the value before it)
        if masked or len(outputs) != 1 or not isinstance(kinds[outputs[0]], tuple):
            return None
        final = kinds[outputs[0]]
        activation = Activation(Program(tail), final[1])
    # (the store's mask is of the clamped value: ``clamped > 0`` is ``value > 0`` under a
    # ReLU's bounds, but ``clamped != 0`` is not ``value != 0`` for a negative value)
    if any(read != final and (not_zero or not _mask_agrees(clamp)) for read, not_zero in masked):
        return None
    value = mask = None
    not_zero = False
    for position, j in enumerate(outputs):
        kind = kinds[j]
        dtype = dt.as_dtype(out_types[position][1])
        if kind in ("mask", "mask!=") and mask is None and dtype is dt.bool_:
            mask, not_zero = position, kind == "mask!="
        elif kind == final and value is None and dtype == result.dtype:
            value = position
        else:
            return None  # (a value before the clamp and the clamped one both wanted)
    bounds = None if clamp is None else tuple(clamp)
    if not_zero:  # (the clamp block says how the mask compares: kernels/cclamp.py)
        bounds = (*(bounds or UNBOUNDED), True)
    if activation is not None:  # (the clamp block carries it: kernels/cclamp.py)
        bounds = (*(bounds or UNBOUNDED), False, activation)
    return Spec(bias, bounds, value, mask, residual=residual, activation=activation)


def _activation_op(instr, sources, base, result) -> bool:
    """Whether ``instr`` can be an instruction of the store's activation (kernels/
    cconv_activation.py): an elementwise op with a C expression (its ``c`` rule, as the fused
    loops compile it) whose operands are the chain's last value ``base``, the activation's
    earlier values and constants, in a float32/float64 result (a 16-bit store rounds first)."""
    op = instr.op
    if op.c is None or op.kind != "elementwise" or op.reduction is not None:
        return False
    if result.dtype not in (dt.float32, dt.float64):
        return False
    reads = [s for s in sources if not (isinstance(s, tuple) and s[0] == "k")]
    return bool(reads) and all(
        s == base or (isinstance(s, tuple) and s[0] == "tail") for s in reads
    )


def _tail_instr(instr, sources, base):
    """``instr`` as an instruction of the activation's own program: the chain's last value its
    input 0, the activation's earlier values its temps."""
    operands = []
    for ref, source in zip(instr.operands, sources):
        if source == base:
            operands.append(Input(0))
        elif isinstance(source, tuple) and source[0] == "tail":
            operands.append(Temp(source[1]))
        else:
            operands.append(ref)  # (a constant)
    return Instr(instr.op, tuple(operands), instr.attrs)


def _latest(clamps: int, bias, residual):
    """The chain's last value so far: the latest clamp, else the sum with the residual, else
    the biased sum, else the convolution's."""
    if clamps:
        return ("act", clamps)
    return "res" if residual is not None else ("pre" if bias is not None else "conv")


def epilogue_plan(node, conv_infer, compiled):
    """(the fused node's `Spec`, its convolution's attributes, the convolution's result type),
    or None when the C store cannot run it (``conv_infer``: the convolution's shape rule;
    ``compiled()``: its C kernels' module, ops/conv.py)."""
    attrs = node.attrs
    n, slot = attrs["n_producer"], attrs["slot"]
    x_type, w_type = (v.type for v in node.inputs[:2])
    if n not in (2, 3) or not compiled().available(x_type.dtype.np):
        return None
    producer_attrs = dict(attrs["producer_attrs"])
    result = conv_infer(*(v.type for v in node.inputs[:n]), **producer_attrs)
    operand_types = [v.type for v in node.inputs[n:]]
    operand_types.insert(slot, result)
    plan = epilogue_spec(
        attrs["program"], attrs["outputs"], attrs["out_types"], operand_types, slot, result
    )
    if plan is not None and n == 3:  # the convolution's own bias: the store's only one
        plan = None if plan.bias is not None else plan._replace(own_bias=True)
    return None if plan is None else (plan, producer_attrs, result)


def _depthwise(node) -> bool:
    from ..kernels.cdepthwise import multiplier

    x, w = (v.type for v in node.inputs[:2])
    return multiplier(x.shape[1], tuple(w.shape), node.attrs["groups"]) is not None


def _epilogue_takes(node, program, outputs, out_types, in_types, slot) -> bool:
    result = node.outputs[0].type
    spec = epilogue_spec(program, outputs, out_types, in_types, slot, result)
    if spec is None or (len(node.inputs) > 2 and spec.bias is not None):
        return False  # (a convolution with its own bias operand: the store adds no second one)
    # the depthwise kernels store the value (biased, clamped), no mask, no residual
    if spec.residual is not None and (_depthwise(node) or len(node.inputs[0].shape) != 4):
        return False  # (the residual: the 2-d, one-group kernels' store)
    return not _depthwise(node) or (spec.mask is None and spec.value is not None)


def _depthwise_producer(node) -> bool:
    """Whether the ``fused_epilogue`` node's convolution is depthwise."""
    from ..kernels.cdepthwise import multiplier

    x, w = (v.type for v in node.inputs[:2])
    groups = dict(node.attrs["producer_attrs"])["groups"]
    return multiplier(x.shape[1], tuple(w.shape), groups) is not None


def rule(conv_infer, compiled) -> EpilogueRule:
    """The convolution's `EpilogueRule`, given its shape rule and its C kernels' module
    (``compiled()``, ops/conv.py)."""

    def plan(node):
        return epilogue_plan(node, conv_infer, compiled)

    def compile_(node):
        from ..kernels import cconv_epilogue

        found = plan(node)
        if found is None:
            return None
        return cconv_epilogue.build(node, *found, depthwise=_depthwise_producer(node))

    def c_step(node):
        from ..kernels import cconv_epilogue

        found = plan(node)
        if found is None:
            return None
        if _depthwise_producer(node):
            return cconv_epilogue.depthwise_c_step(node, *found[:2])
        seen, producer_attrs = lifted_node(node, found[1])  # (1-d: the 2-d one of height 1)
        return cconv_epilogue.c_step(seen, found[0], producer_attrs)

    def accepts(node) -> bool:
        """The C store runs in kernels/cconv.py's kernels, or a depthwise convolution's in its
        own (kernels/cdepthwise.py: 2-d; faster than the grouped GEMM)."""
        if _depthwise(node) and len(node.inputs[0].shape) != 4:
            return False
        return compiled().available(node.outputs[0].dtype.np)

    return EpilogueRule(
        accepts=accepts,
        takes=_epilogue_takes,
        compile=compile_,
        c_step=c_step,
        bias_operand=_depthwise,  # (its kernels add a bias operand as they store, fused or not)
    )
