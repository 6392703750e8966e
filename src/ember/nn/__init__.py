"""Neural-network layers (``ember.nn``) and their functional forms (``ember.nn.functional``).

Layers, parameter names, state_dict keys and weight layouts follow PyTorch's, so a state_dict
moves between ``torch.nn`` and ``ember.nn`` models of the same architecture with a plain dict
copy. ``ember.nn.init`` holds the initialisers; ``ember.nn.utils`` gradient clipping,
``utils.rnn`` packed sequences and ``utils.parametrize`` / ``utils.parametrizations``
(weight_norm, spectral_norm).
"""

from .._missing import module_getattr as _module_getattr  # noqa: E402
from . import functional, init, utils
from .activation import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .distance import (
    CosineEmbeddingLoss,
    CosineSimilarity,
    CTCLoss,
    MarginRankingLoss,
    PairwiseDistance,
    TripletMarginLoss,
)
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from .embedding_bag import EmbeddingBag
from .flatten import Flatten, Unflatten
from .hooks import RemovableHandle
from .linear import Bilinear, Identity, Linear
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import Module
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    LayerNorm,
    RMSNorm,
)
from .parameter import Buffer, Parameter
from .pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
)
from .rnn import GRU, LSTM, RNN, RNNBase
from .rnn_cell import GRUCell, LSTMCell, RNNCell, RNNCellBase
from .sampling import (
    Fold,
    PixelShuffle,
    PixelUnshuffle,
    Unfold,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)
from .sparse import Embedding
from .transformer import (
    TransformerEncoder,
    TransformerEncoderLayer,
    generate_square_subsequent_mask,
)
from .transformer_decoder import Transformer, TransformerDecoder, TransformerDecoderLayer

__getattr__ = _module_getattr("ember.nn", globals())  # PyTorch names ember lacks: ember._missing
