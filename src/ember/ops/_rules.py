"""The typed rules an `OpDef` may declare, and who reads each.

An op states facts about itself as fields of its `OpDef` (ops/_registry.py), set where the op is
defined; the layers above read those fields and never compare op names. A field left at its
default means the op has no such fact. The fields:

Execution
* ``fast(*arrays, **attrs)``: a faster implementation of ``kernel`` (C, from kernels/), or None
  where it does not apply. `OpDef.run` tries it first; eager execution and generated code call
  ``run``, the interpreter only ``kernel``.
* ``compile(node) -> fn | None``: an implementation of one graph node with its attributes built
  in, ``fn(*arrays, out=None) -> tuple`` (runtime/codegen.py; a fused loop's C kernel).
* ``c_step(node) -> CStep | None``: the node as a step of the C graph runner (kernels/cstep.py,
  runtime/cgraph.py).
* ``c_sources(node) -> [(source, flags)]``: the C sources ``compile`` and ``c_step`` would
  build for the node, so that a graph's kernels are built in one compiler run before either
  is called (runtime/prebuild.py, kernels/cbatch.py); empty where there is no compiler.
* ``accepts_out(node, compiled: bool) -> bool``: generated code may pass ``out=`` arrays (an
  arena's slots, plan/arena.py) to the kernel, or to the compiled implementation when
  ``compiled``. A one-ufunc kernel takes ``out=`` without saying so.
* ``overwrites_operand``: the compiled implementation reads each element of its operands before
  writing the same element of its result (of a loop ending in reductions: of its elementwise
  results), so that result (the first of the loop's shape) may take a dying operand's buffer
  (plan/liveness.py `reusable_output`, runtime/codegen.py). One-ufunc kernels do so without
  saying so.

Fusion (transforms/fuse.py, transforms/epilogue.py, kernels/cfuse.py)
* ``c``: the op's C expression for fused elementwise loops, a format string over its operands
  ``{0}``, ``{1}``, ... with ``{T}`` the result's C type, ``{f}`` the ``f`` suffix of float
  math functions in float32, and ``{name}`` each numeric attribute as a constant of the result's
  type, rounded to the result's dtype (hardtanh's bounds ``{lo}``, ``{hi}``, compared as
  NumPy compares a Python float with a half-precision array) or with ``{name:compute}`` to the
  type the loop computes in (leaky_relu's ``{slope:compute}``, a factor multiplied in float32
  for half precision); a bound that may be None (open) is ``{name:lower}`` or ``{name:upper}``,
  given as -inf or inf where None (clip's ``{lo:lower}``, ``{hi:upper}``); the op's shape rule
  must check them. Elementwise ops only.
* ``reduction``: a `ReductionRule`: a fused loop may end in this reduction; the C generators
  (kernels/cfuse.py, kernels/creduce.py) write its accumulation from the rule.
* ``epilogue``: an `EpilogueRule`: the op's result may take an elementwise epilogue, and how the
  fused node runs (transforms/epilogue.py, ops/fused.py's ``fused_epilogue``).
* ``clamp(attrs, constants) -> Clamp | None``: the call bounds its one data operand into an
  interval, the rest of its operands constants (``constants``: per operand its number, None for
  the data), and how it treats a value equal to a bound (the sign of a zero) and NaN (kept):
  relu, hardtanh, clip, maximum and minimum with a constant. A convolution's store applies it in
  its epilogue (ops/conv_epilogue.py) with the op's own bits.
* ``fused``: a `FusedRule`: the op is a group of other ops run as one; what the tools show of it
  (graph/dot.py, tools/viz.py, profiler/) and what its cost counts.

Memory and cost (plan/, tools/)
* ``as_view(x, **attrs)``: for a ``view`` op whose kernel copies where the strides allow no view
  (reshape), the kernel asked for a view only: it raises instead of copying (plan/layout.py
  works out strides on a stand-in array whose memory must never be read).
* ``workspace(node, layouts) -> int``: bytes the kernel allocates beyond its outputs.
* ``aliases``: the kernel returns input 0 or views of it without being a ``view`` op for
  autograd (split, stop_gradient): the memory plan shares their memory.
* ``flop_family``: the row the FLOP counter reports the op under, when not its kind; also the
  family a rematerialization policy names (transforms/checkpoint.py `save_only`).
* ``quantized``: "all" (copies every element in place: copy) or "per_tensor" (moves elements:
  reshape, permute, getitem, broadcast_to, flip, index, concat, split; a per-channel tensor,
  whose scales follow an axis, is refused): the op takes a quantized tensor (ops/qtensor.py),
  whose parameters go with its array; any other op refuses one (`_registry._refuse_special`).
* ``limited``: the op takes uint16/uint32/uint64 operands (PyTorch's few kernels for them;
  declared in ops/_limited.py); any other op refuses one (`_registry._refuse_special`).
* ``torch_flops(inputs, attrs, backward) -> str | None``: the aten operator PyTorch's
  ``FlopCounterMode`` counts the call under (``"aten.mm"``), None where it counts nothing
  (ops/_torch_flops.py; read by ember.utils.flop_counter with the ``cost`` rule).

Interchange (onnx/exporter.py)
* ``onnx(e) -> names``: the op as ONNX nodes. ``e`` is an emitter bound to one call (defined in
  onnx/export_emit.py: the ops never import ``onnx``): it gives the call's operand names
  (``e.inputs``), types (``e.in_types``, ``e.out_types``), ``e.attrs`` and ``e.opset``, and
  emits with ``e.node(op_type, inputs, outputs=1, **attributes)``, ``e.constant(array)``,
  ``e.ints``, ``e.shape(dims)`` (symbolic sizes computed at run time), ``e.call(op, inputs,
  attrs)`` (another op's rule: fused members), ``e.inline(graph, names)`` and ``e.body(...)``
  (control-flow subgraphs). It returns one ONNX name per output, or calls
  ``e.unsupported(reason)`` for a call ONNX cannot express exactly. None: the op has no ONNX
  form, and exporting a graph holding it raises `OnnxError` naming the op and the user's line.
  Shared helpers for rules: ops/_onnx.py.

Precision (ops/_autocast.py; the entry points are ember.amp's)
* ``autocast``: an `Autocast` policy, or ``attrs -> Autocast | None`` where it depends on the
  call (a pad's mode): inside an enabled ``ember.autocast`` region, `apply` casts the op's
  float operands by it before the current mode sees the call, so eager tapes and captured graphs
  both hold the casts. A composite public function declares its policy where it is defined with
  ``@autocasts(...)`` (ops/_autocast.py), which casts its arguments and runs its body with
  autocast off, as PyTorch's autocast does for the ops on its lists.

Effects (graph/rewrite.py ``is_pure``; transforms/fold.py, cse.py, dce.py, unroll.py, remat.py,
checkpoint.py; plan/schedule.py; runtime/parallel_plan.py, parallel_cost.py, auto.py)
* ``effect``: an `Effect`: running the op does more than compute its outputs (it talks to other
  processes: a collective). Such a call is never folded, merged with an equal one, removed when
  nothing reads it, recomputed, or run on made-up inputs to time it; calls whose effects share an
  ``ordered`` channel keep their relative order in every pass, schedule and executor (the ranks
  of a process group must start collectives in the same order, or they deadlock or mix their
  data). ops/collective.py declares it.

Differentiation (graph/autodiff.py; autograd.py)
* ``grad_fn``: PyTorch's name of the eager tape node recording a call, the class name of the
  result's ``grad_fn`` (ops/_node_names.py): a name, or ``(attrs, in_types) -> name`` where
  PyTorch's node depends on the call; unset, the op's name in CamelCase and ``Backward0``.
* ``stops_gradient``: the result carries no gradient to the operands (``stop_gradient``, a
  graph's detach), so graph autodiff counts it as depending on nothing it differentiates: an
  op after it that has no VJP (a function PyTorch defines no derivative for) needs none.

Complex numbers (ops/_registry.py `apply`, `native_code`; runtime/codegen.py, runtime/cgraph.py,
runtime/workers.py, transforms/fuse.py)
* ``complex``: a `Complex`: the op takes complex operands (complex64, complex128), its kernel
  computing them in NumPy. Left None, `apply` refuses a complex operand before the op runs or is
  recorded, with a `ComplexDTypeError` naming the op, the dtype and the user's line, in every
  mode (eager, graph building), so no op that was never written for complex values sees one.
  ``Complex.VALUES``: values only, refused where a complex operand requires grad (the VJP was
  not written for complex); ``Complex.GRADIENT``: the VJP too, in PyTorch's convention (the
  gradient of a real loss is the conjugate Wirtinger derivative, ``g * conj(f'(z))`` for a
  holomorphic ``f``). C code never sees complex values: an op's ``fast`` is skipped for
  complex arrays (`OpDef.run`), and a graph node with a complex value is never compiled
  (``compile``), fused, epilogue-fused or run as a C step: `native_code(node)` is False.
* ``float8``: True: the op takes float8 operands (dtypes.FLOAT8_DTYPES, PyTorch's storage
  formats): it moves, views, selects or compares values, or casts them, without arithmetic
  (PyTorch's CPU kernels allow about those). Left False, `apply` refuses a float8 operand
  with a `KernelDTypeError` naming the op and dtype, in every mode; `native_code` keeps C code
  off nodes with float8 values, as off complex ones.

Transforms
* ``batch``: how a call splits along a batch axis (ops/_batching.py; micro-batching); None: it
  does not; left unset, its kind's default.
* ``identity``: an `Identity`: constant operands the op passes the other operand through for.
* ``noop(x, **attrs) -> bool``: the op returns its input unchanged for these attributes.
* ``compose(inner_attrs, outer_attrs, in_type) -> attrs | None``: ``op(op(x, a), b)`` is
  ``op(x, compose(a, b))`` (or None where not exact).
* ``remat_free``: True: the op costs next to nothing beside the memory it writes (a cast), so a
  captured training step recomputes its result for the backward's readers rather than keep it
  from the forward, where that plans a lower peak (transforms/cheap_remat.py): a 16-bit cast
  of a float32 parameter, alive anyway, is made again for the input's gradient.
* ``widening(in_type, attrs) -> DType | None``: the op converts its one operand exactly to
  the wider floating dtype it returns (a cast from bfloat16 to float32), else None.
* ``reads_widened(attrs, in_type, dtype) -> attrs | None``: with these attributes the op reads
  operand 0 of ``in_type`` itself and computes what it computes on that operand's exact
  widening to ``dtype`` (log_softmax's ``dtype``: a 16-bit input read as float32, never
  copied), else None; transforms/widened_reads.py folds a `widening` operand into it.
* ``row_statistics``: a `RowStatistics`: the op's result is an elementwise function of its
  operand 0 and a few per-row statistics of it (reductions along the op's axis, dimensions
  kept), each written as graph nodes through ``add(op, inputs, attrs) -> value``, the kernel's
  values (NumPy's bits along the last axis). log_softmax: the row maximum ``m`` and
  ``log(sum(exp(x - m)))``. A training step whose backward reads the float32 result of a
  16-bit operand read widened saves the operand and the statistics instead, the elementwise
  rest recomputed where the backward reads it and, for a forward `gathers` reader (the loss's
  pick of the target's log-probability), on the picked elements only
  (transforms/row_statistics.py, tried by transforms/cheap_remat.py where it plans a lower
  peak): half the bytes, the same values.
* ``keeps_order``: True: the kernel lays its result out in the memory order of its first
  operand of the result's shape, as a NumPy ufunc's result (order 'K'): cast's ``astype`` of
  a permuted view is permuted too; plan/layout.py follows it, so the planner sees the copies
  later kernels make of such a result (ember's GEMM copying a batch not one stride apart).
* ``gathers(attrs) -> int | None``: the result holds operand 0's elements at the positions
  operand 1 names along this axis, the result's own position along the others (torch.gather),
  so an elementwise function of operand 0 and values of size 1 along that axis commutes with
  it; None for attributes where it does not.
* ``broadcast``: the op only broadcasts its input (an elementwise reader may read the input).
* ``selects``: `Select` pairs: the result's element is, element by element, operand
  ``value``'s or operand ``fill``'s, chosen by the other operands, with no arithmetic (where).
* ``scatter``: a `ScatterRule`: the result is zeros with one operand's elements added at the
  positions another operand names, and the rule gives the op reading those positions back
  (pool_scatter). With ``selects``, transforms/scatter_masks.py moves a mask applied to such
  a result (a ReLU's gradient after max pooling's) before the scatter, where it reads the
  mask at the scattered positions only.
* ``picks``: a `PickRule`: one output holds an operand's elements at the positions another
  output names (max pooling's values and window codes): reading that operand there through
  the rule's gather is the values output (transforms/scatter_masks.py).
* ``pattern``: a `PatternRule`: the op computes what a subgraph of other ops computes (attention:
  the product, scale, mask, softmax and product exporters write); transforms/patterns.py
  replaces each subgraph the rule matches with the op's call.
* ``unroll(graph, node, max_trips, folder) -> int | None``: a loop op unrolls itself
  (transforms/unroll.py drives it; control/ defines it).
* ``channel_affine(arrays, attrs) -> (operand, scale, shift) | None``: given its operands'
  constant arrays (None where not constant), the call is ``x * scale[c] + shift[c]`` along
  dimension 1 of operand ``operand`` (float64 arrays); batch_norm_eval
  (transforms/fold_affine.py folds it into the producer of ``x``).
* ``channel_weight(attrs) -> int | None``: the operand whose dimension 0 runs over the
  result's dimension 1 (channels) and which the result is linear in, channel by channel, so
  that scaling its row ``c`` scales output channel ``c``: the convolution's weight.
* ``channel_terms(in_types, attrs) -> (operand, fold) | None``: the call is ``x * scale[c] +
  shift[c]`` along dimension 1 of operand ``operand`` whatever its other operands hold;
  ``fold(weight, shift, inputs, groups, axis, shift_shape) -> (weight, shift)`` folds it, in
  ember ops, into a producer's weight laid out as a `ChannelWeights` with ``groups`` and
  ``axis`` says, and into the per-channel shift after the producer (None: none yet; else of
  ``shift_shape``), ``inputs`` being the call's operands: batch_norm_eval (one
  ``batch_norm_fold`` call), and add with a per-channel vector (a convolution's bias).
  transforms/fold_affine_inputs.py folds chains of them into the producer, for affines whose
  parameters are graph inputs.
* ``channel_fold(in_types, attrs) -> ChannelWeights | None``: the call's result is linear per
  output channel (dimension 1) in one weight operand: which operand, how its elements map to
  output channels, and where a per-channel shift goes (its own bias operand, or an add after
  it): conv, conv_input_grad (the transposed convolution), linear on a matrix.

Memory format (eager.py; ops/_memory_format.py)
* ``layout``: a `Layout`: which operands' channels-last memory format an eager result takes, as
  PyTorch's kernels suggest it (a 4-d or 5-d result only). Elementwise ops take
  ``Layout(None)`` unless they say otherwise: the first operand of the result's shape decides,
  as PyTorch's TensorIterator orders its output by its first operand.

Eager dispatch (eager.py)
* ``cached_infer``: a bool: the shape rule is a pure function of its operands' types and its
  attributes (their values as dict keys compare them, and their types): it reads no global
  state, warns of nothing, and accepts or refuses a call by those alone. The eager mode then
  keeps the rule's answer per signature (the operands' shapes and NumPy dtypes, the
  attributes and their types) and calls the rule only for a signature it has not seen; a
  call the rule refuses is never kept, so it raises on every call.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = [
    "Autocast",
    "ChannelWeights",
    "Clamp",
    "Complex",
    "Effect",
    "EpilogueRule",
    "FusedRule",
    "Identity",
    "Layout",
    "PatternRule",
    "PickRule",
    "Producer",
    "ReductionRule",
    "ScatterRule",
    "Select",
]


class Autocast(enum.Enum):
    """What autocast does with an op's floating operands (PyTorch's CPU cast policies,
    aten/src/ATen/autocast_mode.cpp). Only float32, float16 and bfloat16 operands are eligible:
    float64 and non-float operands are never cast.

    * ``LOWER``: cast to the region's dtype (PyTorch's ``lower_precision_fp``: products,
      convolutions, attention);
    * ``FP32``: cast to float32 (``fp32``: losses, linear algebra, FFTs, ...);
    * ``PROMOTE``: cast to the widest eligible dtype among them (``promote``: cat, stack,
      index_copy), float32 over the region's dtype; a 16-bit dtype other than the region's
      raises, as PyTorch does;
    * ``KEEP``: cast nothing, and a composite declaring it runs its body with autocast off: an
      op PyTorch implements in one kernel that autocast passes through (``dot``, ``mv``,
      ``bilinear``), which ember builds from ops on the lists."""

    LOWER = "lower_precision_fp"
    FP32 = "fp32"
    PROMOTE = "promote"
    KEEP = "keep"


class Complex(enum.Enum):
    """Which complex operands an op takes (the ``complex`` rule above).

    * ``VALUES``: the kernel and shape rule compute complex operands (comparisons, predicates,
      copies without a gradient); a complex operand that requires grad is refused;
    * ``GRADIENT``: the VJP too: PyTorch's convention, the conjugate Wirtinger derivative."""

    VALUES = "values"
    GRADIENT = "gradient"


class Effect(NamedTuple):
    """What an op does beyond computing its outputs (see ``effect`` above). ``ordered``: the
    channel whose calls must run in the order they were recorded (``"collective"``: a process
    group's collectives), or None: the call must run, but its order among others is free (a
    wait for a collective already started: its data dependence places it)."""

    ordered: str | None = None


class ChannelWeights(NamedTuple):
    """How a call's output channels (dimension 1 of its result) read its weight operand
    ``weight``: seen as ``(groups, weight.shape[0] // groups, *weight.shape[1:])``, output
    channel ``g * n + j`` reads index ``g`` of that view's first axis and ``j`` of its axis
    ``axis + 1`` (``n`` that axis's length) and nothing else of the weight. ``bias``: the operand
    a per-channel shift of shape (C,) is added into (a slot past the last operand: the call gains
    it), or None: the shift is added after the call, shaped (1, C, 1, ...)."""

    weight: int
    groups: int = 1
    axis: int = 0
    bias: int | None = None

    def shift_shape(self, result_ndim: int, channels: int) -> tuple:
        if self.bias is not None:
            return (channels,)
        return (1, channels) + (1,) * (result_ndim - 2)


class Identity(NamedTuple):
    """``op(c, x) == x`` for ``c == left``, ``op(x, c) == x`` for ``c == right`` (None: no such
    constant on that side). transforms/simplify.py compares constants bit for bit on floats, so
    ``x + 0.0``, which turns -0.0 into 0.0, is kept while ``x + (-0.0)`` goes."""

    left: float | None = None
    right: float | None = None


class Select(NamedTuple):
    """The op's result holds, element by element, operand ``value``'s element or operand
    ``fill``'s, chosen by its other operands (a mask), and computes nothing else: ``where(c,
    x, y)`` declares ``Select(1, 2)`` and ``Select(2, 1)``. With ``fill`` holding only +0.0 it
    is exact to select before or after a scatter-add of ``value`` (transforms/scatter_masks.py)."""

    value: int
    fill: int


class ScatterRule(NamedTuple):
    """The op's result is zeros with operand ``values``' elements added at the positions
    operand ``index`` names (several may add into one position), with the result's shape
    given by the attributes. ``gather(attrs) -> (op, attrs)``: the op and attributes that read
    a tensor of the result's shape at those positions, ``op(x, index, **attrs)``, giving a
    tensor of ``values``' shape (the scatter's adjoint, a pure selection of positions)."""

    values: int
    index: int
    gather: Callable[[dict], tuple]


class PatternRule(NamedTuple):
    """The op computes what a subgraph of other ops computes (transforms/patterns.py).
    ``roots``: the ops such a subgraph ends in; ``match(op, node, constant) -> build | None``
    looks at the subgraph ending in ``node`` (a call of a root; ``op``: the rule's own OpDef;
    ``constant(value)``: the array a value always holds, or None) and returns None unless
    every condition of the equivalence holds (shapes, dtypes, constants' values, values read
    only inside the subgraph); ``build(graph) -> Value`` then adds the op's call (and any view
    it needs) where the graph inserts and returns the value that replaces ``node``'s output
    (of its type).
    The op may round differently from the subgraph (a scale applied to another operand): the
    pass is checked within rounding."""

    roots: tuple
    match: Callable[..., Any]


class RowStatistics(NamedTuple):
    """An op's result from per-row statistics of its operand 0 (the ``row_statistics`` rule):
    ``statistics(add, x, attrs) -> tuple | None`` records them (None: no rows to take them
    of, or attributes the split does not serve), ``result(add, x, stats, attrs) -> value``
    the elementwise rest, on ``x`` or on elements picked from it along the op's axis."""

    statistics: Callable[..., Any]
    result: Callable[..., Any]


class PickRule(NamedTuple):
    """Output ``values`` holds operand ``source``'s elements at the positions output ``index``
    names: ``op(source, index, **attrs)`` for ``(op, attrs) = gather(call_attrs)`` equals
    output ``values`` (max pooling's maxima and their window codes), or ``gather`` returns
    None for attributes where the index is not of that form."""

    source: int
    values: int
    index: int
    gather: Callable[[dict], tuple | None]


class ReductionRule(NamedTuple):
    """How a fused loop (transforms/fuse.py) ends in this reduction, in C for the generators
    (kernels/cfuse.py: row loops, kernels/creduce.py: column loops and row blocks). The op
    takes one float operand and the attributes ``axes`` (a sorted tuple) and ``keepdims``.

    The C snippets are format strings over C expressions of the accumulator's type:

    * ``accumulate`` (``{acc}``, ``{x}``): a row loop's accumulator after taking term ``x``;
      the loop is ``omp simd`` with ``reduction(<omp>:acc)``, so the lanes accumulate
      separately and combine in an order of their own;
    * ``combine`` (``{a}``, ``{b}``): partial result ``a`` (of the earlier rows) with ``b``:
      column loops take each row in order this way, and row blocks their partial results.
      It propagates NaN (a NaN ``b`` wins), so max and min need no flag there.

    Half precision (bfloat16, float16) accumulates in float (double where ``wide``), each
    result rounded once to 16 bits: fused loops take it only for a rule ``exact`` or ``wide``,
    whose reference kernel computes it so (transforms/fuse.py).
    """

    identity: float  # the result over no terms (an empty row too): where accumulators start
    accumulate: str
    omp: str  # OpenMP's reduction operator for ``accumulate`` ("+", "*", "max", "min")
    combine: str
    # a row's terms go to a scratch row summed in NumPy's pairwise order, instead of being
    # accumulated: the fused sum then equals np.sum bit for bit (kernels/cfuse.py)
    pairwise: bool = False
    # ``accumulate`` is a comparison, which drops NaN: a flag per accumulator records whether
    # the row held one, and the row's result is then NaN (NumPy's max and min propagate it)
    nan_flag: bool = False
    # combining rounds nothing (a comparison), so any order gives NumPy's result (but for the
    # sign of a zero among equal zeros); otherwise the order of a fused loop (lanes, row
    # blocks) rounds differently from NumPy's: the suite's checks (tests/conftest.py) choose
    # their tolerance by it
    exact: bool = False
    # a float32 result accumulates over leading axes in double, rounded once at the end: a
    # column loop's running results (and a row block's partial ones) are doubles, as the
    # reference kernel accumulates such axes in float64 (ops/reduce.py's sum), which keeps a
    # long strided sum within float32's rounding instead of an error growing with its rows
    wide: bool = False
    # the dtypes on which the reference kernel takes a result's terms one after another in C
    # order of the reduced axes, from the first (NumPy's multiply.reduce; an integer maximum):
    # ``accumulate`` applied so gives its bits, the C graph runner's step of a lone reduction
    # (kernels/creduce_step.py, ops/fused.py `lone_c_step`)
    sequential: tuple = ()


class Clamp(NamedTuple):
    """What a ``clamp`` rule says of a call: its result is its data operand ``x`` bounded
    below by ``lo`` and above by ``hi`` (-inf, inf: no bound; NaN kept). ``lo_ties``: where
    ``x == lo`` the result is ``lo`` itself (``maximum(x, 0.0)`` of -0.0 is 0.0) rather than
    ``x`` (hardtanh keeps -0.0); ``hi_ties`` likewise."""

    lo: float
    hi: float
    lo_ties: bool = False
    hi_ties: bool = False


class EpilogueRule(NamedTuple):
    """The op's result may take an elementwise epilogue: the op (the *producer*) and its one
    elementwise reader become one ``fused_epilogue`` node (transforms/epilogue.py), which runs
    the producer and the reader's program in one implementation (ops/fused.py).

    The pass has checked that the call has one float output of static, non-empty shape.

    * ``accepts(node) -> bool``: whether this call can take an epilogue at all;
    * ``takes(node, program, outputs, out_types, in_types, slot) -> bool``: whether it can run
      this reader as its epilogue: the reader's fused program (ops/program.py), the
      instructions it returns and their types, the types of the program's inputs, and the
      input (``slot``) that is the producer's result;
    * ``compile(node) -> fn | None``: the fused node's implementation ``fn(*arrays, out=None)
      -> tuple`` (kernels/), None where it cannot run it (the reference kernel then runs);
    * ``c_step(node) -> CStep | None``: the fused node as a step of the C graph runner;
    * ``bias_operand(node) -> bool``: a per-channel shift folded into this call
      (transforms/fold_affine.py) had better be the bias operand its ``channel_fold`` rule
      offers than an add for the epilogue: its kernel adds one as it stores, which needs no
      fusion (a depthwise convolution's).
    """

    accepts: Callable[[Any], bool]
    takes: Callable[..., bool]
    compile: Callable[[Any], Any]
    c_step: Callable[[Any], Any] | None = None
    bias_operand: Callable[[Any], bool] | None = None


class Producer(NamedTuple):
    """The op a fused epilogue node runs first (`FusedRule.producer`): ``op`` with ``attrs`` on
    the node's first ``n_inputs`` inputs; its result is the program's input ``slot``."""

    op: Any  # OpDef
    attrs: dict
    n_inputs: int
    slot: int

    def program_inputs(self, node_inputs, result) -> list:
        """The program's inputs given the node's (values or types) and the producer's result."""
        inputs = list(node_inputs[self.n_inputs :])
        inputs.insert(self.slot, result)
        return inputs


class FusedRule(NamedTuple):
    """The op runs a group of other ops as one (ops/fused.py). Each reads a node's attributes:

    * ``members(attrs)``: the group's elementwise ops and reductions, a `Program`
      (ops/program.py), in order;
    * ``outputs(attrs)``: per output of the node, the instruction whose result it is;
    * ``producer(attrs)``: a `Producer` (an epilogue's matmul or convolution), or None.

    The keys holding them are the op's business: tools show an attribute table without them."""

    members: Callable[[dict], Any]
    outputs: Callable[[dict], tuple]
    producer: Callable[[dict], Producer | None]
    keys: tuple = ()  # the attributes the three read (a table of the rest stays readable)


class Layout(NamedTuple):
    """An eager result is channels-last where one of the operands at ``inputs`` is (None: the
    first operand of the result's shape decides, channels-last or row-major)."""

    inputs: tuple | None = None
