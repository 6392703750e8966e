"""The hooks of every module (``torch.nn.modules.module.register_module_forward_hook`` and
friends, registered in nn/hooks.py): tables keyed by handle id, read by ``Module.__call__``
(nn/hooks.py) and the backward-hook state (nn/backward_hooks.py), run before each module's
own hooks, as PyTorch's. Only ever mutated in place."""

_global_forward_pre_hooks: dict = {}
_global_forward_hooks: dict = {}
_global_forward_hooks_with_kwargs: dict = {}
_global_forward_hooks_always_called: dict = {}
_global_backward_hooks: dict = {}
_global_backward_pre_hooks: dict = {}
