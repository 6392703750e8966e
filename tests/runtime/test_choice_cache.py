"""kernels/choice_cache.py: measured choices kept per machine, files not trusted."""

import json
import os

import pytest

from ember.kernels.choice_cache import ChoiceCache


def _decode_count(stored):
    if type(stored) is not int or stored < 0:
        raise ValueError("not a count")
    return stored


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    machine = {"key": "cpu-a|2|src1|v1"}
    made = ChoiceCache("counts", lambda: machine["key"], 1, _decode_count)
    made.machine = machine
    return made


def test_a_choice_is_kept_across_processes(cache):
    assert cache.get("g1") is None
    cache.put("g1", 3)
    assert cache.get("g1") == 3
    data = json.loads(cache.path().read_text())
    assert data == {"format": 1, "machine": "cpu-a|2|src1|v1", "choices": {"g1": 3}}
    assert cache.path().stat().st_mode & 0o022 == 0  # (only its owner can write it)
    cache.forget()  # (a new process reads the file)
    assert cache.get("g1") == 3


def test_another_process_choices_are_merged_not_lost(cache):
    cache.put("g1", 1)
    other = ChoiceCache("counts", cache.machine_key, 1, _decode_count)
    other.put("g2", 2)  # (written after this process read the file)
    cache.put("g3", 3)
    cache.forget()
    assert [cache.get(k) for k in ("g1", "g2", "g3")] == [1, 2, 3]


def test_another_machine_or_kernel_measures_again(cache):
    cache.put("g1", 1)
    cache.machine["key"] = "cpu-b|2|src1|v1"
    cache.forget()
    assert cache.get("g1") is None  # (another file: its name is the machine's digest)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[1, 2]",
        json.dumps({"format": 2, "machine": "cpu-a|2|src1|v1", "choices": {"g": 1}}),
        json.dumps({"format": 1, "machine": "other", "choices": {"g": 1}}),
        json.dumps({"format": 1, "machine": "cpu-a|2|src1|v1", "choices": {"g": -1}}),
        json.dumps({"format": 1, "machine": "cpu-a|2|src1|v1", "choices": {"g": 1, "h": "x"}}),
        json.dumps({"format": 1, "machine": "cpu-a|2|src1|v1", "choices": [1]}),
        json.dumps({"format": 1, "machine": "cpu-a|2|src1|v1", "choices": {}, "extra": 1}),
        "[" * 100000,
    ],
)
def test_a_damaged_file_is_ignored_whole_and_replaced(cache, text):
    path = cache.path()
    path.write_text(text)
    os.chmod(path, 0o644)
    assert cache.read(path) == {}
    assert cache.get("g") is None
    cache.put("g2", 5)
    assert json.loads(path.read_text())["choices"] == {"g2": 5}


def test_a_file_others_can_write_is_not_read(cache):
    cache.put("g1", 1)
    os.chmod(cache.path(), 0o666)
    cache.forget()
    assert cache.get("g1") is None


def test_an_unwritable_cache_keeps_the_choice_in_the_process(cache, monkeypatch):
    from ember.kernels import choice_cache

    def refuse(*args, **kwargs):
        raise PermissionError("read-only")

    monkeypatch.setattr(choice_cache, "write_atomic", refuse)
    cache.put("g1", 4)
    assert cache.get("g1") == 4 and not cache.path().exists()
