"""``torch.nn.modules.loss``'s names, from where ember defines them."""

from ..distance import CosineEmbeddingLoss, CTCLoss, MarginRankingLoss, TripletMarginLoss  # noqa: F401
from ..loss import *  # noqa: F403
from ..loss import _Loss, _WeightedLoss  # noqa: F401
from ..loss_extra import *  # noqa: F403
