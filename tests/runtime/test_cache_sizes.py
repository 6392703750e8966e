"""kernels/cache_sizes.py: the caches the kernels size themselves by, from sysconf, else
Linux's sysfs, else the smallest current sizes; and the fused loops' choice of non-temporal
stores derived from the last-level cache (kernels/cfuse.py `stream_min`)."""

from __future__ import annotations

import numpy as np

from ember.kernels import cache_sizes, cfuse


def _fresh(monkeypatch, sysconf=None, sysfs=None):
    cache_sizes.l2_bytes.cache_clear()
    cache_sizes.last_level_bytes.cache_clear()
    monkeypatch.setattr(cache_sizes, "_sysconf", lambda name: (sysconf or {}).get(name, 0))
    if sysfs is not None:
        monkeypatch.setattr(cache_sizes, "_SYSFS", sysfs)


def test_the_machine_reports_positive_sizes_ordered_by_level():
    cache_sizes.l2_bytes.cache_clear()
    cache_sizes.last_level_bytes.cache_clear()
    assert cache_sizes.l2_bytes() > 0
    assert cache_sizes.last_level_bytes() >= cache_sizes.l2_bytes() or cache_sizes._sysconf(
        "SC_LEVEL3_CACHE_SIZE"
    )


def test_sysconf_answers_first(monkeypatch):
    _fresh(monkeypatch, {"SC_LEVEL2_CACHE_SIZE": 2 << 20, "SC_LEVEL3_CACHE_SIZE": 96 << 20})
    try:
        assert cache_sizes.l2_bytes() == 2 << 20
        assert cache_sizes.last_level_bytes() == 96 << 20
    finally:
        cache_sizes.l2_bytes.cache_clear()
        cache_sizes.last_level_bytes.cache_clear()


def test_sysfs_where_sysconf_says_nothing(monkeypatch, tmp_path):
    for index, (level, kind, size) in enumerate(
        [
            (1, "Data", "48K"),
            (1, "Instruction", "32K"),
            (2, "Unified", "1280K"),
            (3, "Unified", "30M"),
        ]
    ):
        entry = tmp_path / f"index{index}"
        entry.mkdir()
        (entry / "level").write_text(f"{level}\n")
        (entry / "type").write_text(f"{kind}\n")
        (entry / "size").write_text(f"{size}\n")
    (tmp_path / "index9").mkdir()  # (an unreadable entry is skipped)
    _fresh(monkeypatch, sysfs=tmp_path)
    try:
        assert cache_sizes.l2_bytes() == 1280 << 10
        assert cache_sizes.last_level_bytes() == 30 << 20
    finally:
        cache_sizes.l2_bytes.cache_clear()
        cache_sizes.last_level_bytes.cache_clear()


def test_the_fallbacks_where_neither_says(monkeypatch, tmp_path):
    _fresh(monkeypatch, sysfs=tmp_path / "missing")
    try:
        assert cache_sizes.l2_bytes() == 256 << 10
        assert cache_sizes.last_level_bytes() == 8 << 20
    finally:
        cache_sizes.l2_bytes.cache_clear()
        cache_sizes.last_level_bytes.cache_clear()


def test_loops_stream_only_what_outgrows_the_last_level_cache(monkeypatch):
    monkeypatch.setattr(cache_sizes, "last_level_bytes", lambda: 32 << 20)
    # a float32 ReLU moves 8 bytes an element: streamed from half the cache's worth of them
    assert cfuse.stream_min(8) == (16 << 20) // 8
    assert cfuse.stream_min(17) == -(-(16 << 20) // 17)
    monkeypatch.setattr(cache_sizes, "last_level_bytes", lambda: 1 << 10)
    assert cfuse.stream_min(8) == 4 * cfuse.BLOCK  # (never below a few blocks)


def test_the_generated_loop_tests_its_whole_length_against_the_threshold(monkeypatch):
    import ember
    from ember.ops import REGISTRY
    from ember.ops.program import Input, Instr
    from ember.symbolic import sym
    from ember.types import TensorType

    monkeypatch.setattr(cache_sizes, "last_level_bytes", lambda: 32 << 20)
    t = TensorType((sym("n0"),), ember.float32)
    instr = Instr(REGISTRY["relu"], (Input(0),), ())
    source = cfuse.source_of((instr,), (0,), [t], [t])
    assert f"if (n >= {(16 << 20) // 8} && hi - lo >= {4 * cfuse.BLOCK})" in source
    assert np.dtype(np.float32).itemsize == 4


def test_a_loop_of_known_size_below_the_threshold_has_no_streaming_blocks(monkeypatch):
    import ember
    from ember.ops import REGISTRY
    from ember.ops.program import Input, Instr
    from ember.types import TensorType

    monkeypatch.setattr(cache_sizes, "last_level_bytes", lambda: 32 << 20)
    instr = Instr(REGISTRY["relu"], (Input(0),), ())
    threshold = (16 << 20) // 8
    for elements, streams in ((threshold - 1, False), (threshold, True), (1000, False)):
        t = TensorType((elements,), ember.float32)
        source = cfuse.source_of((instr,), (0,), [t], [t])
        assert ("__builtin_ia32_movntdq256" in source) is streams, elements
