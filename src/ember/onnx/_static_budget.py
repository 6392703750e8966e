"""How much the static values of one run of an ONNX graph may add up to.

A node whose inputs are all static is computed while importing (importer.py folds it), and a
run keeps every value it computed until it ends. `check_size` holds each value to the
machine's memory, but not their sum: a 500-byte model of forty ``ConstantOfShape`` nodes, each
a gigabyte, kept forty gigabytes, and the system killed the process. A real model folds shape
arithmetic and at most a few copies of its weights (dequantized, cast or transposed), so the
static arrays one run keeps may own at most `FLOOR` plus `PER_WEIGHT_BYTE` times the bytes of
the initializers it can read, and never more than the machine's memory; past that the run
raises an `OnnxError` naming the node.
"""

from __future__ import annotations

import numpy as np

from ..errors import OnnxError
from ._model import memory_bytes

FLOOR = 2 << 30
PER_WEIGHT_BYTE = 8


def _root(array: np.ndarray) -> np.ndarray:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


class StaticBudget:
    """The static arrays one run of a graph has made, against its limit."""

    def __init__(self, weights: dict, weight_bytes: int):
        # the initializers are the file's own bytes: views of them make nothing new
        self._seen = {id(_root(a)) for a in weights.values() if isinstance(a, np.ndarray)}
        self.limit = min(memory_bytes(), FLOOR + PER_WEIGHT_BYTE * weight_bytes)
        self.kept = 0

    def charge(self, values, label: str) -> None:
        """Count the arrays among ``values`` (a node's outputs) that own new memory."""
        for value in values:
            if not isinstance(value, np.ndarray):
                continue
            root = _root(value)
            if id(root) in self._seen:
                continue
            self._seen.add(id(root))
            self.kept += root.nbytes
            if self.kept > self.limit:
                raise OnnxError(
                    f"{label}: the values computed from the model's constants so far need "
                    f"{self.kept:,} bytes at once, more than the {self.limit:,} a model with "
                    "these weights may keep (its folded values are sizes and a few copies of "
                    "its weights): the model is damaged or hostile"
                )
