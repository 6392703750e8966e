"""PyTorch's ``torch.put`` / ``Tensor.put_``: elements of ``input`` seen as one flat vector set
(or, with ``accumulate=True``, added to) at the flat positions ``index`` from ``source``. A
composite over `index_put` on the flattened tensor, so its gradients (to ``input`` and to
``source``) and its capture are index_put's. Checks and messages are PyTorch's."""

from __future__ import annotations

from ..errors import AxisError, DTypeError
from . import api as E
from ._index_dtypes import check_index_dtype
from ._registry import building_graph, export
from ._util import numel
from .index_put import index_put
from .promotion import to_tensor


@export(method=True, inplace=True)
def put(input, index, source, accumulate: bool = False):
    """A tensor equal to ``input`` with the elements at the flat (row-major) positions
    ``index`` (int64, negative counting from the end) set to ``source``'s (as many elements as
    ``index``, of ``input``'s dtype); summed into them with ``accumulate=True``."""
    x, index, source = to_tensor(input), to_tensor(index), to_tensor(source)
    check_index_dtype("put", index)
    if source.dtype is not x.dtype:
        raise DTypeError(
            "put_(): self and source expected to have the same dtype, but got self.dtype = "
            f"{x.dtype} and source.dtype = {source.dtype}",
            op="put",
        )
    if numel(source.shape) != numel(index.shape):
        raise AxisError(
            "put_(): Expected source and index to have the same number of elements, but got "
            f"source.numel() = {numel(source.shape)}, index.numel() = {numel(index.shape)}",
            op="put",
        )
    n = numel(x.shape)
    flat_index = E.reshape(index, (-1,))
    if not building_graph() and flat_index.shape[0]:
        values = flat_index.numpy(force=True)
        bad = values[(values < -n) | (values >= n)]
        if bad.size:
            raise AxisError(
                f"out of range: tried to access index {int(bad[0])} on a tensor of {n} elements.",
                op="put",
            )
    flat = E.reshape(x, (-1,))
    out = index_put(flat, (flat_index,), E.reshape(source, (-1,)), accumulate)
    return E.reshape(out, tuple(x.shape))
