"""ONNX's backend interface (``onnx.backend.base.Backend``) over `ember.onnx.load`.

``prepare(model)`` returns a `BackendRep` whose ``run(inputs)`` takes NumPy arrays (a list in
the model's input order, or a dict by name) and returns NumPy arrays (lists for sequences, None
for an empty optional); ``run_model`` and ``run_node`` do both at once. ONNX's conformance suite
drives ember through this module (tests/onnx/).
"""

from __future__ import annotations

import numpy as np

from ._model import require_onnx

require_onnx()

from onnx.backend.base import Backend, BackendRep  # noqa: E402

from ..ops._registry import TensorBase  # noqa: E402
from .importer import OnnxFunction, read_model  # noqa: E402


def _to_numpy(value):
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [_to_numpy(v) for v in value]
    if isinstance(value, TensorBase):
        return value.numpy(force=True)
    return np.asarray(value)


class EmberRep(BackendRep):
    def __init__(self, function: OnnxFunction):
        self.function = function

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            outs = self.function(**inputs)
        else:
            if not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            outs = self.function(*inputs)
        if len(self.function.output_names) == 1:
            outs = (outs,)
        return tuple(_to_numpy(o) for o in outs)


class EmberBackend(Backend):
    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> EmberRep:
        if not cls.supports_device(device):
            raise RuntimeError(f"ember runs on the CPU only, not {device!r}")
        capture = kwargs.pop("capture", True)
        return EmberRep(OnnxFunction(read_model(model), capture=capture))

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        """Run one NodeProto on NumPy inputs (its input and output types taken from the
        arrays and ``outputs_info``: (dtype, shape) pairs)."""
        onnx = require_onnx()
        helper = onnx.helper
        if isinstance(inputs, dict):
            names = list(inputs)
            arrays = [np.asarray(inputs[n]) for n in names]
        else:
            names = [n for n in node.input if n]
            arrays = [np.asarray(a) for a in inputs]
        graph_inputs = [
            helper.make_tensor_value_info(
                n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)
            )
            for n, a in zip(names, arrays)
        ]
        graph_outputs = [helper.make_empty_tensor_value_info(n) for n in node.output if n]
        graph = helper.make_graph([node], "run_node", graph_inputs, graph_outputs)
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return cls.run_model(model, arrays, device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().split(":")[0] == "CPU"


prepare = EmberBackend.prepare
run_model = EmberBackend.run_model
run_node = EmberBackend.run_node
supports_device = EmberBackend.supports_device
is_compatible = EmberBackend.is_compatible
