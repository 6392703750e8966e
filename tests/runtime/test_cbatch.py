"""A graph's C kernels built in one compiler run (kernels/cbatch.py, runtime/prebuild.py): the
names each source defines are read and renamed apart, every source gets its own cache entry,
and what cannot be built together is left to `ccompile.load`, which builds it alone."""

import os
import uuid

import numpy as np
import pytest

import ember
from ember.kernels import cbatch, ccache_limit, ccompile, cfuse

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="needs a C compiler")


def test_the_names_a_source_defines_at_file_scope():
    source = """
#include <stddef.h>
#define LIMIT 4
/* a comment with } and { and struct fake { */
typedef void (*task_fn)(void *, long, long);
typedef long long v4 __attribute__((vector_size(32)));
struct job { long n; const float *a; };
static long counter = 0;
static const int table[3] = {1, 2, 3};
long visible;
extern int elsewhere;
float expf(float);
__attribute__((simd("notinbranch"))) float erff(float);
static void part(void *job_, long lo, long hi);
static inline float twice(float x) { return 2 * x; }
static void part(void *job_, long lo,
                 long hi) {
  struct job *job = job_;
  if (lo < hi) { counter++; }
}
void entry(long n, float *x) { (void)n; (void)x; }
"""
    assert cbatch.defined_names(source) == [
        "task_fn",
        "v4",
        "job",
        "counter",
        "table",
        "visible",
        "part",
        "twice",
        "part",
        "entry",
    ]


@pytest.mark.parametrize(
    "source",
    [
        "typedef struct { int a; } pair;",
        "void (*chooser(int k))(int) { return 0; }",
        "int x = 1; }",
        "static void f(void) {",
    ],
    ids=["typedef-struct", "function-pointer-result", "stray-brace", "unclosed"],
)
def test_a_source_this_reader_does_not_understand_is_left_alone(source):
    assert cbatch.defined_names(source) is None
    assert cbatch.combine({"a" * 64: source, "b" * 64: "void g(void) {}"})[1] == ["b" * 64]


def test_sources_whose_macros_disagree_are_not_combined():
    one = "#define SCALE 2\nvoid f(float *x) { x[0] *= SCALE; }\n"
    two = "#define SCALE 3\nvoid f(float *x) { x[0] *= SCALE; }\n"
    same = "#define SCALE 2\nvoid f(float *x) { x[0] += SCALE; }\n"
    _, kept = cbatch.combine({"1" * 64: one, "2" * 64: two, "3" * 64: same})
    assert kept == ["1" * 64, "3" * 64]


def _sources(count, body="x[i] = x[i] * 2.0f + 1.0f;"):
    """``count`` distinct kernels (a unique comment each: their keys are new to this process),
    defining the same names, as generated loops do."""
    tag = uuid.uuid4().hex
    return [
        f"/* {tag} {k} */\n#include <stddef.h>\nstruct job {{ float *x; long n; }};\n"
        f"static void part(struct job *j) {{ float *x = j->x; "
        f"for (long i = 0; i < j->n; i++) {{ {body} }} x[0] += {k}.0f; }}\n"
        "void kernel(float *x, long n) { struct job j = { x, n }; part(&j); }\n"
        for k in range(count)
    ]


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ccompile, "stats", ccompile.Stats())
    monkeypatch.setattr(cbatch, "_failed_flags", set())
    return tmp_path


@needs_cc
def test_kernels_built_together_each_load_from_their_own_entry(fresh_cache):
    import ctypes

    sources = _sources(5)
    flags = ("-O1", "-fPIC", "-shared", "-std=gnu11")
    assert cbatch.build_together([(s, flags) for s in sources]) == 5
    assert ccompile.stats.compiles == 1 and ccompile.stats.batched == 5
    libraries = sorted(fresh_cache.glob("*.so"))
    assert len(libraries) == 5 and all(p.stat().st_nlink == 5 for p in libraries)
    assert not list(fresh_cache.glob("*.failed.c")) and not list(fresh_cache.glob(".*"))
    arg = [ctypes.c_void_p, ctypes.c_long]
    for k, source in enumerate(sources):
        fn = ccompile.load(source, "kernel", arg, flags=flags)
        x = np.ones(4, np.float32)
        fn(x.ctypes.data, 4)
        assert x.tolist() == [3.0 + k, 3.0, 3.0, 3.0]  # each its own kernel
    assert ccompile.stats.compiles == 1 and ccompile.stats.disk_hits == 5
    # built already: nothing more to build
    assert cbatch.build_together([(s, flags) for s in sources]) == 0


@needs_cc
def test_a_group_that_fails_leaves_each_source_to_be_built_alone(fresh_cache):
    import ctypes

    good = _sources(2)
    bad = _sources(1, body="x[i] = undeclared_name;")[0]
    flags = ("-O1", "-fPIC", "-shared", "-std=gnu11")
    assert cbatch.build_together([(s, flags) for s in (*good, bad)]) == 0
    assert not list(fresh_cache.iterdir())  # no debris: no library, no kept source
    assert cbatch.build_together([(s, flags) for s in _sources(2)]) == 0  # not tried again
    fn = ccompile.load(good[0], "kernel", [ctypes.c_void_p, ctypes.c_long], flags=flags)
    x = np.ones(2, np.float32)
    fn(x.ctypes.data, 2)
    assert x.tolist() == [3.0, 3.0]
    with pytest.raises(ccompile.CompileError, match="undeclared_name"):
        ccompile.load(bad, "kernel", [ctypes.c_void_p, ctypes.c_long], flags=flags)


@needs_cc
@pytest.mark.parametrize("dtype", [ember.float64, ember.bfloat16])
def test_a_graphs_loops_build_together_and_compute_as_the_interpreter(
    fresh_cache, monkeypatch, dtype
):
    monkeypatch.setattr(ccompile, "_libraries", {})
    monkeypatch.setattr(ccompile, "_functions", {})
    monkeypatch.setattr(ccompile, "_failures", {})

    def f(x, w):
        w = w.clone().requires_grad_()
        h = ember.nn.functional.gelu(x @ w) * 0.5 + x.tanh()  # a flat loop
        s = h.softmax(-1)  # row reductions
        c = (h * h).sum(0)  # a column reduction
        loss = (s - 1.0).abs().sum() + c.sum()  # a whole-tensor sum
        loss = loss + (w * w * 0.5).tanh().sum()  # (of 16 bits gelu is one op: a loop more)
        loss.backward()  # and the backward's loops
        return s, c, loss, w.grad

    x = ember.randn(16, 16).to(dtype)
    w = ember.randn(16, 16).to(dtype)
    got = ember.function(f)(x, w)
    want = ember.function(f, executor="interpreter")(x, w)
    assert ccompile.stats.batched >= 4
    tolerance = 1e-12 if dtype is ember.float64 else 2e-2
    for g, e in zip(got, want):
        np.testing.assert_allclose(
            g.float().numpy(), e.float().numpy(), rtol=tolerance, atol=tolerance
        )


def test_a_library_under_several_names_counts_its_bytes_once(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_KERNEL_CACHE_MB", "1")
    shared = tmp_path / ("a" * 64 + ".so")
    shared.write_bytes(b"x" * 300_000)
    for name in ("b", "c", "d"):
        os.link(shared, tmp_path / (name * 64 + ".so"))
    for name in "abcd":
        (tmp_path / (name * 64 + ".sha256")).write_bytes(b"0" * 64)
    left, removed = ccache_limit._evict(tmp_path)
    assert removed == 0 and left == 300_000 + 4 * 64


def test_loop_requests_are_what_the_loops_build():
    from ember.ops import REGISTRY
    from ember.ops.program import Input, Instr
    from ember.types import TensorType

    t = TensorType((8, 4), ember.float32)
    program = (Instr(REGISTRY["exp"], (Input(0),), ()),)
    source, flags = cfuse.loop_request(program, (0,), [t], [t])
    assert source == cfuse.source_of(program, (0,), [t], [t]) + cfuse.step_source([t], [t])
    assert "-lm" in flags and "-O1" in flags


@needs_cc
def test_processes_building_one_group_at_once_all_get_their_kernels(fresh_cache):
    import json
    import subprocess
    import sys

    sources = _sources(6)
    listed = fresh_cache.parent / "sources.json"
    listed.write_text(json.dumps(sources))
    script = (
        "import sys, json, ctypes, numpy as np\n"
        "from ember.kernels import cbatch, ccompile\n"
        "sources = json.load(open(sys.argv[1]))\n"
        "flags = ('-O1', '-fPIC', '-shared', '-std=gnu11')\n"
        "cbatch.build_together([(s, flags) for s in sources])\n"
        "for k, s in enumerate(sources):\n"
        "    fn = ccompile.load(s, 'kernel', [ctypes.c_void_p, ctypes.c_long], flags=flags)\n"
        "    x = np.ones(2, np.float32)\n"
        "    fn(x.ctypes.data, 2)\n"
        "    assert x.tolist() == [3.0 + k, 3.0], x\n"
    )
    runs = [subprocess.Popen([sys.executable, "-c", script, str(listed)]) for _ in range(3)]
    assert [run.wait(timeout=300) for run in runs] == [0, 0, 0]
    # no group library is left behind: each kernel's own entry only
    assert len(list(fresh_cache.glob("*.so"))) == len(sources)


@needs_cc
def test_a_group_whose_entries_cannot_be_linked_leaves_them_to_load(fresh_cache, monkeypatch):
    import ctypes

    def vanished(library, target):  # (another process removed the group's files meanwhile)
        raise FileNotFoundError(library)

    monkeypatch.setattr(cbatch, "_link_or_copy", vanished)
    sources = _sources(3)
    flags = ("-O1", "-fPIC", "-shared", "-std=gnu11")
    assert cbatch.build_together([(s, flags) for s in sources]) == 0
    assert not list(fresh_cache.iterdir())  # (no group library, no hash without its library)
    fn = ccompile.load(sources[2], "kernel", [ctypes.c_void_p, ctypes.c_long], flags=flags)
    x = np.ones(2, np.float32)
    fn(x.ctypes.data, 2)
    assert x.tolist() == [5.0, 3.0]
