"""``ember.quasirandom``: PyTorch's ``torch.quasirandom.SobolEngine``, on SciPy's Sobol
generator (``scipy.stats.qmc.Sobol``: the Joe-Kuo direction numbers PyTorch uses too, so the
unscrambled sequence is PyTorch's, point for point). A scrambled engine (``scramble=True``)
draws its scrambling from ``seed``, or, without one, from ember's global generator (so
``ember.manual_seed`` fixes it); its points are a valid scrambled Sobol sequence, not
PyTorch's (its scrambling consumes PyTorch's own generator)."""

from __future__ import annotations

import warnings

import numpy as np

from . import dtypes as dt
from ._missing import module_getattr
from .errors import ArgumentError
from .ops import _registry

__all__ = ["SobolEngine"]

MAXDIM = 21201  # (the direction numbers' dimensions, PyTorch's and SciPy's)


class SobolEngine:
    """``SobolEngine(dimension, scramble=False, seed=None)``: ``draw(n)``, ``draw_base2(m)``,
    ``fast_forward(n)``, ``reset()``; ``num_generated`` counts the points drawn."""

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
        if self.scramble and seed is None:  # (ember's generator decides: manual_seed fixes it)
            seed = int(_registry.PUBLIC["randint"](0, 2**31 - 1, (1,)).item())
        self._seed_used = seed
        self.reset()

    def _engine(self):
        from scipy.stats import qmc

        rng = np.random.default_rng(self._seed_used) if self.scramble else None
        try:
            return qmc.Sobol(self.dimension, scramble=self.scramble, rng=rng)
        except TypeError:  # (SciPy before 1.15 names it ``seed``)
            return qmc.Sobol(self.dimension, scramble=self.scramble, seed=rng)

    def reset(self) -> SobolEngine:
        """Back to the sequence's first point."""
        self._sobol = self._engine()
        self.num_generated = 0
        return self

    def draw(self, n: int = 1, out=None, dtype=None):
        """The next ``n`` points, an (n, dimension) tensor (the default float dtype)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ArgumentError(f"n must be a non-negative int, got {n!r}", op="SobolEngine.draw")
        with warnings.catch_warnings():  # (SciPy warns of counts not a power of two;
            warnings.simplefilter("ignore")  # PyTorch's draw does not: draw_base2 checks)
            points = self._sobol.random(n) if n else np.zeros((0, self.dimension))
        self.num_generated += n
        return self._tensor(points, out, dtype)

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
        if n:
            self._sobol.fast_forward(n)
            self.num_generated += n
        return self

    def _tensor(self, points: np.ndarray, out, dtype):
        kind = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
        result = _registry.PUBLIC["tensor"](points.astype(kind.np))
        if out is not None:
            out.resize_(result.shape)
            out.copy_(result)
            return out
        return result

    def __repr__(self) -> str:
        extra = f", scramble=True, seed={self.seed}" if self.scramble else ""
        return f"SobolEngine(dimension={self.dimension}{extra})"


__getattr__ = module_getattr(__name__, globals())
