"""OpInfos of PyTorch's ``*_copy`` functions, the ``unsafe_*`` splits and ``torch.detach_``
(ops/copy_variants.py); see opinfo.py."""

from .opinfo import FLOATS, OpInfo, Sample, rng

R = rng(5151)


def S(*args, desc="", **kw):
    return Sample(args, kw.pop("kwargs", {}), desc=desc, **kw)


def _x():
    return R.standard_normal((3, 4))


def _samples(*calls):
    """``calls``: (args after the input, description) pairs, each on a (3, 4) input and on a
    strided one."""

    def samples():
        out = []
        for args, desc in calls:
            out.append(S(_x(), *args, desc=desc))
            out.append(S(_x(), *args, desc=desc + ", strided", strided=True))
        return out

    return samples


CASES = {
    "as_strided_copy": (((2, 2), (1, 2)), "overlapping"),
    "detach_copy": ((), "detached"),
    "diagonal_copy": ((1,), "offset 1"),
    "expand_copy": (((2, 3, 4),), "new leading dim"),
    "permute_copy": (((1, 0),), "swap"),
    "select_copy": ((1, 2), "dim 1"),
    "split_copy": ((2, 1), "pieces of 2"),
    "split_with_sizes_copy": (([1, 3], 1), "1 and 3"),
    "squeeze_copy": ((), "nothing to squeeze"),
    "t_copy": ((), "transposed"),
    "transpose_copy": ((0, 1), "swap"),
    "unbind_copy": ((1,), "columns"),
    "unfold_copy": ((1, 2, 1), "windows of 2"),
    "unsqueeze_copy": ((1,), "dim 1"),
    "view_copy": (((4, 3),), "reshaped"),
    "alias_copy": ((), "copy"),
    "slice_copy": ((1, 1, 4, 2), "every other column"),
    "unsafe_split": ((2,), "rows"),
    "unsafe_split_with_sizes": (([1, 2],), "1 and 2 rows"),
    "unsafe_chunk": ((2, 1), "two chunks"),
}

# as_strided reads a contiguous tensor's own elements (ops/strided.py): no strided sample
_NO_STRIDED = {"as_strided_copy"}
_DETACHED = (
    "ember's result is detached, as detach()'s; PyTorch 2.13's detach_copy returns a tensor "
    "that requires grad, whose backward is not implemented"
)


def _only_contiguous(samples):
    return lambda: [s for s in samples() if not s.strided]


OPS = [
    OpInfo(
        name,
        _only_contiguous(_samples(case)) if name in _NO_STRIDED else _samples(case),
        dtypes=FLOATS,
        spellings=("T",),
    )
    for name, case in CASES.items()
    if name != "detach_copy"
]
OPS += [
    OpInfo(
        "detach_copy",
        _samples(CASES["detach_copy"]),
        dtypes=FLOATS,
        spellings=("T",),
        grad=False,
        differences={"detached": _DETACHED, "detached, strided": _DETACHED},
    ),
    # (detached in place: no gradient; the harness's strided input is a view in PyTorch, which
    # refuses to detach it in place, and a tensor of its own in ember)
    OpInfo(
        "detach_",
        _samples(((), "in place")),
        dtypes=FLOATS,
        spellings=("T",),
        grad=False,
        differences={"in place, strided": "a view in PyTorch, not in ember (see above)"},
    ),
]
