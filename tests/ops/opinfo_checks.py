"""OpInfo of ``_assert_async`` (ops/checks.py): PyTorch's, on nonzero one-element tensors of
every dtype (it returns None; failing checks are tests/ops/test_checks.py's)."""

import numpy as np

from .opinfo import OpInfo, Sample

OPS = [
    OpInfo(
        "_assert_async",
        lambda: [
            Sample((np.array(2.5),), {}, desc="0-d"),
            Sample((np.array([-1.0]),), {}, desc="one element"),
            Sample((np.array(3.0), "a message"), {}, desc="message"),
        ],
        grad=False,
    ),
]

INTERNAL = {
    "check": "its VJP (the identity on x) has no PyTorch counterpart to compare with: "
    "tests/ops/samples_checks.py checks it by finite differences"
}
