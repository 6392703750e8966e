"""Models of kinds the other ONNX suites lack (tests/onnx/_torch_zoo57.py) both ways:
exported by PyTorch (TorchScript at opsets 11 and 17, the dynamo exporter at 18, a dynamic
batch) and imported by ``ember.onnx.load`` against onnxruntime; and the same source run on
ember (``import ember as torch``), exported by ``ember.onnx.export`` with a dynamic batch and
run in onnxruntime against ember at other batch sizes. Before onnx57 ember wrote a bool
``where`` (``tril`` of a bool mask before opset 14, ``masked_fill`` on masks) as a Where node,
which onnxruntime has no kernel for, and an EmbeddingBag over a 2-D input of a symbolic batch
could not be traced."""

from __future__ import annotations

import contextlib
import io
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.onnx

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from . import _torch_zoo57 as zoo  # noqa: E402

# (name, exporter, opset): PyTorch's TorchScript exporter at an old and a newer opset where
# it exports the model, the dynamo exporter where torch.export traces it
IMPORTS = [
    *[(n, "ts", 11) for n in ("unet_t", "superres", "gnn", "pointnet", "tcn", "conv3d")],
    *[(n, "ts", 11) for n in ("shufflenet", "stylenet", "densenet", "foldunfold", "detect")],
    *[(n, "ts", 11) for n in ("bilstm", "sorting", "half", "embbag")],
    *[(n, "ts", 17) for n in ("conformer", "mixer", "seq2seq", "moe", "masks", "alibi")],
    ("detect", "dy", 18),
]


def _export_torch(name, kind, opset, path):
    cls, make = zoo.MODELS[name]
    torch.manual_seed(0)
    model = cls().eval()
    args = make(2)
    names = [f"in{i}" for i in range(len(args))]
    batched = names if name == "seq2seq" else names[:1]  # (gnn's edges are not batched)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        if kind == "ts":
            axes = {n: {0: "b"} for n in batched}
            torch.onnx.export(
                model, args, str(path), dynamo=False, opset_version=opset,
                input_names=names, dynamic_axes=axes,
            )  # fmt: skip
        else:
            batch = torch.export.Dim("b", min=1, max=64)
            shapes = tuple({0: batch} if n in batched else None for n in names)
            torch.onnx.export(
                model, args, str(path), dynamo=True, opset_version=opset,
                input_names=names, dynamic_shapes=shapes,
            )  # fmt: skip


def _compare(got, want, tol):
    got = got if isinstance(got, (tuple, list)) else (got,)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        g = g.detach().numpy() if hasattr(g, "detach") else np.asarray(g)
        assert g.shape == w.shape and g.dtype == w.dtype, k
        if w.dtype.kind == "f":
            t = 1e-2 if w.dtype == np.float16 else tol
            np.testing.assert_allclose(g, w, rtol=t, atol=t / 10, err_msg=f"output {k}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {k}")


@pytest.mark.parametrize("name, kind, opset", IMPORTS)
def test_pytorch_exports_import_as_onnxruntime_runs_them(tmp_path, name, kind, opset):
    with torch.random.fork_rng():  # (the seeds below leave PyTorch's generator as it was)
        _import_case(tmp_path, name, kind, opset)


def _import_case(tmp_path, name, kind, opset):
    if kind == "dy":
        pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs it")
    path = tmp_path / f"{name}.onnx"
    _export_torch(name, kind, opset, path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    model = ember.onnx.load(str(path))
    torch.manual_seed(1)
    for batch in (3, 1):
        feed = [a.numpy() for a in zoo.MODELS[name][1](batch)]
        want = session.run(None, {i.name: a for i, a in zip(session.get_inputs(), feed)})
        _compare(model(*feed[: len(session.get_inputs())]), want, 2e-4)


def _zoo_on_ember():
    source = (Path(__file__).parent / "_torch_zoo57.py").read_text()
    imports = "import torch\nfrom torch import nn\nfrom torch.nn import functional as F"
    assert imports in source
    source = source.replace(
        imports, "import ember as torch\nfrom ember import nn\nfrom ember.nn import functional as F"
    )
    module = types.ModuleType("ember_zoo57")
    exec(compile(source, "_torch_zoo57.py (on ember)", "exec"), module.__dict__)
    return module


# (name, opset): ember's exporter at its oldest opset and a newer one; gnn's index_add needs
# ScatterND's reduction (16), and ``bitwise_and`` has no ONNX form before 18
EXPORTS = [
    *[(n, 13) for n in ("masks", "embbag", "seq2seq", "superres", "detect", "densenet")],
    *[(n, 13) for n in ("stylenet", "moe", "sorting", "conformer", "bilstm", "half")],
    *[(n, 17) for n in ("gnn", "alibi", "unet_t", "conv3d", "mixer")],
]


@pytest.mark.parametrize("name, opset", EXPORTS)
def test_ember_exports_run_in_onnxruntime_as_in_ember(tmp_path, name, opset):
    with ember.random.fork_rng():  # (the seed below leaves ember's generator as it was)
        _export_case(tmp_path, name, opset)


def _export_case(tmp_path, name, opset):
    ezoo = _zoo_on_ember()
    cls, make = ezoo.MODELS[name]
    ember.manual_seed(0)
    model = cls().eval()
    args = make(2)
    names = [f"in{i}" for i in range(len(args))]
    batched = names if name == "seq2seq" else names[:1]
    path = tmp_path / f"{name}.onnx"
    with ember.no_grad():
        ember.onnx.export(
            model, args, str(path), opset_version=opset, input_names=names,
            dynamic_axes={n: {0: "b"} for n in batched},
        )  # fmt: skip
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch in (3, 1):
        feed = make(batch)
        with ember.no_grad():
            want = model(*feed)
        want = [w.numpy() for w in (want if isinstance(want, tuple) else (want,))]
        got = session.run(None, {i.name: a.numpy() for i, a in zip(session.get_inputs(), feed)})
        _compare(got, want, 2e-4)
