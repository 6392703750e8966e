"""PyTorch's top-level in-place functions (``torch.exp_(x)``, ``torch.clamp_(x, 0, 1)``,
``torch.zero_(x)``): each calls the tensor's own in-place method, so it writes under the same
protocol (version counter, recorded history, capture) and returns the tensor."""

from __future__ import annotations

from ._registry import export

# the ones PyTorch exposes at top level whose methods ember has
NAMES = (
    "abs_", "acos_", "arccos_", "asin_", "arcsin_", "atan_", "arctan_", "ceil_", "clamp_",
    "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_", "erf_", "erfc_", "exp2_",
    "exp_", "expm1_", "fill_", "floor_", "frac_", "i0_", "log10_", "log1p_", "log2_", "log_",
    "logit_", "nan_to_num_", "neg_", "rad2deg_", "reciprocal_", "round_", "rsqrt_", "sigmoid_",
    "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "xlogy_", "zero_",
    "acosh_", "arccosh_", "asinh_", "arcsinh_", "atanh_", "arctanh_", "fix_", "ldexp_",
    "negative_",
)  # fmt: skip


def _calling(name):
    def fn(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``input.{name}(...)``: in place, returns input."
    return fn


for _name in NAMES:
    export(_calling(_name), name=_name)
