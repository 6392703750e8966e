"""Neural-network layers (``ember.nn``) and their functional forms (``ember.nn.functional``).

Layers, parameter names, state_dict keys and weight layouts follow PyTorch's, so a state_dict
moves between ``torch.nn`` and ``ember.nn`` models of the same architecture with a plain dict
copy. ``ember.nn.init`` holds the initialisers; ``ember.nn.utils`` gradient clipping,
``utils.rnn`` packed sequences and ``utils.parametrize`` / ``utils.parametrizations``
(weight_norm, spectral_norm).
"""

from .._missing import module_getattr as _module_getattr  # noqa: E402
from . import common_types, functional, grad, init, modules, parallel, utils
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
from .activation_extra import (
    AlphaDropout,
    ChannelShuffle,
    FeatureAlphaDropout,
    LocalResponseNorm,
    RReLU,
    Softmax2d,
)
from .adaptive import AdaptiveLogSoftmaxWithLoss
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .data_parallel import DataParallel
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
from .lazy import (
    LazyBatchNorm1d,
    LazyBatchNorm2d,
    LazyBatchNorm3d,
    LazyConv1d,
    LazyConv2d,
    LazyConv3d,
    LazyConvTranspose1d,
    LazyConvTranspose2d,
    LazyConvTranspose3d,
    LazyInstanceNorm1d,
    LazyInstanceNorm2d,
    LazyInstanceNorm3d,
    LazyLinear,
    LazyModuleMixin,
    UninitializedBuffer,
    UninitializedParameter,
)
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
from .loss_extra import (
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    LinearCrossEntropyLoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    NLLLoss2d,
    PoissonNLLLoss,
    SoftMarginLoss,
    TripletMarginWithDistanceLoss,
)
from .module import Module
from .norm_extra import InstanceNorm3d, SyncBatchNorm
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
from .padding import (
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from .parameter import Buffer, Parameter
from .pool_extra import (
    FractionalMaxPool2d,
    FractionalMaxPool3d,
    LPPool1d,
    LPPool2d,
    LPPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
)
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
