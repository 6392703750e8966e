"""``torch.nn.modules.upsampling``'s names, from where ember defines them."""

from ..sampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
