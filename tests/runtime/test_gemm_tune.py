"""kernels/gemm_tune.py: the GEMM's measured choices, their cache (files are not trusted), and
products equal to NumPy's whichever kernel a tuning picks."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ember.kernels import cgemm, cpool, gemm_tune

pytestmark = pytest.mark.skipif(not cgemm.available(np.float32), reason="no C compiler")

SKINNY, OWN, BLAS = gemm_tune.SKINNY, gemm_tune.OWN, gemm_tune.BLAS


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache directory, and no tuning held in memory."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(gemm_tune, "_loaded", {})
    monkeypatch.setattr(gemm_tune, "_current", None)
    return tmp_path


_ROWS = gemm_tune._FEW_ROWS  # (1, 2, 4, 8, 16, 32, 48, 64, 96, 128)
_PACKED = (0, 0, 0, 0, 1, 0, 1, 1, 1, 1)


def _fake(wake_s=1e-5, few=(SKINNY, SKINNY, BLAS, OWN, OWN, OWN, OWN, BLAS, OWN, OWN)):
    rows = ((524288, 2e-5, 1e-5, 1), (4194304, 1e-4, 2e-4, 0), (33554432, 1e-3, 1e-3, 0))
    rows += ((268435456, 5e-3, 1e-2, 0),)
    return gemm_tune.GemmTuning(
        gemm_tune.machine_key(), wake_s, 1e11, 3e10, dict.fromkeys(gemm_tune.DTYPES, rows),
        dict.fromkeys(gemm_tune.DTYPES, few), dict.fromkeys(gemm_tune.DTYPES, _PACKED),
    )  # fmt: skip


def test_measures_once_then_reads_the_cache(cache, monkeypatch):
    first = gemm_tune.calibrate()
    assert gemm_tune.calibration_path().is_file()
    assert set(first.products) == set(first.few) == set(first.packed)
    assert "float32" in first.products
    assert all(len(v) == len(_ROWS) for v in (*first.few.values(), *first.packed.values()))
    assert first.wake_s >= 0 and first.flops_per_s > 0 and first.bytes_per_s > 0
    assert 0 <= first.skinny_rows("float32") <= _ROWS[-1]  # (the most rows measured)

    def fail():
        raise AssertionError("measured again")

    monkeypatch.setattr(gemm_tune, "measure", fail)
    monkeypatch.setattr(gemm_tune, "_loaded", {})
    assert gemm_tune.calibrate() == first


def test_force_measures_again(cache, monkeypatch):
    gemm_tune.calibrate()
    fake = _fake()
    monkeypatch.setattr(gemm_tune, "measure", lambda *_: fake)
    assert gemm_tune.calibrate(force=True) == fake
    monkeypatch.setattr(gemm_tune, "_loaded", {})
    assert gemm_tune.calibrate() == fake  # and the file now holds it


def _valid() -> dict:
    return gemm_tune._to_json(_fake())


def _damaged():
    """Files `measure` never writes: each must be measured again, never believed."""
    yield "not json {"
    yield "[1, 2]"
    yield json.dumps({**_valid(), "machine": "another machine"})
    yield json.dumps({**_valid(), "format": 999})
    yield json.dumps({**_valid(), "extra": 1})
    yield json.dumps({k: v for k, v in _valid().items() if k != "few"})
    yield json.dumps({k: v for k, v in _valid().items() if k != "packed"})
    yield json.dumps({**_valid(), "wake_s": -1.0})
    yield json.dumps({**_valid(), "wake_s": "0.001"})
    yield json.dumps({**_valid(), "flops_per_s": 0})
    yield json.dumps({**_valid(), "bytes_per_s": True})
    yield json.dumps(_valid()).replace('"wake_s": 1e-05', '"wake_s": NaN')
    yield json.dumps(_valid()).replace('"flops_per_s": 100000000000.0', '"flops_per_s": Infinity')
    bad_code = _valid()
    bad_code["few"]["float32"][2] = 7
    yield json.dumps(bad_code)
    bool_code = _valid()
    bool_code["few"]["float32"][0] = True
    yield json.dumps(bool_code)
    short = _valid()
    short["few"]["float64"] = [0, 0]
    yield json.dumps(short)
    old = _valid()  # a version-1 table: row counts to 32 only
    old["few"]["float32"] = old["few"]["float32"][:6]
    yield json.dumps(old)
    for flags in ([0] * 6, [2] * len(_ROWS), [0.0] * len(_ROWS), [False] * len(_ROWS), "1"):
        packed = _valid()
        packed["packed"]["float32"] = flags
        yield json.dumps(packed)
    missing = _valid()
    del missing["packed"]["float64"]
    yield json.dumps(missing)
    falling = _valid()
    falling["products"]["float32"] = falling["products"]["float32"][::-1]
    yield json.dumps(falling)
    negative = _valid()
    negative["products"]["float32"][0][1] = -1.0
    yield json.dumps(negative)
    for choice in (2, True, 0.0, -1):
        forged = _valid()
        forged["products"]["float32"][1][3] = choice
        yield json.dumps(forged)
    three = _valid()  # a version-2 row: times without the choice
    three["products"]["float32"][0] = three["products"]["float32"][0][:3]
    yield json.dumps(three)
    other_dtype = _valid()
    other_dtype["products"]["int64"] = other_dtype["products"]["float32"]
    other_dtype["few"]["int64"] = other_dtype["few"]["float32"]
    yield json.dumps(other_dtype)
    yield json.dumps({**_valid(), "products": "x" * 100})
    yield "[" * 100000 + "]" * 100000


@pytest.mark.parametrize("text", list(_damaged()))
def test_a_damaged_or_forged_cache_file_is_measured_again(cache, monkeypatch, text):
    path = gemm_tune.calibration_path()
    path.write_text(text)
    measured = _fake(wake_s=2e-5)
    monkeypatch.setattr(gemm_tune, "measure", lambda *_: measured)
    assert gemm_tune.calibrate() == measured
    assert gemm_tune._read(path) == measured  # replaced by the measured one


def test_a_valid_file_is_read_as_written(cache):
    path = gemm_tune.calibration_path()
    path.write_text(json.dumps(_valid()))
    assert gemm_tune.calibrate() == _fake()


def test_choices_follow_the_measured_table():
    tuning = _fake()
    assert not tuning.own_faster("float32", 300_000)  # nearest row: BLAS faster
    assert tuning.own_faster("float32", 5_000_000)
    assert tuning.own_faster("float32", 1 << 40)  # a tie goes to ember's own
    assert tuning.few_rows("float32", 1) == SKINNY
    assert tuning.few_rows("float32", 3) == BLAS  # rounds up to the 4 rows measured
    assert tuning.few_rows("float32", 32) == OWN
    assert tuning.few_rows("float32", 33) == OWN  # rounds up to the 48 rows measured
    assert tuning.few_rows("float32", 64) == BLAS
    assert tuning.few_rows("float32", 128) == OWN
    assert tuning.few_rows("float32", 129) is None
    assert not tuning.prepacked("float32", 8) and tuning.prepacked("float32", 9)
    assert not tuning.prepacked("float32", 17) and tuning.prepacked("float32", 33)
    assert tuning.prepacked("float64", 128) and not tuning.prepacked("float64", 129)
    assert not tuning.prepacked("int32", 64)
    assert tuning.skinny_rows("float32") == 2
    assert tuning.skinny_rows("int32") == 0
    # sharing pays from wake_s * p / (p - 1) seconds of work
    assert tuning.split_flops(2) == int(2e-5 * 1e11)
    assert tuning.split_flops(4) < tuning.split_flops(2)
    assert tuning.split_flops(1) >= 1 << 62
    assert tuning.split_bytes(2) == int(2e-5 * 3e10)
    assert _fake(wake_s=0.0).split_flops(2) == 1


def test_a_choice_changes_only_for_a_clearly_faster_kernel():
    rng = np.random.default_rng(0)
    noisy = [list(1.0 + 0.2 * rng.random(7)) for _ in range(3)]  # three kernels alike
    for held in range(3):  # whichever was held stays, whatever the medians say
        assert gemm_tune.choose(noisy, held) == held
    fast = [0.5 + 0.01 * i for i in range(7)]
    faster = [0.3 + 0.01 * i for i in range(7)]
    assert gemm_tune.choose([noisy[0], fast, noisy[1]], 0) == 1
    assert gemm_tune.choose([faster, fast, noisy[1]], 2) == 0  # the lowest median of the two
    assert gemm_tune.choose([faster, fast], 1) == 0 and gemm_tune.choose([fast, faster], 1) == 1
    # overlapping middle halves are not clear, disjoint ones are
    assert not gemm_tune.clearly_faster([1, 2, 3, 4, 5], [3, 4, 5, 6, 7])
    assert gemm_tune.clearly_faster([1, 2, 3, 4, 5], [4.5, 5, 6, 7, 8])
    assert not gemm_tune.clearly_faster([1, 2, 3, 4, 5], [1, 2, 3, 4, 5])


def test_measuring_again_holds_the_previous_choices_of_close_calls(monkeypatch):
    """Every kernel timed alike (a close call everywhere): a new measurement keeps the previous
    tuning's choices, and without one takes the kernel doing least work (own, packed)."""

    def alike(fns, samples=7):  # (a spread of 30%, the same for every kernel)
        return [[1e-4 * (1 + 0.05 * i) for i in (3, 0, 6, 1, 5, 2, 4)[:samples]] for _ in fns]

    monkeypatch.setattr(gemm_tune, "_samples", alike)
    monkeypatch.setattr(gemm_tune, "_measure_wake", lambda functions: 1e-6)
    has_blas = cgemm._functions(np.dtype(np.float32))[1] is not None
    fresh = gemm_tune.measure()
    for name in fresh.few:
        assert fresh.few[name] == (OWN,) * len(_ROWS)
        assert fresh.packed[name] == (1,) * len(_ROWS)
        assert all(row[3] == 0 for row in fresh.products[name])
    before = _fake()
    again = gemm_tune.measure(before)
    for name in again.few:
        # (a BLAS choice held where there is no BLAS to call: ember's own)
        want = tuple(c if has_blas or c != BLAS else OWN for c in before.few[name])
        assert again.few[name] == want
        assert again.packed[name] == before.packed[name]
        assert [row[3] for row in again.products[name]] == ([1, 0, 0, 0] if has_blas else [0] * 4)


def test_forced_calibration_hands_the_held_tuning_to_measure(cache, monkeypatch):
    path = gemm_tune.calibration_path()
    path.write_text(json.dumps(_valid()))
    seen = []
    monkeypatch.setattr(gemm_tune, "measure", lambda *a: seen.append(a) or _fake(wake_s=3e-5))
    assert gemm_tune.calibrate(force=True) == _fake(wake_s=3e-5)
    assert seen == [(_fake(),)]


def _tolerance(dtype, k: int, scale: float) -> float:
    """A sum of k products in any order: within a few eps * sqrt(k) of the exact one, relative
    to the sum of the terms' magnitudes (``scale``)."""
    return 8 * np.finfo(dtype).eps * math.sqrt(k) * scale


def _check(got, a, b):
    exact = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    assert got is not None and got.dtype == a.dtype and got.shape == exact.shape
    err = np.abs(got.astype(np.float64) - exact)
    assert np.all(err <= _tolerance(a.dtype, a.shape[-1], 1.0) * np.maximum(scale, 1e-30))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", [SKINNY, OWN, BLAS])
@pytest.mark.parametrize("threads", [1, 2])
def test_every_choice_for_few_rows_equals_numpy(dtype, kernel, threads, monkeypatch):
    if kernel == BLAS and cgemm._functions(np.dtype(dtype))[1] is None:
        pytest.skip("NumPy's BLAS is not an OpenBLAS ember can call")
    monkeypatch.delenv("EMBER_GEMM", raising=False)
    # (no packs: a size whose product runs on a pack where there is one runs ember's own GEMM
    # where there is none, whatever the few-rows choice: the pack's sums, kernels/cgemm.py)
    monkeypatch.setenv("EMBER_PREPACK", "0")
    tuning = _fake(wake_s=0.0 if threads == 2 else 1e9, few=(kernel,) * len(_ROWS))
    monkeypatch.setattr(cgemm, "tuning", lambda: tuning)
    monkeypatch.setattr(cgemm, "BLAS_ONE_THREAD", 0)
    used = []
    for name in ("_skinny", "_blocked"):
        original = getattr(cgemm, name)

        def spy(*a, _original=original, _name=name, **k):
            used.append((_name, k.get("blas")))
            return _original(*a, **k)

        monkeypatch.setattr(cgemm, name, spy)
    rng = np.random.default_rng(kernel)
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    want = {SKINNY: ("_skinny", None), OWN: ("_blocked", False), BLAS: ("_blocked", True)}[kernel]
    try:
        for m in (1, 3, 8, 17, 32, 33, 100):
            for k, n in ((5, 7), (300, 130), (64, 33)):
                a = rng.standard_normal((m, k)).astype(dtype)
                for b in (rng.standard_normal((k, n)), rng.standard_normal((n, k)).T):
                    used.clear()
                    _check(cgemm.matmul(a, b.astype(dtype)), a, b.astype(dtype))
                    transposed = not b.flags.c_contiguous
                    if kernel != SKINNY or cgemm.full_blocks(m, n, transposed, a.itemsize):
                        assert used == [want], (m, k, n, transposed)
                    else:  # (a narrow product's sums of rows: the blocked GEMM, either kind)
                        assert [name for name, _ in used] == ["_blocked"], (m, k, n)
    finally:
        cpool.set_num_threads(before)


@pytest.mark.parametrize("choice", ["own", "blas"])
def test_the_environment_overrides_the_measured_choice(choice, monkeypatch):
    if choice == "blas" and cgemm._functions(np.dtype(np.float32))[1] is None:
        pytest.skip("NumPy's BLAS is not an OpenBLAS ember can call")
    tuning = _fake(few=(BLAS if choice == "own" else OWN,) * len(_ROWS))
    monkeypatch.setattr(cgemm, "tuning", lambda: tuning)
    monkeypatch.setenv("EMBER_GEMM", choice)
    used = []
    original = cgemm._blocked
    monkeypatch.setattr(
        cgemm, "_blocked", lambda *a, **k: used.append(k["blas"]) or original(*a, **k)
    )
    rng = np.random.default_rng(1)
    for m, k, n in ((16, 200, 100), (300, 200, 100)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        _check(cgemm.matmul(a, b), a, b)
    assert used == [choice == "blas"] * 2


def test_the_former_constants_read_the_measured_values(cache):
    tuning = gemm_tune.calibrate()
    assert cgemm.SPLIT_FLOPS == tuning.split_flops(cpool.get_num_threads())
    assert cgemm.SKINNY_ROWS == tuning.skinny_rows("float32")
    with pytest.raises(AttributeError):
        cgemm.NOT_A_NAME  # noqa: B018
