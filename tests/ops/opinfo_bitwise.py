"""OpInfos of the bitwise functions (ops/bitwise.py): integer and bool operands, broadcasting,
zero-size inputs and, for the shifts, amounts past the type's width (see opinfo.py)."""

import numpy as np

from .opinfo import OpInfo, Sample, rng


def _logic_samples():
    r = rng(210)
    return [
        Sample(
            (r.integers(-50, 50, (2, 3)), r.integers(-50, 50, (2, 3))),
            desc="same",
            grad=False,
        ),
        Sample((r.integers(0, 9, (3, 1)), r.integers(0, 9, (4,))), desc="broadcast", grad=False),
        Sample(
            (r.standard_normal((2, 3)) > 0, r.standard_normal((3,)) > 0), desc="bools", grad=False
        ),
        Sample((np.zeros((0, 2), np.int64), np.ones((2,), np.int64)), desc="zero-size", grad=False),
    ]


def _shift_samples():
    r = rng(211)
    return [
        Sample(
            (r.integers(-1000, 1000, (2, 3)), r.integers(0, 12, (2, 3))), desc="same", grad=False
        ),
        Sample(
            (np.array([[-7], [12345]]), np.array([-2, -1, 0, 5, 63, 64, 100])),
            desc="past the width",
            grad=False,
        ),
        Sample((np.zeros((0, 2), np.int64), np.ones((2,), np.int64)), desc="zero-size", grad=False),
    ]


OPS = [
    OpInfo(name, _logic_samples, promotion=True, grad=False)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor")
]
OPS += [
    OpInfo(name, _shift_samples, promotion=True, grad=False)
    for name in ("bitwise_left_shift", "bitwise_right_shift")
]
OPS.append(
    OpInfo(
        "bitwise_not",
        lambda: [Sample((s.args[0],), desc=s.desc, grad=False) for s in _logic_samples()],
        grad=False,
    )
)
