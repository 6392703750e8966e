"""``ember.utils.data.dataloader``: PyTorch's ``torch.utils.data.dataloader`` path."""

from ...data import DataLoader, default_collate, default_convert, get_worker_info

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]
