"""The eager mode: run an op's kernel now and, when gradients are needed, record it.

This is the base mode of the dispatcher (``ops._registry.apply``). For each call it

1. applies the op's shape/dtype rule to the operands' types (`TensorType`s read off their
   arrays, which the tape's node keeps too), which validates the operands and raises a precise
   error naming the op, the shapes and the user's line before any kernel runs;
2. runs the op on the operands' arrays (`OpDef.run`: its fast C implementation where it has one
   that applies, else its NumPy kernel);
3. wraps the results as Tensors; outputs of a ``view`` op share input 0's version counter;
4. if grad mode is on and an input requires grad, creates an autograd `Node` for the call and
   makes it the ``grad_fn`` of every floating-point output.

An op with a meta operand (or any op while `_meta.creating`) stops after step 1: its results
are meta stand-ins of the types the rule gave (`_meta_apply`), recorded on the tape as usual.
"""

from __future__ import annotations

import numpy as np

from . import _meta, _views
from . import dtypes as _dt
from .autograd_node import Node
from .errors import EmberError, OutOfMemoryError
from .ops import _registry as _reg
from .ops._memory_format import lay_out_results as _lay_out_results
from .tensor import Tensor
from .types import TensorType

# the NumPy dtypes whose outputs carry gradients (float16, bfloat16, float32, float64, and the
# complex ones)
_FLOATING = frozenset(d.np for d in _dt.ALL_DTYPES if d.is_floating_point) | frozenset(
    d.np for d in _dt.COMPLEX_DTYPES
)


_state = _reg._state  # (the registry's per-thread state: grad mode, modes, autocast)
_wrap = Tensor._wrap
_ndarray = np.ndarray
_new_tuple = tuple.__new__
_BY_NP = _dt._BY_NP
_MULTI_OUTPUT = _views.MULTI_OUTPUT


# an op's kept signatures at most (a program reshaping to many sizes starts over)
_MAX_SIGNATURES = 512


def _types(op, inputs, n: int) -> tuple:
    """The operands' types, for the op's rule and the tape, read off the arrays once (no Size
    made; `autograd_node._tensor_type`, inlined; one and two operands spelled out), the
    ``complex``/``float8`` rules checked; and whether a signature of NumPy dtypes stands for
    them (each dtype ember's own for its NumPy dtype, none special), so the rule's answer may
    be kept (``cached_infer``)."""
    if n == 2:
        x, y = inputs
        data, other = x._data, y._data
        dtype = _BY_NP.get(data.dtype)
        dtype_y = _BY_NP.get(other.dtype)
        keep = dtype is not None and dtype_y is not None
        if not keep:
            dtype = dtype or x.dtype
            dtype_y = dtype_y or y.dtype
        if dtype.special or dtype_y.special:
            keep = False
            if _reg.refuses_special(op):
                _reg._refuse_special(op, inputs)  # (the registry left it to us)
        return (
            _new_tuple(TensorType, (data.shape, dtype)),
            _new_tuple(TensorType, (other.shape, dtype_y)),
        ), keep
    if n == 1:
        x = inputs[0]
        data = x._data
        dtype = _BY_NP.get(data.dtype)
        keep = dtype is not None
        if not keep:
            dtype = x.dtype
        if dtype.special:
            keep = False
            if _reg.refuses_special(op):
                _reg._refuse_special(op, inputs)
        return (_new_tuple(TensorType, (data.shape, dtype)),), keep
    keep = True
    types = []
    for t in inputs:
        data = t._data
        dtype = _BY_NP.get(data.dtype)
        if dtype is None:
            dtype = t.dtype
            keep = False
        if dtype.special:
            keep = False
            if _reg.refuses_special(op):
                _reg._refuse_special(op, inputs)
        types.append(_new_tuple(TensorType, (data.shape, dtype)))
    return tuple(types), keep


class EagerMode(_reg.Mode):
    def apply(self, op: _reg.OpDef, inputs: tuple, attrs: dict):
        # (every eager op call runs this: one pass per loop, no comprehensions where the common
        # arities can be spelled out, no keyword packing for an op called without attributes)
        requires = False
        if _state.grad_enabled:
            for t in inputs:
                # a view whose base changed in place since: its history is replayed first
                # (`_views.is_stale`, inlined: eagerly a base's stamp is its version)
                view_of = t._view_of
                if view_of is not None and view_of[1] is not _MULTI_OUTPUT:
                    now = view_of[0]._vc[0]
                    if now is not t._view_src and now != t._view_src:
                        _views.refresh(t)
                if t._requires_grad:
                    requires = True
        n = len(inputs)
        cache = op.infer_cache
        key = hit = None
        if cache is not None:
            # (an op whose shape rule is pure, ops/_rules.py ``cached_infer``: its answer for a
            # signature it accepted before, without typing the operands or calling it)
            if n == 2:
                a, b = inputs[0]._data, inputs[1]._data
                key = (a.shape, a.dtype, b.shape, b.dtype)
            elif n == 1:
                a = inputs[0]._data
                key = (a.shape, a.dtype)
            elif n == 3:  # (a linear layer with its bias)
                a, b, c = inputs[0]._data, inputs[1]._data, inputs[2]._data
                key = (a.shape, a.dtype, b.shape, b.dtype, c.shape, c.dtype)
            else:
                key = tuple([(t._data.shape, t._data.dtype) for t in inputs])
            if attrs:  # (the types too: 1, 1.0 and True are one dict key)
                key = (key, tuple(attrs.items()), tuple(map(type, attrs.values())))
            try:
                hit = cache.get(key)
            except TypeError:  # (an unhashable attribute: no signature, the rule decides)
                key = None
        if hit is not None:
            in_types, out_type, run = hit
        else:
            in_types, keep = _types(op, inputs, n)
            out_type = op.infer(*in_types, **attrs) if attrs else op.infer(*in_types)
            run = op.run
            if keep and key is not None:
                if len(cache) >= _MAX_SIGNATURES:
                    cache.clear()
                # (what runs on this signature's arrays: the kernel, where the fast rule's
                # gate surely declines them, decided once here rather than at every call)
                run = op.runner_for([t._data for t in inputs])
                cache[key] = (in_types, out_type, run)
        if _meta.active[0] and (_meta._creating[0] or _any_meta(inputs)):
            return _meta_apply(op, inputs, attrs, in_types, out_type, requires)
        try:
            if n == 1:
                data = inputs[0]._data
                result = run(data, **attrs) if attrs else run(data)
            elif n == 2:
                data, other = inputs[0]._data, inputs[1]._data
                result = run(data, other, **attrs) if attrs else run(data, other)
            elif n == 3:
                a, b, c = inputs[0]._data, inputs[1]._data, inputs[2]._data
                result = run(a, b, c, **attrs) if attrs else run(a, b, c)
            else:
                result = run(*[t._data for t in inputs], **attrs)
        except EmberError:
            raise
        except MemoryError as exc:  # (NumPy's: not a RuntimeError, which PyTorch's is)
            shapes = ", ".join(str(tuple(t.shape)) for t in inputs)
            raise OutOfMemoryError(
                f"out of memory: {exc} (inputs of shapes {shapes or 'none'})", op=op.name
            ) from exc
        except (ValueError, TypeError, IndexError, FloatingPointError) as exc:
            shapes = ", ".join(str(tuple(t.shape)) for t in inputs)
            raise EmberError(
                f"kernel failed on inputs of shapes {shapes}: {exc}", op=op.name
            ) from exc
        layout = op.layout  # (PyTorch's memory format of a 4-d or 5-d result: its operands')
        if op.num_outputs == 1:  # (the common case, without the tuples of outputs)
            out = _wrap(result if type(result) is _ndarray else np.asarray(result))
            if layout is not None and 3 < out._data.ndim < 6:
                _lay_out_results(layout, inputs, (out,))
            if op.view or _reg.conformance is not None:
                _mark_outputs(op, attrs, inputs, (out,), (out_type,))
            if requires and _state.grad_enabled and out._data.dtype in _FLOATING:
                out.grad_fn = Node(op, attrs, inputs, (out,), (out_type,), in_types)
                out._requires_grad = True
            return out
        outs = tuple([_wrap(a if type(a) is _ndarray else np.asarray(a)) for a in result])
        out_types = tuple(out_type)
        if layout is not None:
            _lay_out_results(layout, inputs, outs)
        _mark_outputs(op, attrs, inputs, outs, out_types)
        if requires and _state.grad_enabled:
            floating = [t._data.dtype in _FLOATING for t in outs]
            if any(floating):
                node = Node(op, attrs, inputs, outs, out_types, in_types)
                for i, t in enumerate(outs):
                    if floating[i]:
                        t.grad_fn = node
                        t._output_nr = i
                        t._requires_grad = True
        return outs

    def constant(self, array) -> Tensor:
        if type(array) is _ndarray or type(array) is _meta.MetaArray:
            return _wrap(array)
        return _wrap(np.asarray(array))


def _check_rule(op, types, outs) -> None:
    for i, (t, out) in enumerate(zip(types, outs)):
        if tuple(t.shape) != out.shape or t.dtype != out.dtype:
            raise AssertionError(
                f"{op.name}: the shape/dtype rule says output {i} is {tuple(t.shape)} {t.dtype} "
                f"but the kernel produced {out.shape} {out.dtype}"
            )


def _mark_outputs(op, attrs, inputs, outs, out_types) -> None:
    """The conformance check of the outputs' types, and the version counters and view chains
    of a view op's outputs (or of the pieces an aliasing op cuts from input 0)."""
    if _reg.conformance is not None:
        _reg.conformance.forward.add(op.name)
        _check_rule(op, out_types, outs)
    if op.view:
        source = inputs[0]
        src = source._data
        for t in outs:
            # NumPy copies where the strides allow no view (a reshape of transposed data):
            # such a result is a new tensor, as PyTorch's reshape makes one (a view's base
            # is its source's memory's owner: the common case, asked first)
            base = t._data.base
            if (base is not None and (base is src or base is src.base)) or (
                np.may_share_memory(t._data, src)
            ):
                t._vc = source._vc
                t._is_view = True
                # _views.record, inlined (every reshape and slice passes here); the base
                # shares the source's version counter
                chain = source._view_of
                t._view_of = (
                    (chain[0], (*chain[1], (op, attrs)))
                    if chain is not None and chain[1] is not _views.MULTI_OUTPUT
                    else (source, ((op, attrs),))
                )
                t._view_src = source._vc[0]
    elif op.aliases and len(outs) > 1:
        # pieces of input 0 (split, chunk, unbind): they share its memory and version, and
        # an in-place op on one is refused while gradients are recorded, as in PyTorch
        source = inputs[0]
        for t in outs:
            if np.may_share_memory(t._data, source._data):
                t._vc = source._vc
                t._is_view = True
                t._view_of = (source, _views.MULTI_OUTPUT)


_reg.set_base_mode(EagerMode())
_reg.view_marker[:] = [_mark_outputs]


def _any_meta(inputs) -> bool:
    for t in inputs:
        if type(t._data) is _meta.MetaArray:
            return True
    return False


def _meta_apply(op, inputs, attrs, in_types, out_type, requires):
    """``op`` on meta tensors: its results are stand-ins of the types its rule gave (no kernel
    runs, nothing is drawn), recorded on the tape as any op's, so backward runs on meta tensors
    too. CPU operands are taken as meta ones: ember's own composites and VJPs make CPU
    constants (an initial hidden state, a dropout mask) beside a meta input, where PyTorch's
    would be made on the input's device."""
    single = op.num_outputs == 1
    out_types = (out_type,) if single else tuple(out_type)
    outs = tuple([_wrap(_meta.stand_in(ty.shape, ty.dtype.np)) for ty in out_types])
    if requires and _state.grad_enabled:
        node = None
        for i, t in enumerate(outs):
            if t._data.dtype in _FLOATING:
                if node is None:
                    node = Node(op, attrs, inputs, outs, out_types, in_types)
                t.grad_fn = node
                t._output_nr = i
                t._requires_grad = True
    return outs[0] if single else outs
