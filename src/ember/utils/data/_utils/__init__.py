"""``torch.utils.data._utils``: the module path older programs import ``default_collate``
from (``from torch.utils.data._utils.collate import default_collate``)."""

from . import collate

__all__ = ["collate"]
