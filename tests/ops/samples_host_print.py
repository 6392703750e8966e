"""Conformance samples for ``host_print`` (ops/host_print.py): the op hands its operands'
values to its printer and gives a 0-d False; its shape rule against its kernel, traced and
eager. What a compiled function prints is tests/test_sem59_compile_print.py's."""

import numpy as np

from ember.ops.host_print import host_print

from .harness import Sample, rng

r = rng(59)
X = r.standard_normal((2, 3))
PRINTED: list = []


def _printer(*arrays):
    PRINTED.append([np.asarray(a).copy() for a in arrays])


SAMPLES = [
    Sample(
        "host_print/two-operands",
        lambda x, i: host_print([x, i], _printer),
        (X, np.arange(4)),
        torch_fn=lambda x, i: x.new_zeros((), dtype=bool) if hasattr(x, "new_zeros") else False,
        grad=False,
    ),
]
