"""Hostile checkpoints in PyTorch's legacy format (``torch.save(...,
_use_new_zipfile_serialization=False)``; io/torch_legacy.py), which tests/io/fuzzing.py's zip
mutations do not reach: seeded byte mutations (bit flips, cuts, insertions, huge 8-byte counts,
opcodes overwritten) are read or refused with an `EmberError`, and a pickle whose globals name
code (os.system, builtins.eval, ember's own functions) is refused without running it."""

from __future__ import annotations

import io
import os
import pickle
import random

import pytest

import ember
from ember.errors import CheckpointError
from ember.io.torch_legacy import MAGIC_NUMBER, PROTOCOL_VERSION

from . import files54_fuzzing as fz

torch = pytest.importorskip("torch")


def _legacy(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer, _use_new_zipfile_serialization=False)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def seeds():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2))
    base = torch.arange(12.0).reshape(3, 4)
    values = {
        "a": base,
        "b": base[1:, ::2],
        "i": torch.arange(5, dtype=torch.int32),
        "h": torch.ones(3, dtype=torch.bfloat16),
        "p": torch.nn.Parameter(torch.ones(2)),
        "n": 3,
        "s": "text",
    }
    return [_legacy(net.state_dict()), _legacy(values)]


def test_the_seeds_load_as_pytorch_reads_them(seeds):
    state = ember.load(io.BytesIO(seeds[1]))
    assert state["b"].tolist() == [[4.0, 6.0], [8.0, 10.0]] and state["s"] == "text"
    assert state["h"].dtype == ember.bfloat16 and state["n"] == 3


def test_mutated_legacy_checkpoints_are_read_or_refused(seeds, tmp_path):
    rng = random.Random(fz.seed())
    tally = fz.Tally()
    path = tmp_path / "damaged.pt"
    for case in range(fz.cases(1500)):
        data = fz.mutate_bytes(rng.choice(seeds), rng)
        if rng.random() < 0.2:  # a pickle opcode where data was
            at = rng.randrange(len(data))
            data = data[:at] + bytes([rng.choice(b"cR\x93bis}]()\x85\x86.NJKMq")]) + data[at + 1 :]
        path.write_bytes(data)
        tally.check(f"case {case}", lambda: ember.load(path))
    assert not tally.escapes, tally.report()
    assert tally.read and tally.refused > tally.read


def _legacy_file(payload: bytes) -> bytes:
    """A legacy checkpoint whose object is the pickle ``payload``."""
    buffer = io.BytesIO()
    pickle.dump(MAGIC_NUMBER, buffer, protocol=2)
    pickle.dump(PROTOCOL_VERSION, buffer, protocol=2)
    sizes = {"short": 2, "int": 4, "long": 4}
    pickle.dump({"protocol_version": 1001, "little_endian": True, "type_sizes": sizes}, buffer, 2)
    buffer.write(payload)
    pickle.dump([], buffer, protocol=2)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "call",
    [
        b"cposix\nsystem\n(Vtouch M\ntR.",
        b"cos\nsystem\n(Vtouch M\ntR.",
        b"cbuiltins\neval\n(V__import__('os').system('touch M')\ntR.",
        b"cbuiltins\nexec\n(Vopen('M', 'w')\ntR.",
        b"cember.io.checkpoint\nwrite_safetensors\n(VM\n}}tR.",
        b"c_codecs\nencode\n(Vx\nVutf-8\ntR.",
    ],
    ids=["posix.system", "os.system", "eval", "exec", "ember internals", "codecs"],
)
def test_pickled_calls_of_code_are_refused_and_never_run(tmp_path, monkeypatch, call):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.pt"
    path.write_bytes(_legacy_file(call))
    with pytest.raises(CheckpointError, match="evil.pt"):
        ember.load(path)
    assert not os.path.exists(tmp_path / "M")


def test_a_legacy_file_larger_than_memory_is_refused_before_it_is_read(seeds, tmp_path):
    from ember._file_limits import physical_memory

    path = tmp_path / "huge.pt"
    path.write_bytes(seeds[0])
    with open(path, "ab") as f:
        f.truncate(physical_memory() + 1)  # (sparse: no disk used)
    with pytest.raises(CheckpointError, match="huge.pt: reading this legacy .* more than"):
        ember.load(path)
