"""A file's bool tensor is raw bytes, and a byte other than 0 and 1 (5, 127) is True to NumPy and
PyTorch; but ember's compiled C loops widen the byte itself, so a compiled
``(mask.float() * x + mask.int()).sum()`` of such a mask read from a file came out 277504
instead of PyTorch's 6144. Every reader of tensors from files now stores bools as 0 or 1
(_file_limits.canonical_bools): ember and PyTorch checkpoints (zip and legacy), NumPy arrays in
them, safetensors and graph files, ONNX initializers."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

import ember

from .io.fuzzing import join, split

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

BYTES = bytes([0, 1, 5, 127, 2, 0, 7, 1] * 64)  # (ASCII: protocol 2 pickles bytes as text)
WANT = np.frombuffer(BYTES, np.uint8) != 0


def _compiled_sum(mask) -> float:
    f = ember.function(lambda m, x: (m.float() * x + m.to(ember.int32)).sum())
    return f(mask, ember.ones(mask.shape[0])).item()


def _check(mask) -> None:
    assert mask.dtype == ember.bool
    np.testing.assert_array_equal(mask.numpy().view(np.uint8), WANT.astype(np.uint8))
    assert _compiled_sum(mask) == 2 * WANT.sum()


def test_an_ember_checkpoint(tmp_path):
    path = tmp_path / "m.ckpt"
    ember.save({"m": ember.tensor(WANT)}, path)
    header, body = split(path.read_bytes())
    begin, end = header["m"]["data_offsets"]
    body = body[:begin] + BYTES + body[end:]
    path.write_bytes(join(header, body, refresh=True))
    _check(ember.load(path)["m"])


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_a_pytorch_checkpoint(legacy):
    buffer = io.BytesIO()
    marker = torch.tensor(np.frombuffer(b"\x01" * len(BYTES), np.bool_).copy())
    torch.save({"m": marker}, buffer, _use_new_zipfile_serialization=not legacy)
    data = buffer.getvalue()
    if legacy:  # the storage's bytes follow its 8-byte count at the end of the file
        data = data[: -len(BYTES)] + BYTES
    else:
        records = {}
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                blob = archive.read(info.filename)
                records[info.filename] = BYTES if "/data/" in info.filename else blob
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as archive:
            for name, blob in records.items():
                archive.writestr(name, blob)
        data = out.getvalue()
    theirs = torch.load(io.BytesIO(data))["m"]
    assert theirs.float().sum().item() == WANT.sum()  # PyTorch reads the bytes as True
    _check(ember.load(io.BytesIO(data))["m"])


def test_a_numpy_array_in_a_pytorch_checkpoint():
    buffer = io.BytesIO()
    torch.save({"m": np.ones(len(BYTES), np.bool_)}, buffer)
    records = {}
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as archive:
        for info in archive.infolist():
            records[info.filename] = archive.read(info.filename)
    name = next(n for n in records if n.endswith("data.pkl"))
    ones = b"\x01" * len(BYTES)
    assert ones in records[name]
    records[name] = records[name].replace(ones, BYTES)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for n, blob in records.items():
            archive.writestr(n, blob)
    _check(ember.tensor(ember.load(io.BytesIO(out.getvalue()))["m"]))


def test_an_onnx_initializer():
    from onnx import TensorProto, helper

    mask = TensorProto(name="m", data_type=TensorProto.BOOL, dims=[len(BYTES)], raw_data=BYTES)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [len(BYTES)])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [len(BYTES)])
    nodes = [
        helper.make_node("Cast", ["m"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["f", "x"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=[mask])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    got = ember.onnx.load(model.SerializeToString())(ember.ones(len(BYTES)))
    np.testing.assert_array_equal(got.numpy(), WANT.astype(np.float32))
