"""``ember.quasirandom``: PyTorch's ``torch.quasirandom.SobolEngine``, point for point.

The direction numbers are SciPy's (``scipy.stats.qmc.Sobol``'s Joe-Kuo numbers at 30 bits,
PyTorch's ``sobolstate`` exactly); the sequence is PyTorch's Gray-code walk over them, each
point the running XOR of one direction number per dimension, scaled by 2**-30. A scrambled
engine is PyTorch's too: a random digital shift and random lower-triangular matrices (unit
diagonal) applied to the direction numbers (linear matrix scrambling), both drawn with
``randint`` from a generator seeded with ``seed``, or from the default generator without one,
so ``ember.manual_seed`` then gives PyTorch's points."""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from ._missing import module_getattr
from .errors import ArgumentError
from .ops import _registry

__all__ = ["SobolEngine"]

MAXDIM = 21201  # (the direction numbers' dimensions, PyTorch's and SciPy's)


MAXBIT = 30  # (bits of each coordinate: PyTorch's SobolEngine.MAXBIT)


def _direction_numbers(dimension: int) -> np.ndarray:
    """PyTorch's unscrambled ``sobolstate``: (dimension, MAXBIT) int64 direction numbers."""
    from scipy.stats import qmc

    engine = qmc.Sobol(dimension, scramble=False, bits=MAXBIT)
    return np.asarray(engine._sv, dtype=np.int64).reshape(dimension, MAXBIT)


def _scrambled(state: np.ndarray, ltm: np.ndarray) -> np.ndarray:
    """PyTorch's ``_sobol_engine_scramble_``: each direction number multiplied (over GF(2)) by
    its dimension's lower-triangular matrix with a unit diagonal, row p of which, read as the
    integer with bit MAXBIT-1-k for column k, gives bit MAXBIT-1-p of the result."""
    ltm = ltm.copy()
    ltm[:, np.arange(MAXBIT), np.arange(MAXBIT)] = 1
    rows = (ltm << np.arange(MAXBIT - 1, -1, -1, dtype=np.int64)).sum(-1)  # (d, p)
    parity = np.bitwise_count(rows[:, None, :] & state[:, :, None]) & 1  # (d, j, p)
    return (parity.astype(np.int64) << np.arange(MAXBIT - 1, -1, -1, dtype=np.int64)).sum(-1)


def _rightmost_zero(n: int) -> int:
    """The index of ``n``'s lowest zero bit (the direction number a Gray-code step flips)."""
    return ((n + 1) & -(n + 1)).bit_length() - 1


class SobolEngine:
    """``SobolEngine(dimension, scramble=False, seed=None)``: ``draw(n)``, ``draw_base2(m)``,
    ``fast_forward(n)``, ``reset()``; ``num_generated`` counts the points drawn."""

    MAXBIT = MAXBIT
    MAXDIM = MAXDIM

    def __init__(self, dimension: int, scramble: bool = False, seed: int | None = None):
        if isinstance(dimension, bool) or not isinstance(dimension, int):
            raise ArgumentError(f"dimension must be an int, got {dimension!r}", op="SobolEngine")
        if not 1 <= dimension <= MAXDIM:
            raise ArgumentError(
                f"Supported range of dimensionality for SobolEngine is [1, {MAXDIM}]",
                op="SobolEngine",
            )
        self.dimension, self.scramble, self.seed = dimension, bool(scramble), seed
        self._state = _direction_numbers(dimension)
        if self.scramble:
            self._scramble()
        else:
            self._shift = np.zeros(dimension, np.int64)
        self._quasi = self._shift.copy()
        # (PyTorch's: the shift divided in the default dtype when the engine is made)
        first = _registry.PUBLIC["tensor"](self._shift) / 2**MAXBIT
        self._first_point = first.reshape(1, -1)
        self.num_generated = 0

    def _scramble(self) -> None:
        """PyTorch's draws, in its order: the shift's bits, then the matrices."""
        generator = None
        if self.seed is not None:
            from .random import Generator

            generator = Generator().manual_seed(self.seed)
        randint = _registry.PUBLIC["randint"]
        bits = randint(2, (self.dimension, MAXBIT), generator=generator).numpy()
        self._shift = bits @ (np.int64(1) << np.arange(MAXBIT, dtype=np.int64))
        ltm = randint(2, (self.dimension, MAXBIT, MAXBIT), generator=generator).numpy()
        self._state = _scrambled(self._state, np.tril(ltm))

    def _walk(self, n: int, start: int) -> np.ndarray:
        """The next ``n`` points' integers, the Gray-code steps from number ``start``."""
        out = np.empty((n, self.dimension), np.int64)
        quasi = self._quasi
        for i in range(n):
            quasi = quasi ^ self._state[:, _rightmost_zero(start + i)]
            out[i] = quasi
        self._quasi = quasi
        return out

    def reset(self) -> SobolEngine:
        """Back to the sequence's first point."""
        self._quasi = self._shift.copy()
        self.num_generated = 0
        return self

    def draw(self, n: int = 1, out=None, dtype=None):
        """The next ``n`` points, an (n, dimension) tensor (the default float dtype)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ArgumentError(f"n must be a non-negative int, got {n!r}", op="SobolEngine.draw")
        kind = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
        if self.num_generated == 0:
            first = self._first_point.to(kind)
            rest = self._points(self._walk(n - 1, 0), kind) if n > 1 else None
            result = first if rest is None else _registry.PUBLIC["cat"]([first, rest], 0)
        else:
            result = self._points(self._walk(n, self.num_generated - 1), kind)
        self.num_generated += n
        if out is not None:
            out.resize_(result.shape)
            out.copy_(result)
            return out
        return result

    @staticmethod
    def _points(ints: np.ndarray, kind):
        # (the integers in the result's dtype, then scaled: exact, a power of two)
        return _registry.PUBLIC["tensor"](ints.astype(kind.np) * kind.np.type(2.0**-MAXBIT))

    def draw_base2(self, m: int, out=None, dtype=None):
        """The next ``2 ** m`` points; as PyTorch, the total drawn stays a power of two."""
        total = self.num_generated + 2**m
        if total & (total - 1):
            raise ArgumentError(
                f"The balance properties of Sobol' points require n to be a power of 2. "
                f"{self.num_generated} points have been previously generated, then: "
                f"n={self.num_generated}+2**{m}={total}. If you still want to do this, please "
                "use 'SobolEngine.draw()' instead.",
                op="SobolEngine.draw_base2",
            )
        return self.draw(2**m, out, dtype)

    def fast_forward(self, n: int) -> SobolEngine:
        """Skip the next ``n`` points."""
        if self.num_generated == 0:
            self._walk(n - 1, 0)
        else:
            self._walk(n, self.num_generated - 1)
        self.num_generated += n
        return self

    def __repr__(self) -> str:
        parts = [f"dimension={self.dimension}"]
        if self.scramble:
            parts.append("scramble=True")
        if self.seed is not None:
            parts.append(f"seed={self.seed}")
        return f"SobolEngine({', '.join(parts)})"


__getattr__ = module_getattr(__name__, globals())
