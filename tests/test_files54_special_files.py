"""Files that are not files: a named pipe (which would block a reader forever), a device
(``/dev/zero`` feeds a reader without end, until memory runs out) or a folder, given as the
path or linked from inside a model folder, is refused by every reader with an `EmberError`
naming it, at once."""

from __future__ import annotations

import os
import shutil
import signal

import pytest

import ember
from ember.data.idx import read_idx
from ember.text.bert import BertConfig, load_bert

READERS = {
    "ember.load": ember.load,
    "load_graph": ember.load_graph,
    "onnx.load": ember.onnx.load,
    "read_idx": read_idx,
    "jit.load": ember.jit.load,
    "export.load": ember.export.load,
    "BertConfig.from_json": BertConfig.from_json,
}


class _Hung(Exception):
    pass


@pytest.fixture
def deadline():
    """Fail (rather than hang the suite) when a reader blocks for 10 s."""

    def hung(*_):
        raise _Hung("the reader blocked")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _special(tmp_path, kind: str):
    path = tmp_path / kind
    if kind == "named pipe":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:  # a link to a device that never ends
        os.symlink("/dev/zero", path)
    return path


@pytest.mark.parametrize("kind", ["named pipe", "device", "folder"])
@pytest.mark.parametrize("reader", list(READERS))
def test_a_path_that_is_no_regular_file_is_refused_at_once(tmp_path, deadline, reader, kind):
    path = _special(tmp_path, kind)
    with pytest.raises(ember.EmberError, match=str(path)):
        READERS[reader](path)


@pytest.mark.parametrize("kind", ["named pipe", "device"])
@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_a_model_folder_linking_its_files_to_devices_is_refused(tmp_path, deadline, name, kind):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 4, "num_attention_heads": 2}')
    (folder / "model.safetensors").write_bytes(b"")
    os.unlink(folder / name)
    shutil.move(_special(tmp_path, kind), folder / name)
    with pytest.raises(ember.EmberError, match=name):
        load_bert(folder)
