"""``torch.autograd.profiler``: the older profiler API, on ember.profiler's recorder.

``with ember.autograd.profiler.profile(record_shapes=True) as prof: ...`` then
``prof.key_averages().table(sort_by="self_cpu_time_total")``, and ``record_function``
ranges, as programs written for PyTorch before torch.profiler use them."""

from __future__ import annotations

from .profiler import profile as _profile
from .profiler import record_function

__all__ = ["profile", "record_function"]


class profile(_profile):  # noqa: N801  (PyTorch's name)
    """The legacy profiler: ``enabled``, ``use_cuda`` / ``use_device`` (nothing to record off
    the CPU), ``record_shapes``, ``with_flops``, ``profile_memory``, ``with_stack``,
    ``with_modules``, ``use_kineto``, ``experimental_config``: the same recording as
    `ember.profiler.profile`."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False, use_device=None,
                 record_shapes: bool = False, with_flops: bool = False,
                 profile_memory: bool = False, with_stack: bool = False,
                 with_modules: bool = False, use_kineto: bool = False, use_cpu: bool = True,
                 experimental_config=None, acc_events: bool = False):  # fmt: skip
        super().__init__(
            record_shapes=record_shapes, profile_memory=profile_memory, enabled=enabled
        )
