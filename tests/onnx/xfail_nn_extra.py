"""Expected conformance failures of the heavier nn operators (Resize, Upsample, GridSample,
AffineGrid, RoiAlign, DeformConv, NonMaxSuppression, RNN/LSTM/GRU, Attention, FlexAttention,
LinearAttention, CausalConvWithState, RotaryEmbedding, SwiGLU): none. Every case of theirs
passes; their ``_expanded`` forms run other families' operators (MatMul, If, Range, ...)."""

EXPECTED_FAILURES: dict[str, str] = {}
