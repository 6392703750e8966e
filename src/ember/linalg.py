"""``ember.linalg``: PyTorch's ``torch.linalg`` names for the norms and singular values
(defined in ops/norms.py): ``vector_norm``, ``matrix_norm``, ``norm`` and ``svdvals``.

They are not also ``ember.<name>``: ``ember.norm`` is ``torch.norm``, whose defaults differ."""

from .ops.norms import linalg_norm as norm
from .ops.norms import matrix_norm, svdvals, vector_norm

__all__ = ["matrix_norm", "norm", "svdvals", "vector_norm"]
