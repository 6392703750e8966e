"""``ember.save`` / ``ember.load`` with file objects (open binary files, ``io.BytesIO``, streams
that cannot seek), as ``torch.save`` / ``torch.load`` take them: both formats, the position
rules, and damaged data refused with a CheckpointError naming the object."""

import io
import pickle

import numpy as np
import pytest

import ember
from ember.errors import CheckpointError
from ember.io import _stream

try:
    import torch
except ImportError:
    torch = None

TORCH_MISSING = "PyTorch is not installed (pip install torch==2.13.0 from the CPU index)"


def _state():
    rng = np.random.default_rng(0)
    return {
        "w": ember.tensor(rng.normal(size=(3, 4)).astype(np.float32)),
        "b": ember.tensor(np.arange(5, dtype=np.int64)),
        "epoch": 7,
        "names": ["a", "b"],
        "pair": (1.5, None),
    }


def _same(a, b):
    assert a.keys() == b.keys()
    np.testing.assert_array_equal(a["w"].numpy(), b["w"].numpy())
    np.testing.assert_array_equal(a["b"].numpy(), b["b"].numpy())
    assert a["w"].dtype == b["w"].dtype and a["b"].dtype == b["b"].dtype
    assert (a["epoch"], a["names"], a["pair"]) == (b["epoch"], b["names"], b["pair"])


class _Stream(io.RawIOBase):
    """A readable stream that cannot seek (a pipe's file)."""

    def __init__(self, data: bytes, chunk: int = 7):
        self._data, self._pos, self._chunk = data, 0, chunk

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), self._chunk, len(self._data) - self._pos)
        b[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


class _Writer:
    """A minimal torch-style writer: write() (short writes) and flush(), nothing else."""

    def __init__(self):
        self.parts, self.flushed = [], 0

    def write(self, data):
        data = bytes(data)[:100]
        self.parts.append(data)
        return len(data)

    def flush(self):
        self.flushed += 1


class _Reader:
    """Only read/readline/seek/tell, as torch.load requires (no readinto, no seekable)."""

    def __init__(self, data: bytes):
        self._f = io.BytesIO(data)

    def read(self, n=-1):
        return self._f.read(n)

    def readline(self):
        return self._f.readline()

    def seek(self, offset, whence=0):
        return self._f.seek(offset, whence)

    def tell(self):
        return self._f.tell()


def test_bytesio_round_trip():
    buf = io.BytesIO()
    ember.save(_state(), buf)
    assert buf.tell() == len(buf.getvalue()) > 0
    buf.seek(0)
    _same(ember.load(buf), _state())
    assert buf.tell() == len(buf.getvalue())  # read to its end, as torch.load leaves it


def test_open_file_round_trip_and_same_bytes_as_a_path(tmp_path):
    path = tmp_path / "ck.pt"
    with open(path, "wb") as f:
        ember.save(_state(), f)
    with open(path, "rb") as f:
        _same(ember.load(f), _state())
    ember.save(_state(), tmp_path / "by_path.pt")
    # (the same layout; safetensors orders the metadata entries differently from save to save)
    assert len(path.read_bytes()) == len((tmp_path / "by_path.pt").read_bytes())
    _same(ember.load(path), _state())  # a file written through an object loads by path too


def test_writes_at_the_objects_position_and_reads_from_it():
    buf = io.BytesIO()
    buf.write(b"prefix")
    ember.save(_state(), buf)
    buf.seek(6)
    _same(ember.load(buf), _state())
    # the checkpoint must be the rest of the object: trailing bytes are damage
    buf.seek(0, 2)
    buf.write(b"junk")
    buf.seek(6)
    with pytest.raises(CheckpointError, match="bytes after the last tensor"):
        ember.load(buf)


def test_minimal_writer_and_reader_objects():
    writer = _Writer()
    ember.save(_state(), writer)
    assert writer.flushed == 1 and len(writer.parts) > 1  # short writes were continued
    data = b"".join(writer.parts)
    _same(ember.load(_Reader(data)), _state())


def test_a_stream_that_cannot_seek_is_read_through():
    buf = io.BytesIO()
    ember.save(_state(), buf)
    _same(ember.load(io.BufferedReader(_Stream(buf.getvalue()))), _state())


def test_a_stream_longer_than_the_bound_is_refused(monkeypatch):
    buf = io.BytesIO()
    ember.save(_state(), buf)
    monkeypatch.setattr(_stream, "MAX_STREAM_BYTES", 64)
    with pytest.raises(CheckpointError, match="cannot seek.*longer than 64 bytes"):
        ember.load(_Stream(buf.getvalue()))


def test_damaged_data_names_the_object(tmp_path):
    buf = io.BytesIO()
    ember.save(_state(), buf)
    data = bytearray(buf.getvalue())
    data[-5] ^= 0x10  # in the last tensor's bytes
    damaged = io.BytesIO(bytes(data))
    with pytest.raises(CheckpointError, match="CRC-32") as info:
        ember.load(damaged)
    assert repr(damaged) in str(info.value)
    path = tmp_path / "damaged.pt"
    path.write_bytes(bytes(data[:40]))
    with open(path, "rb") as f, pytest.raises(CheckpointError) as info:
        ember.load(f)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "empty"),
        (b"abc", "only 3 bytes"),
        (b"\xff" * 64, "truncated or not a safetensors file"),
        (pickle.dumps(list(range(100)), protocol=2), "pickle"),
        (b"PK\x03\x04" + b"\x00" * 40, "damaged PyTorch checkpoint"),
    ],
)
def test_hostile_bytes_are_refused_from_objects(data, message):
    with pytest.raises(CheckpointError, match=message):
        ember.load(io.BytesIO(data))


def test_text_mode_files_are_refused(tmp_path):
    path = tmp_path / "ck.pt"
    with open(path, "w") as f, pytest.raises(CheckpointError, match=str(path)):
        ember.save(_state(), f)
    ember.save(_state(), path)
    with open(path, encoding="latin-1") as f, pytest.raises(CheckpointError, match="binary mode"):
        ember.load(f)


def test_objects_without_read_or_write_are_refused():
    with pytest.raises(CheckpointError, match="file object with write"):
        ember.save(_state(), object())
    with pytest.raises(CheckpointError, match="file object with read"):
        ember.load(object())


def test_a_failing_write_is_a_checkpoint_error():
    class Full(io.RawIOBase):
        def writable(self):
            return True

        def write(self, b):
            raise OSError(28, "No space left on device")

    with pytest.raises(CheckpointError, match="No space left"):
        ember.save(_state(), Full())


@pytest.mark.skipif(torch is None, reason=TORCH_MISSING)
def test_torch_checkpoints_from_objects(tmp_path):
    state = {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4), "step": 3}
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    got = ember.load(buf)
    np.testing.assert_array_equal(got["w"].numpy(), state["w"].numpy())
    assert got["step"] == 3
    path = tmp_path / "t.pt"
    with open(path, "wb") as f:
        torch.save(state, f)
    with open(path, "rb") as f:
        np.testing.assert_array_equal(ember.load(f)["w"].numpy(), state["w"].numpy())
    # a stream that cannot seek, and an object with only read/readline/seek/tell
    _ = ember.load(io.BufferedReader(_Stream(buf.getvalue(), chunk=1000)))
    np.testing.assert_array_equal(ember.load(_Reader(buf.getvalue()))["w"].numpy(), state["w"])
    # damage names the object
    damaged = io.BytesIO(buf.getvalue()[: len(buf.getvalue()) // 2])
    with pytest.raises(CheckpointError) as info:
        ember.load(damaged)
    assert repr(damaged) in str(info.value)


@pytest.mark.skipif(torch is None, reason=TORCH_MISSING)
def test_torch_reads_what_ember_writes_to_an_object_back_through_ember():
    # the torch peer's own pattern: save into a buffer, reload with torch.load's signature
    buf = io.BytesIO()
    ember.save({"w": ember.ones(2, 3)}, buf)
    buf.seek(0)
    got = ember.load(buf, map_location="cpu", weights_only=True)
    np.testing.assert_array_equal(got["w"].numpy(), np.ones((2, 3), np.float32))


def test_unbuffered_files_and_closed_files(tmp_path):
    path = tmp_path / "ck.pt"
    with open(path, "wb", buffering=0) as f:
        ember.save(_state(), f)
    with open(path, "rb", buffering=0) as f:
        _same(ember.load(f), _state())
    f = open(path, "rb")  # noqa: SIM115
    f.close()
    with pytest.raises(CheckpointError, match=str(path)):
        ember.load(f)
