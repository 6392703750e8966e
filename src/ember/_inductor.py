"""``ember._inductor``: ``torch._inductor.config``, which fast-inference and training scripts set
before compiling (gpt-fast's ``coordinate_descent_tuning = True``,
``triton.unique_kernel_names = True``, ``fx_graph_cache = True``, ``freezing``, ...).

ember compiles with its own passes and C kernels (`ember.compile`), so each setting is kept as
given and changes nothing; reading one back gives what was set (or PyTorch's default). An
unknown setting is refused by name, as ``ember._dynamo.config`` refuses one, so a misspelling
does not pass silently. ``torch.compile(options={...})`` takes the same settings by dotted name
(``"triton.cudagraphs"``): `ember.compile` accepts those `is_setting` knows, as changing nothing.
"""

from __future__ import annotations

__all__ = ["config", "is_setting"]


class _Settings:
    """A namespace of known settings (see the module docstring); nested ones are `_Settings`."""

    def __init__(self, label: str, values: dict):
        object.__setattr__(self, "_label", label)
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, name: str):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        label = object.__getattribute__(self, "_label")
        raise AttributeError(
            f"{label} has no setting {name!r} in ember; it keeps "
            f"{', '.join(sorted(values))} (each kept as given: ember compiles with its own passes)"
        )

    def __setattr__(self, name: str, value) -> None:
        current = self.__getattr__(name)  # (refused by name when unknown)
        if isinstance(current, _Settings):
            raise AttributeError(f"{self._label}.{name} is a group of settings; set its members")
        self._values[name] = value


_TRITON = {
    "unique_kernel_names": False,
    "cudagraphs": False,
    "cudagraph_trees": True,
    "autotune_pointwise": True,
    "max_tiles": 2,
    "use_block_ptr": False,
    "descriptive_names": "original_aten",
}
_CPP = {"enable_kernel_profile": False, "threads": -1, "simdlen": None, "weight_prepack": True}
_TRACE = {"enabled": False, "debug_log": False, "graph_diagram": False}

config = _Settings(
    "torch._inductor.config",
    {
        "coordinate_descent_tuning": False,
        "coordinate_descent_check_all_directions": False,
        "fx_graph_cache": True,
        "fx_graph_remote_cache": None,
        "autotune_local_cache": True,
        "force_fuse_int_mm_with_mul": False,
        "use_mixed_mm": True,
        "freezing": False,
        "max_autotune": False,
        "max_autotune_gemm": False,
        "max_autotune_pointwise": False,
        "epilogue_fusion": True,
        "aggressive_fusion": False,
        "shape_padding": True,
        "conv_1x1_as_mm": False,
        "cpp_wrapper": False,
        "benchmark_kernel": False,
        "benchmark_fusion": False,
        "compile_threads": 1,
        "debug": False,
        "fallback_random": False,
        "size_asserts": True,
        "split_reductions": True,
        "layout_optimization": True,
        "keep_output_stride": True,
        "triton": _Settings("torch._inductor.config.triton", _TRITON),
        "cpp": _Settings("torch._inductor.config.cpp", _CPP),
        "trace": _Settings("torch._inductor.config.trace", _TRACE),
    },
)


def is_setting(name: str) -> bool:
    """Whether ``name`` (dotted for a nested one: ``"triton.cudagraphs"``) is one of
    `config`'s settings."""
    values = config._values
    *groups, last = name.split(".")
    for group in groups:
        values = values.get(group)
        if not isinstance(values, _Settings):
            return False
        values = values._values
    return last in values and not isinstance(values[last], _Settings)
