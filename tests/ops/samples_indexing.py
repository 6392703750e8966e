"""Conformance samples for ops/indexing.py, ops/selection.py and ops/gather.py: basic and
advanced indexing, index_put (setitem), masks, gather/scatter and their adjoints, one_hot and
nonzero."""

import numpy as np

import ember

from .harness import Sample, rng

r = rng(7)
A = r.standard_normal((3, 4))
B = r.standard_normal((2, 3, 4))
MASK = r.standard_normal((3, 4)) > 0
ROWS = np.array([True, False, True])
DUP = np.array([2, 0, 2, 2])  # repeated indices: their gradients must accumulate


def torch():
    import torch as t

    return t


def _to_torch(index):
    if isinstance(index, tuple):
        return tuple(_to_torch(i) for i in index)
    return torch().tensor(index) if isinstance(index, np.ndarray) else index


def _getitem(name, index, x=B):
    SAMPLES.append(
        Sample(f"getitem/{name}", lambda a: a[index], (x,), torch_fn=lambda a: a[_to_torch(index)])
    )


SAMPLES: list[Sample] = []

# basic indexing (a view) ------------------------------------------------------------------
_getitem("int", 1)
_getitem("negative-int", (-1, -2))
_getitem("all-ints", (1, 2, 3))
_getitem("slices", (slice(None), slice(1, 3), slice(None, None, 2)))
_getitem("slice-past-end", (slice(1, 10),))
_getitem("none-ellipsis", (None, Ellipsis, 0, None))
_getitem("empty-slice", (slice(2, 1),))
SAMPLES.append(
    Sample(
        "getitem/negative-step",
        lambda a: a[:, ::-1, 3:0:-2],
        (B,),
        # PyTorch has no negative steps: flip, then the equivalent forward slice
        torch_fn=lambda a: a.flip(1).flip(2)[:, :, 0:3:2],
    )
)

# advanced indexing ---------------------------------------------------------------------------
_getitem("list-duplicates", [1, 0, 1, 1])
_getitem("array-duplicates", (slice(None), DUP[:3]))
_getitem("two-tensors", ([0, 1, 1], [2, 2, 0]))
_getitem("adjacent-after-slice", (slice(None), [0, 2, 2], [1, 1, 3]))
_getitem("separated", ([1, 0], slice(None), [3, 3]))  # advanced dims move to the front
_getitem("int-and-tensor", (0, slice(None), [1, 3, 3]))  # PyTorch: the int is basic
_getitem("broadcast-indices", (np.array([[0], [1]]), slice(None), np.array([0, 3, 3])))
_getitem("none-and-tensor", (None, [1, 1], Ellipsis, 2))
_getitem("mask", MASK, x=A)
_getitem("mask-rows", (slice(None), ROWS))
_getitem("mask-and-slice", (ROWS, slice(1, 3)), x=A)
SAMPLES += [
    Sample(
        "getitem/tensor-index",
        lambda a, i: a[i],
        (A, np.array([[2, 2], [0, 1]])),
        torch_fn=lambda a, i: a[i],
    ),
    Sample(
        "getitem/bool-tensor",
        lambda a, m: a[m],
        (A, MASK),
        torch_fn=lambda a, m: a[m],
    ),
    Sample(
        "getitem/chained-views",
        lambda a: a[1:][:, 2][0],
        (B,),
        torch_fn=lambda a: a[1:][:, 2][0],
    ),
]


def _double(f):
    """x -> df/dx, differentiable again (so its gradient runs the VJPs of the adjoints)."""

    def run(a):
        with ember.enable_grad():
            leaf = a if a.requires_grad else a.detach().requires_grad_()
            return ember.autograd.grad(f(leaf), leaf, create_graph=True)[0]

    return run


def _torch_double(f):
    def run(a):
        leaf = a if a.requires_grad else a.detach().requires_grad_()
        return torch().autograd.grad(f(leaf), leaf, create_graph=True)[0]

    return run


# index_put / setitem ---------------------------------------------------------------------


def _setitem(index, torch_index=None):
    def run(index_now):
        def f(a, v):
            y = a * 1  # setitem on a non-leaf: gradients flow to a (unwritten part) and v
            y[index_now] = v
            return y

        return f

    return run(index), run(index if torch_index is None else torch_index)


_f, _t = _setitem((0, slice(1, 3)))
SAMPLES.append(Sample("index_put/setitem-basic", _f, (A, r.standard_normal(2)), torch_fn=_t))
_f, _t = _setitem((slice(None), [0, 3]))
SAMPLES.append(
    Sample("index_put/setitem-broadcast", _f, (A, r.standard_normal((1, 2))), torch_fn=_t)
)
_f, _t = _setitem(MASK)
SAMPLES.append(Sample("index_put/setitem-mask", _f, (A, r.standard_normal(())), torch_fn=_t))
SAMPLES += [
    Sample(
        "index_put/scalar",
        lambda a: ember.index_put(a, ([0, 2], slice(None)), 0.5),
        (A,),
        torch_fn=lambda a: torch().index_put(
            a, (torch().tensor([0, 2]),), torch().tensor(0.5, dtype=a.dtype)
        ),
    ),
    Sample(
        "index_put/tensor-indices",
        lambda a, i, v: a.index_put((i,), v),
        (A, np.array([2, 0]), r.standard_normal((2, 4))),
        torch_fn=lambda a, i, v: a.index_put((i,), v),
    ),
    Sample(
        # exercises index_backward forward and its VJP (value is differentiated)
        "index_put/accumulate-duplicates",
        lambda a, i, v: ember.index_put(a, (i, slice(1, 3)), v, accumulate=True),
        (A, np.array([1, 1, 0]), r.standard_normal((3, 2))),
        torch_fn=lambda a, i, v: torch().index_put(
            a, (i[:, None], torch().arange(1, 3)), v, accumulate=True
        ),
    ),
    Sample(
        # exercises getitem_backward forward and its VJP
        "index_put/accumulate-basic",
        lambda a, v: ember.index_put(a, (slice(1, 3), 2), v, accumulate=True),
        (A, r.standard_normal(2)),
        torch_fn=lambda a, v: torch().index_put(
            a, (torch().arange(1, 3), torch().tensor(2)), v, accumulate=True
        ),
    ),
    Sample(
        # the gradient of a[idx]**2, itself differentiated: runs index_backward's VJP
        "index_put/double-backward",
        _double(lambda a: (a[[0, 0, 2]] ** 2).sum()),
        (A,),
        torch_fn=_torch_double(lambda a: (a[[0, 0, 2]] ** 2).sum()),
    ),
    Sample(
        "getitem/double-backward",
        _double(lambda a: (a[1:, ::2] ** 3).sum()),
        (A,),
        torch_fn=_torch_double(lambda a: (a[1:, ::2] ** 3).sum()),
    ),
]

# masks -----------------------------------------------------------------------------------
SAMPLES += [
    Sample(
        "masked_fill",
        lambda a, m: a.masked_fill(m, -1.5),
        (A, MASK),
        torch_fn=lambda a, m: a.masked_fill(m, -1.5),
    ),
    Sample(
        "masked_fill/broadcast-tensor-value",
        lambda a, m, v: ember.masked_fill(a, m, v),
        (A, ROWS[:, None], r.standard_normal(())),
        torch_fn=lambda a, m, v: torch().masked_fill(a, m, v),
    ),
    Sample(
        "masked_select",
        lambda a, m: ember.masked_select(a, m),
        (A, ROWS[:, None]),
        torch_fn=lambda a, m: torch().masked_select(a, m),
    ),
    Sample(
        "take",
        lambda a, i: ember.take(a, i),
        (A, np.array([[11, 0], [5, 11]])),
        torch_fn=lambda a, i: torch().take(a, i),
    ),
    Sample(
        "select/narrow",
        lambda a: (a.select(-1, 2), ember.narrow(a, 1, 1, 2), a.narrow(0, -1, 1)),
        (B,),
        torch_fn=lambda a: (a.select(-1, 2), torch().narrow(a, 1, 1, 2), a.narrow(0, -1, 1)),
    ),
    Sample(
        "nonzero",
        lambda m: (ember.nonzero(m), ember.argwhere(m), m.nonzero(as_tuple=True)[1]),
        (MASK,),
        torch_fn=lambda m: (torch().nonzero(m), torch().argwhere(m), m.nonzero(as_tuple=True)[1]),
        grad=False,
    ),
]

# gather / scatter ------------------------------------------------------------------------
GIDX = np.array([[0, 2, 1, 0], [2, 2, 0, 1]])
SAMPLES += [
    Sample(
        "gather/dim0",
        lambda a, i: ember.gather(a, 0, i),
        (A, GIDX),
        torch_fn=lambda a, i: torch().gather(a, 0, i),
    ),
    Sample(
        "gather/negative-dim-small-index",
        lambda a, i: a.gather(-1, i),
        (B, np.array([[[3, 3], [0, 1]]])),
        torch_fn=lambda a, i: a.gather(-1, i),
    ),
    Sample(
        "scatter_add/duplicates",
        lambda a, i, s: ember.scatter_add(a, 0, i, s),
        (A, GIDX, r.standard_normal((2, 4))),
        torch_fn=lambda a, i, s: torch().scatter_add(a, 0, i, s),
    ),
    Sample(
        "scatter_add/larger-src",
        lambda a, i, s: a.scatter_add(1, i, s),
        (A, np.array([[3, 3], [0, 1]]), r.standard_normal((3, 3))),
        torch_fn=lambda a, i, s: a.scatter_add(1, i, s),
        torch_grad=False,  # PyTorch's own backward rejects a src larger than the index
    ),
    Sample(
        "scatter",
        lambda a, i, s: ember.scatter(a, 1, i, s),
        (A, np.array([[3, 0], [1, 2], [0, 3]]), r.standard_normal((3, 2))),
        torch_fn=lambda a, i, s: torch().scatter(a, 1, i, s),
    ),
    Sample(
        "scatter/value",
        lambda a, i: a.scatter(0, i, value=2.5),
        (A, np.array([[2, 0, 1, 1]])),
        torch_fn=lambda a, i: a.scatter(0, i, value=2.5),
    ),
    Sample(
        "index_select/duplicates",
        lambda a, i: ember.index_select(a, -1, i),
        (B, DUP),
        torch_fn=lambda a, i: torch().index_select(a, -1, i),
    ),
    Sample(  # (a result large enough for the C gather along the last axis)
        "index_select/last-axis-large",
        lambda a, i: ember.index_select(a, -1, i),
        (r.standard_normal((4, 16, 40)), r.integers(0, 40, 96)),
        torch_fn=lambda a, i: torch().index_select(a, -1, i),
    ),
    Sample(
        "index_add/duplicates",
        lambda a, i, s: a.index_add(1, i, s, alpha=2.0),
        (A, np.array([3, 0, 3]), r.standard_normal((3, 3))),
        torch_fn=lambda a, i, s: a.index_add(1, i, s, alpha=2.0),
    ),
    Sample(
        "take_along_dim",
        lambda a, i: (ember.take_along_dim(a, i, 1), ember.take_along_dim(a, i[:1])),
        (A, np.array([[3, 3], [0, 1], [2, 0]])),
        torch_fn=lambda a, i: (torch().take_along_dim(a, i, 1), torch().take_along_dim(a, i[:1])),
    ),
    Sample(
        "take_along_dim/broadcast",
        lambda a, i: ember.take_along_dim(a, i, dim=0),
        (r.standard_normal((3, 1, 4)), np.array([[[2], [0]]])),
        torch_fn=lambda a, i: torch().take_along_dim(a, i, dim=0),
    ),
    Sample(
        "one_hot",
        lambda t: (ember.nn.functional.one_hot(t), ember.one_hot(t, 6)),
        (np.array([[1, 0], [4, 4]]),),
        torch_fn=lambda t: (
            torch().nn.functional.one_hot(t),
            torch().nn.functional.one_hot(t, 6),
        ),
        grad=False,
    ),
]
