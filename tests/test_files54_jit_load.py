"""``ember.jit.load`` and ``ember.export.load`` of a path hand the path itself to the ONNX
importer: a damaged file's error names the file (not ``<bytes>``), a model's external data is
found beside it, and external data named outside the model's folder is refused naming the
file."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import nn

onnx = pytest.importorskip("onnx")

LOADERS = {"jit.load": ember.jit.load, "export.load": ember.export.load}


@pytest.fixture
def external_model(tmp_path):
    ember.manual_seed(0)
    model, x = nn.Linear(64, 32), ember.randn(2, 64)
    path = tmp_path / "m.onnx"
    ember.onnx.export(model, path, x, external_data=True)
    assert (tmp_path / "m.onnx.data").is_file()
    with ember.no_grad():
        return path, x, model(x).numpy()


@pytest.mark.parametrize("loader", list(LOADERS))
def test_a_model_with_external_data_loads_from_its_path(external_model, loader):
    path, x, expected = external_model
    loaded = LOADERS[loader](path)
    module = loaded.module() if loader == "export.load" else loaded
    with ember.no_grad():
        np.testing.assert_allclose(module(x).numpy(), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("loader", list(LOADERS))
def test_a_damaged_file_is_refused_naming_it(tmp_path, loader):
    path = tmp_path / "damaged.onnx"
    path.write_bytes(b"\x08\x07\x12\xff" * 8)
    with pytest.raises(ember.EmberError, match="damaged.onnx"):
        LOADERS[loader](path)


@pytest.mark.parametrize("loader", list(LOADERS))
def test_external_data_outside_the_folder_is_refused_naming_the_file(external_model, loader):
    path = external_model[0]
    model = onnx.load(str(path), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "../../etc/passwd"
    onnx.save(model, str(path))
    with pytest.raises(ember.EmberError, match=f"{path}: .*outside"):
        LOADERS[loader](path)


class _EndlessStream:
    """A file object that never ends (a pipe from a hostile writer)."""

    name = "endless"

    def read(self, n=-1):
        assert n is not None and n > 0, "read whole: would never return"
        return b"\x00" * min(n, 1 << 20)


class _FailingStream:
    name = "failing"

    def read(self, n=-1):
        raise OSError(5, "Input/output error")


@pytest.mark.parametrize("loader", list(LOADERS))
def test_a_stream_is_read_in_bounded_pieces(monkeypatch, loader):
    from ember import _file_limits, export, jit

    # (the real bound is protobuf's 2 GiB: a small one keeps the test fast)
    monkeypatch.setattr(jit, "PROTOBUF_MAX_BYTES", 3 << 20)
    monkeypatch.setattr(export, "PROTOBUF_MAX_BYTES", 3 << 20)
    with pytest.raises(ember.EmberError, match="endless: more than 3,145,728 bytes"):
        LOADERS[loader](_EndlessStream())
    with pytest.raises(ember.EmberError, match="failing: cannot be read"):
        LOADERS[loader](_FailingStream())
    assert _file_limits.read_stream(__import__("io").BytesIO(b"abc"), 3, "x") == b"abc"
