"""How an op's fast rule and its NumPy kernel combine into `OpDef.run` (`_preferring`): the
fast rule first, the kernel where it declines; where the rule surely declines (its
`declines_unless` gate), the kernel alone; complex operands kept off C code. And what the eager
mode keeps per signature as the call's runner (`runner_for`)."""

from __future__ import annotations

import numpy as np

__all__ = ["runner_for"]


def runner_for(op, arrays):
    """What ``op.run`` calls on operands like ``arrays`` (their shapes and dtypes decide):
    ``op.kernel`` where the fast rule's gate (``op.gate``: dtype classes and a size) surely
    declines them, as `_preferring`'s run tests it, else ``op.run`` (the gate tested again at
    each call, the fast rule tried)."""
    gate = op.gate
    if gate is None:
        return op.run
    classes, size = gate
    shape = arrays[0].shape if arrays else ()
    product, same = 1, True
    for a in arrays:
        n = a.size
        if n >= size or type(a.dtype) in classes:
            return op.run
        product *= n
        same = same and a.shape == shape
    return op.kernel if same or product < size else op.run


def _preferring(fast, kernel, real_only: bool = False):
    """``fast``'s result, or ``kernel``'s where ``fast`` declines (returns None). A fast rule
    may say when it surely declines, ``fast.declines_unless = (dtypes, size)``: where no
    operand's dtype is in ``dtypes`` and the operands' broadcast result surely holds fewer than
    ``size`` elements (ops/_half.py's elementwise loops on small float32 operands); the kernel
    then runs without calling it. ``real_only``: the kernel runs where an operand is complex
    (`_real_only`, in this one function rather than a second one around ``fast``)."""
    if real_only and getattr(fast, "declines_unless", None) is None:

        def run(*arrays, **attrs):
            for a in arrays:
                if (a.dtype.kind if type(a) is _ndarray else _kind(a)) == "c":
                    return kernel(*arrays, **attrs)
            result = fast(*arrays, **attrs)
            return kernel(*arrays, **attrs) if result is None else result

        run.__name__ = getattr(kernel, "__name__", "run")
        return run
    if real_only:
        fast = _real_only(fast)
    gate = getattr(fast, "declines_unless", None)
    if gate is not None:
        dtypes, size = gate
        # (a dtype's class stands for it: hashed by identity, and a dtype of one of these
        # classes the rule does not take, a byte-swapped one, only calls the rule for nothing)
        classes = frozenset(type(d) for d in dtypes)

        def run(*arrays, **attrs):
            # (every small eager elementwise call passes here) operands that broadcast make a
            # result no larger than the product of their sizes (each result dimension is one
            # operand's): below ``size`` it is small too, without working out its shape
            if len(arrays) == 2:  # (the common calls, spelled out)
                a, b = arrays
                na, nb = a.size, b.size
                if (
                    na < size
                    and nb < size
                    and type(a.dtype) not in classes
                    and type(b.dtype) not in classes
                    and (na * nb < size or a.shape == b.shape)
                ):
                    return kernel(a, b, **attrs)
            elif len(arrays) == 1:
                a = arrays[0]
                if a.size < size and type(a.dtype) not in classes:
                    return kernel(a, **attrs)
            else:
                shape = arrays[0].shape if arrays else ()
                product = 1
                same = True
                for a in arrays:
                    n = a.size
                    if n >= size or type(a.dtype) in classes:
                        break
                    product *= n
                    if same and a.shape != shape:
                        same = False
                else:
                    if same or product < size:
                        return kernel(*arrays, **attrs)
            result = fast(*arrays, **attrs)
            return kernel(*arrays, **attrs) if result is None else result

    else:

        def run(*arrays, **attrs):
            result = fast(*arrays, **attrs)
            return kernel(*arrays, **attrs) if result is None else result

    run.__name__ = getattr(kernel, "__name__", "run")
    return run


def _real_only(fast):
    """``fast`` declining (None) where an operand is a complex array."""

    def real_fast(*arrays, **attrs):
        for a in arrays:
            if _kind(a) == "c":
                return None
        return fast(*arrays, **attrs)

    return real_fast


def _kind(a):
    """The NumPy kind of operand ``a``'s dtype (None for an operand without one, an absent
    bias)."""
    return getattr(getattr(a, "dtype", None), "kind", None)


_ndarray = np.ndarray
