"""``torch.distributions.utils``' helpers that programs import directly."""

from __future__ import annotations

from functools import cached_property as lazy_property

from ._util import broadcast_all, clamp_probs, logits_to_probs, probs_to_logits

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs", "probs_to_logits"]
