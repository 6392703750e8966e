"""Expected failures among the shape and indexing operators' node cases (ember.onnx.ops.shape and
ember.onnx.ops.indexing): none. Every Shape, Size, Reshape, Flatten, (Un)Squeeze, Transpose,
Concat, Split, Slice, Gather*, Expand, Tile, ConstantOfShape, Range, Pad, DepthToSpace,
SpaceToDepth, Trilu, EyeLike, OneHot, Compress, NonZero, Unique, TopK, ArgMax/ArgMin,
CumSum/CumProd, Scatter*, TensorScatter, ReverseSequence, Einsum, CenterCropPad and Col2Im case
passes. (The `_expanded` Range cases need Loop and test_split_to_sequence_* SplitToSequence:
those belong to the control-flow and sequence families.)"""

EXPECTED_FAILURES: dict[str, str] = {}
