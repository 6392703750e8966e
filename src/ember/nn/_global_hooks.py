"""The hooks of every module (``torch.nn.modules.module.register_module_forward_hook`` and
friends, registered in nn/hooks.py): tables keyed by handle id, read by ``Module.__call__``
(nn/hooks.py) and the backward-hook state (nn/backward_hooks.py), run before each module's
own hooks, as PyTorch's. Only ever mutated in place; `Table`s, so that a change is noted
for ember.function's call guard (a captured graph holds what the hooks did)."""

from ._tables import Table

_global_forward_pre_hooks: dict = Table()
_global_forward_hooks: dict = Table()
_global_forward_hooks_with_kwargs: dict = Table()
_global_forward_hooks_always_called: dict = Table()
_global_backward_hooks: dict = Table()
_global_backward_pre_hooks: dict = Table()
