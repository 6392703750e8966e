"""``ember.distributed.optim``: PyTorch's ``torch.distributed.optim`` names; here
``ZeroRedundancyOptimizer`` (ZeRO stage 1, zero_redundancy_optimizer.py) and the optimizer-state
memory report it gives (`StateMemory`, `optimizer_state_bytes`)."""

from .zero_redundancy_optimizer import StateMemory, ZeroRedundancyOptimizer, optimizer_state_bytes

__all__ = ["StateMemory", "ZeroRedundancyOptimizer", "optimizer_state_bytes"]
