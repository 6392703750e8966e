"""Fuzzing the file readers (tests/io/fuzzing.py): mutated checkpoints (ember's and PyTorch's),
training checkpoints and graph files (bit flips, truncations, crafted JSON or zip records with
fresh checksums) are read or refused with ember's own errors, never any other exception, and
no name in them ever runs as code.

The suite runs a fixed, seeded slice. The long run is on demand, for as long as asked::

    EMBER_FUZZ_SECONDS=600 PYTHONPATH=src python -m pytest -p no:cacheprovider -o addopts="" \\
        -q -s tests/io/test_fuzz_loaders.py -k long

(``EMBER_FUZZ_SEED`` picks another sequence of mutations.)
"""

from __future__ import annotations

import os

import pytest

from . import fuzzing


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return fuzzing.seed_files(tmp_path_factory.mktemp("seeds"))


def _report(tally) -> str:
    lines = [str(tally)]
    for name, what, problem, _ in tally.failures[:5]:
        lines.append(f"--- {name}, {what}:\n{problem}")
    return "\n".join(lines)


def test_the_seeds_are_valid(seeds, tmp_path):
    kinds = {"checkpoint", "train", "graph"} | ({"torch"} if fuzzing.torch_seeds() else set())
    assert {kind for kind, _ in seeds.values()} == kinds
    for name, (kind, data) in seeds.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert fuzzing.check_file(str(path), kind) is None, name
        assert fuzzing._reads(str(path), kind), name


@pytest.mark.parametrize("seed", [0, 1])
def test_a_seeded_slice_of_mutations_raises_only_ember_errors(seeds, tmp_path, seed):
    tally = fuzzing.fuzz(seeds, tmp_path, seed=seed, count=1500)
    assert tally.mutations == 1500
    if tally.failures:
        pytest.fail(_report(tally))
    assert tally.refused > tally.mutations // 2 and tally.loaded > 0  # both outcomes reached


@pytest.mark.skipif(not os.environ.get("EMBER_FUZZ_SECONDS"), reason="the long fuzz runs on demand")
def test_long_fuzz(seeds, tmp_path):
    seconds = float(os.environ["EMBER_FUZZ_SECONDS"])
    seed = int(os.environ.get("EMBER_FUZZ_SEED", "12345"))
    tally = fuzzing.fuzz(seeds, tmp_path, seed=seed, seconds=seconds)
    print(f"\nlong fuzz, seed {seed}, {seconds:.0f} s: {tally}")
    if tally.failures:
        pytest.fail(_report(tally))
