"""``torch.nn.modules.module``'s names, from where ember defines them."""

from ..hooks import (  # noqa: F401
    RemovableHandle,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)
from ..module import Module  # noqa: F401
