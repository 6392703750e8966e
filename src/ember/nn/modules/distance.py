"""``torch.nn.modules.distance``'s names, from where ember defines them."""

from ..distance import CosineSimilarity, PairwiseDistance  # noqa: F401
