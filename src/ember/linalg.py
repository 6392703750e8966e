"""``ember.linalg``: PyTorch's ``torch.linalg`` names. The norms and singular values are
defined in ops/norms.py (``vector_norm``, ``matrix_norm``, ``norm``, ``svdvals``), the systems
and determinants in ops/decompositions.py (``inv``, ``slogdet``, ``solve``,
``solve_triangular``, ``cholesky``), the factorizations in ops/spectral.py (``qr``, ``eigh``,
``eigvalsh``, ``svd``, ``pinv``, and ``det``, whose gradient uses the SVD) and the composites
in ops/linalg_composite.py (``lstsq``, ``matrix_power``, ``matrix_rank``, ``multi_dot``,
``cross``, ``vecdot``, ``diagonal``, ``cond``, ``vander``, ``tensorinv``, ``tensorsolve``);
``matrix_exp`` is in ops/matrix_functions.py and ``matmul`` is `ember.matmul`. `LinAlgError`
is what a singular or non-positive-definite input raises.

Not all are also ``ember.<name>``: ``ember.norm`` is ``torch.norm``, whose defaults differ, and
``ember.svd`` / ``ember.qr`` are PyTorch's older functions (``ember.svd`` returns V, not Vh)."""

from .errors import LinAlgError
from .ops.decompositions import cholesky, inv, slogdet, solve, solve_triangular
from .ops.linalg import matmul
from .ops.linalg_composite import (
    cond,
    cross,
    diagonal,
    lstsq,
    matrix_power,
    matrix_rank,
    multi_dot,
    tensorinv,
    tensorsolve,
    vander,
    vecdot,
)
from .ops.matrix_functions import matrix_exp
from .ops.norms import linalg_norm as norm
from .ops.norms import matrix_norm, svdvals, vector_norm
from .ops.spectral import det, eigh, eigvalsh, pinv, qr, svd

__all__ = [
    "LinAlgError",
    "cholesky",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eigh",
    "eigvalsh",
    "inv",
    "lstsq",
    "matmul",
    "matrix_exp",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_triangular",
    "svd",
    "svdvals",
    "tensorinv",
    "tensorsolve",
    "vander",
    "vecdot",
    "vector_norm",
]
