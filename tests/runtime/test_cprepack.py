"""kernels/cprepack.py: products by weights packed once equal NumPy's, and a weight updated in
place (by ops, optimizers, ``ember.function`` training steps, ``.data =``) is never read from
stale panels; the packs stay within their memory bound and go with their arrays."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest

import ember
from ember import nn
from ember.kernels import cgemm, cprepack, gemm_tune

needs_kernel = pytest.mark.skipif(
    not (cgemm.available(np.float32) and cprepack.available(np.float32)),
    reason="no C compiler: products run on NumPy (tests/runtime/test_gemm_fallback.py)",
)


@pytest.fixture
def forced(monkeypatch):
    """Packs used wherever they apply (whatever this machine measured), none left from before,
    and a record of the products that ran on one."""
    monkeypatch.setenv("EMBER_PREPACK", "1")
    monkeypatch.delenv("EMBER_GEMM", raising=False)
    monkeypatch.delenv("EMBER_PREPACK_BYTES", raising=False)
    monkeypatch.setattr(cgemm, "BLAS_ONE_THREAD", 0)
    cprepack.clear()
    gemm_tune.current()  # (measured first where not cached: its timings are not these calls)
    used = []
    original = cprepack.product

    def spy(a, entry, out, *, threaded, bias=None):
        result = original(a, entry, out, threaded=threaded, bias=bias)
        used.append(result is not None)
        return result

    monkeypatch.setattr(cprepack, "product", spy)
    yield used
    cprepack.clear()


def _tolerance(dtype, k: int) -> float:
    """A sum of k products in any order: within a few eps * sqrt(k) of the exact one, relative
    to the sum of the terms' magnitudes."""
    return 8 * np.finfo(dtype).eps * math.sqrt(k)


def _check(got, a, b):
    exact = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    assert got is not None and got.dtype == a.dtype and got.shape == exact.shape
    finite = np.isfinite(exact)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(exact))
    np.testing.assert_array_equal(
        got[~finite & ~np.isnan(exact)], exact[~finite & ~np.isnan(exact)]
    )
    with np.errstate(invalid="ignore"):  # (inf - inf where the result is not finite)
        err = np.abs(got.astype(np.float64) - exact)[finite]
    assert np.all(err <= _tolerance(a.dtype, a.shape[-1]) * np.maximum(scale[finite], 1e-30))


def _weights(rng, dtype, k, n):
    """A weight's forms a product reads: a linear layer's transposed (n, k) weight, a row-major
    (k, n) one, and a strided view of a wider array."""
    w = rng.standard_normal((n, k)).astype(dtype)
    plain = rng.standard_normal((k, n)).astype(dtype)
    wide = rng.standard_normal((k, 2 * n)).astype(dtype)
    return [(w, w.T), (plain, plain), (wide, wide[:, ::2])]


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2])
def test_products_by_packed_weights_equal_numpy(dtype, threads, forced, monkeypatch):
    from ember.kernels import cpool

    monkeypatch.setattr(cgemm, "split_flops", lambda: 0 if threads == 2 else 1 << 62)
    rng = np.random.default_rng(7)
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        for m in (1, 3, 8, 9, 33, 65, 128):
            for k, n in ((5, 7), (130, 49), (192, 200)):
                for owner, b in _weights(rng, dtype, k, n):
                    cprepack.watch(owner, [0])
                    a = rng.standard_normal((m, k)).astype(dtype)
                    _check(cgemm.matmul(a, b), a, b)
                    _check(cgemm.matmul(a, b), a, b)  # (the pack, reused)
                    rows = rng.standard_normal((2 * m, k)).astype(dtype)[::2]  # strided rows
                    _check(cgemm.matmul(rows, b), rows, b)
                    out = np.full((m, n), np.nan, dtype)
                    assert cgemm.matmul(a, b, out) is out
                    _check(out, a, b)
    finally:
        cpool.set_num_threads(before)
    assert forced and all(forced)


@needs_kernel
@pytest.mark.parametrize("prepack", ["", "1"])
def test_linear_layers_on_packs_equal_the_general_product_plus_bias(prepack, forced, monkeypatch):
    """`cgemm.packed_linear` (an eager linear layer's route: the bias added in the pack's C
    call) gives the general route's values bit for bit (`cgemm.matmul`, then ``+= bias``) at
    every rank, with and without a bias, before the weight is packed (its first product) and
    after; an updated weight is read again; a layout or bias it does not take is declined."""
    monkeypatch.setenv("EMBER_PREPACK", prepack)
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        for shape, k, n in (((9, 130), 130, 49), ((2, 33, 64), 64, 200), ((1, 3, 5, 96), 96, 7)):
            w = rng.standard_normal((n, k)).astype(dtype)
            cprepack.watch(w, counter := [0])
            for bias in (None, rng.standard_normal(n).astype(dtype)):
                for _ in range(3):  # (unpacked, then packed, then reused)
                    x = rng.standard_normal(shape).astype(dtype)
                    got = cgemm.packed_linear(x, w, bias)
                    rows = x.size // k
                    if got is None:  # (this machine's measured kernel for the size: not a pack)
                        assert cgemm.product_kernel(rows, n, k, dtype, True) != cgemm.PACKED
                        continue
                    want = cgemm.gemm(x.reshape(-1, k), w.T)
                    if bias is not None:
                        want += bias
                    np.testing.assert_array_equal(got, want.reshape(shape[:-1] + (n,)))
                w += 1.0
                counter[0] += 1
                got = cgemm.packed_linear(x, w, bias)
                if got is None:
                    continue
                _check(got.reshape(-1, n) - (0 if bias is None else bias), x.reshape(-1, k), w.T)
    x = rng.standard_normal((40, 64)).astype(np.float32)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    unwatched = cgemm.packed_linear(x, w, None)
    if unwatched is not None:  # (where this machine runs the size on a pack)
        np.testing.assert_array_equal(unwatched, cgemm.gemm(x, w.T))
    assert cgemm.packed_linear(x[:, ::2], w[:, :32], None) is None  # (strided rows)
    assert cgemm.packed_linear(np.stack([x, x], 1)[::2], w, None) is None  # (not C-contiguous)
    assert cgemm.packed_linear(x, w, np.ones(1, np.float32)) is None  # (a broadcast bias)
    assert cgemm.packed_linear(x, w.astype(np.float64), None) is None
    assert all(forced)


@needs_kernel
def test_views_alike_but_at_other_addresses_have_packs_of_their_own(forced):
    """Halves of one watched weight, as a layer's ``weight.T`` (transposed contiguous rows),
    as plain rows, and as strided columns: each view of the same shape and strides keeps its
    own pack (they are told apart by address)."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((96, 40)).astype(np.float32)
    cprepack.watch(w, [0])
    a = rng.standard_normal((33, 40)).astype(np.float32)
    rows = rng.standard_normal((33, 48)).astype(np.float32)
    for _ in range(2):  # (packed, then reused)
        for b in (w[:48].T, w[48:].T):
            _check(cgemm.matmul(a, b), a, b)
        for b in (w[:48, :20], w[48:, 20:]):  # (48, 20): plain rows at two offsets
            _check(cgemm.matmul(rows, b), rows, b)
    assert forced and all(forced)


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_and_inf_propagate_through_packed_products(dtype, forced):
    rng = np.random.default_rng(3)
    m, k, n = 40, 70, 60
    w = rng.standard_normal((n, k)).astype(dtype)
    w[3, 5], w[10, 0] = np.nan, np.inf
    cprepack.watch(w, [0])
    a = rng.standard_normal((m, k)).astype(dtype)
    a[7, 9], a[20, 1] = np.inf, -np.inf
    _check(cgemm.matmul(a, w.T), a, w.T)
    assert forced == [True]


@needs_kernel
def test_an_unwatched_weight_is_never_packed(forced):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 96)).astype(np.float32)
    w = rng.standard_normal((80, 96)).astype(np.float32)
    _check(cgemm.matmul(a, w.T), a, w.T)
    assert forced == [] and cprepack.held_bytes() == 0


def _reference(layer, x):
    # (copies: the parameters' own arrays handed out by .numpy() would never be packed again)
    w = layer.weight.detach().clone().numpy().astype(np.float64)
    b = layer.bias.detach().clone().numpy().astype(np.float64)
    return x.numpy().astype(np.float64) @ w.T + b


def _close(got, want, k):
    np.testing.assert_allclose(
        got.detach().numpy(), want, rtol=0, atol=64 * _tolerance(np.float32, k)
    )


@needs_kernel
def test_in_place_updates_are_never_read_from_stale_panels(forced):
    ember.manual_seed(0)
    layer = nn.Linear(96, 80)
    x = ember.randn(48, 96)
    _close(layer(x), _reference(layer, x), 96)
    updates = [
        lambda: layer.weight.mul_(-0.5),
        lambda: layer.weight.add_(1.0),
        lambda: layer.weight.copy_(ember.randn(80, 96)),
        lambda: layer.weight[3].fill_(7.0),  # a view's write: the counter is shared
        lambda: layer.weight.data.zero_(),
    ]
    fn = ember.function(lambda t: layer(t))
    for update in updates:
        with ember.no_grad():
            update()
            _close(layer(x), _reference(layer, x), 96)
            _close(fn(x), _reference(layer, x), 96)
    assert forced and all(forced)


@needs_kernel
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_optimizer_steps_update_the_packed_weights(optimizer, forced):
    ember.manual_seed(1)
    model = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 10))
    make = ember.optim.SGD if optimizer == "sgd" else ember.optim.AdamW
    opt = make(model.parameters(), lr=0.1)
    x, y = ember.randn(40, 64), ember.randint(0, 10, (40,))

    def reference(t):
        h = np.maximum(_reference(model[0], t), 0).astype(np.float32)
        return _reference(model[2], ember.tensor(h))

    for _ in range(3):  # eager: forward, backward, step, and the forward sees the new weights
        with ember.no_grad():
            _close(model(x), reference(x), 96)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    with ember.no_grad():
        _close(model(x), reference(x), 96)
    assert forced and all(forced)


@needs_kernel
def test_a_captured_training_step_and_its_later_forwards_see_every_update(forced):
    ember.manual_seed(2)
    eager_model = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 10))
    model = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 10))
    model.load_state_dict(eager_model.state_dict())
    opts = [ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (eager_model, model)]
    x, y = ember.randn(40, 64), ember.randint(0, 10, (40,))

    def step(m, opt, t, labels):
        # a step that reads the weights again after updating them, in the same call
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(t), labels)
        loss.backward()
        opt.step()
        return m(t)

    captured = ember.function(lambda t, labels: step(model, opts[1], t, labels))
    infer = ember.function(lambda t: model(t))
    for _ in range(3):
        want = step(eager_model, opts[0], x, y)
        got = captured(x, y)
        np.testing.assert_allclose(
            got.detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5
        )
        with ember.no_grad():
            np.testing.assert_allclose(
                infer(x).numpy(), eager_model(x).numpy(), rtol=1e-4, atol=1e-5
            )
    assert forced and all(forced)


@needs_kernel
def test_a_replaced_parameter_array_is_watched_and_the_old_one_let_go(forced):
    layer = nn.Linear(64, 72)
    x = ember.randn(40, 64)
    with ember.no_grad():
        layer(x)
        held = cprepack.held_bytes()
        assert held > 0
        layer.weight = nn.Parameter(ember.randn(72, 64))
        _close(layer(x), _reference(layer, x), 64)
    gc.collect()
    assert cprepack.held_bytes() == held  # the old array's pack went with it
    assert forced == [True, True]


def _handed_out(layer, x):  # packed first, then handed out and written
    layer(x)
    return layer.weight.detach().numpy()


def _through_asarray(layer, x):
    layer(x)
    return np.asarray(layer.weight)


def _through_a_view(layer, x):
    layer(x)
    return layer.weight[:36].numpy().base  # (a view's array: its base is the weight's)


def _fresh():
    return np.random.default_rng(3).standard_normal((72, 64)).astype(np.float32)


def _from_numpy(layer, x):
    array = _fresh()
    layer.weight = nn.Parameter(ember.from_numpy(array))
    return array


def _as_tensor(layer, x):
    array = _fresh()
    layer.weight = nn.Parameter(ember.as_tensor(array))
    return array


def _parameter_of_an_array(layer, x):
    array = _fresh()
    layer.weight = nn.Parameter(array)
    return array


def _data_set_to_an_array(layer, x):
    layer(x)
    array = _fresh()
    layer.weight.data = array
    return array


@needs_kernel
@pytest.mark.parametrize(
    "way",
    [_handed_out, _through_asarray, _through_a_view, _from_numpy, _as_tensor,
     _parameter_of_an_array, _data_set_to_an_array],
    ids=lambda f: f.__name__.strip("_"),
)  # fmt: skip
def test_arrays_written_behind_the_counters_are_never_packed(way, forced):
    """A parameter's array handed out by .numpy() (or np.asarray), or shared with a NumPy
    array its caller holds (from_numpy, as_tensor, Parameter(ndarray), .data = ndarray), can
    be written without any version counter moving: never read from packs."""
    x = ember.randn(40, 64)
    layer = nn.Linear(64, 72)
    with ember.no_grad():
        writable = way(layer, x)
        for scale in (2.0, -1.0):
            layer(x)  # (a pack, were one made, would hold the values before the write)
            writable *= scale  # behind every counter
            _close(layer(x), _reference(layer, x), 64)


@needs_kernel
def test_memory_another_tensor_writes_is_not_packed_and_copied_weights_are_seen(forced):
    from ember import zoo

    layer = nn.Linear(64, 72)
    x = ember.randn(40, 64)
    shared = ember.randn(72, 64)
    with ember.no_grad():
        layer.weight.data = shared  # (PyTorch's sharing: writes through either are seen)
        _close(layer(x), _reference(layer, x), 64)
        shared.mul_(3.0)
        _close(layer(x), _reference(layer, x), 64)
    assert forced == []  # never packed
    other = nn.Linear(64, 72)
    with ember.no_grad():
        other(x)  # packed
        zoo.copy_weights(layer, other)  # written through NumPy, the counter bumped
        _close(other(x), _reference(layer, x), 64)
    assert forced == [True, True]


@needs_kernel
def test_the_packs_stay_within_their_budget(forced, monkeypatch):
    layers = [nn.Linear(64, 96) for _ in range(4)]
    one = cprepack.pack(layers[0].weight.detach().numpy().T).nbytes
    monkeypatch.setenv("EMBER_PREPACK_BYTES", str(2 * one))
    x = ember.randn(40, 64)
    with ember.no_grad():
        for _ in range(2):
            for layer in layers:
                _close(layer(x), _reference(layer, x), 64)
                assert cprepack.held_bytes() <= 2 * one
    monkeypatch.setenv("EMBER_PREPACK_BYTES", str(one // 2))  # no pack fits: used once each
    cprepack.clear()
    with ember.no_grad():
        _close(layers[0](x), _reference(layers[0], x), 64)
    assert cprepack.held_bytes() == 0
    assert all(forced)


@needs_kernel
def test_no_pack_is_used_while_paused_or_switched_off(forced, monkeypatch):
    w = np.random.default_rng(0).standard_normal((80, 96)).astype(np.float32)
    cprepack.watch(w, [0])
    a = np.ones((48, 96), np.float32)
    with cprepack.paused():
        _check(cgemm.matmul(a, w.T), a, w.T)
    for env, value in (("EMBER_PREPACK", "0"), ("EMBER_GEMM", "blas")):
        with monkeypatch.context() as switched:  # (then back to the fixture's settings)
            switched.setenv(env, value)
            _check(cgemm.matmul(a, w.T), a, w.T)
    assert forced == []
    _check(cgemm.matmul(a, w.T), a, w.T)
    assert forced == [True]


@needs_kernel
def test_a_pack_is_charged_to_the_running_program(forced):
    from ember.kernels.conv_plan import charged_to

    w = np.random.default_rng(0).standard_normal((80, 96)).astype(np.float32)
    cprepack.watch(w, [0])
    record: dict = {}
    with charged_to(record):
        cgemm.matmul(np.ones((48, 96), np.float32), w.T)
    packs = [v for key, v in record.items() if key[0] == "prepack"]
    assert packs == [cprepack.held_bytes()] and packs[0] >= w.nbytes
    cprepack.clear()
    with charged_to(record):
        pass
    assert not [key for key in record if key[0] == "prepack"]


def test_the_measured_choice_decides_by_row_count(monkeypatch):
    monkeypatch.delenv("EMBER_PREPACK", raising=False)
    monkeypatch.delenv("EMBER_GEMM", raising=False)
    rows = gemm_tune._FEW_ROWS
    flags = tuple(int(r >= 48) for r in rows)
    tuning = gemm_tune.GemmTuning(
        gemm_tune.machine_key(), 0.0, 1.0, 1.0, {}, {}, {"float32": flags}
    )
    monkeypatch.setattr(cgemm, "tuning", lambda: tuning)
    assert not cgemm._prepacked("float32", 32, "", "") and cgemm._prepacked("float32", 33, "", "")
    assert cgemm._prepacked("float32", gemm_tune.PACK_ROWS, "", "")
    assert not cgemm._prepacked("float32", gemm_tune.PACK_ROWS + 1, "", "")
    assert not cgemm._prepacked("float64", 64, "", "")  # nothing measured for it
    assert not cgemm._prepacked("float32", 64, "blas", "")  # EMBER_GEMM=blas: the BLAS's


@needs_kernel
def test_a_programs_memory_plan_holds_its_packs(forced):
    model = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 80))
    x = ember.randn(40, 64)
    fn = ember.function(lambda t: model(t), executor="codegen")
    with ember.no_grad():
        fn(x)
        fn(x)
        plan = fn.compile(x).memory_plan
    assert (
        cprepack.held_bytes()
        >= model[0].weight.detach().numpy().nbytes + model[2].weight.detach().numpy().nbytes
    )
    assert plan.held["kernel scratch"] >= cprepack.held_bytes()
    assert forced and all(forced)


@needs_kernel
def test_an_array_two_counters_watch_is_never_packed(forced):
    w = np.random.default_rng(0).standard_normal((80, 96)).astype(np.float32)
    first, second = [0], [0]
    cprepack.watch(w, first)
    cprepack.watch(w, first)  # (the same counter again: still packed)
    a = np.ones((48, 96), np.float32)
    _check(cgemm.matmul(a, w.T), a, w.T)
    assert forced == [True]
    cprepack.watch(w, second)  # a second tensor over the same memory
    w *= 2  # (a write only one of the counters would see)
    first[0] += 1
    _check(cgemm.matmul(a, w.T), a, w.T)
    assert forced == [True]  # not packed again, nor read from the old pack


@needs_kernel
def test_by_the_measured_choice_a_version_is_packed_on_its_second_product(forced, monkeypatch):
    """Without EMBER_PREPACK=1, a weight's version is packed when a product reads it a second
    time: inference reuses it from then on, while a training step, whose weights change between
    their products, never pays for a pack that would serve one product."""
    monkeypatch.delenv("EMBER_PREPACK")
    # (the measured choice)
    monkeypatch.setattr(cgemm, "_prepacked", lambda name, m, forced, choice: True)
    layer = nn.Linear(64, 72)
    x = ember.randn(40, 64)
    with ember.no_grad():
        for _ in range(3):
            _close(layer(x), _reference(layer, x), 64)
        assert forced == [True, True]  # not the first product, then the second and third
        for _ in range(3):  # updated before every product: never packed
            layer.weight.mul_(0.5)
            _close(layer(x), _reference(layer, x), 64)
        assert forced == [True, True]


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_packed_products_are_exact_on_small_integers_at_every_panel_edge(dtype):
    """Integer-valued operands make every sum exact: full panels of A's rows (packed sixteen
    steps at a time), the rows past them, panels of 48, 32 and fewer columns, K past one block."""
    rng = np.random.default_rng(12)
    for m, k, n in [(8, 16, 48), (9, 33, 32), (65, 128, 100), (16, 400, 50), (3, 17, 40)]:
        a = rng.integers(-8, 8, (m, k)).astype(dtype)
        w = rng.integers(-8, 8, (n, k)).astype(dtype)
        pack = cprepack.pack(w.T)
        assert pack is not None
        for threaded in (False, True):
            got = cprepack.product(a, pack, None, threaded=threaded)
            want = a.astype(np.float64) @ w.T.astype(np.float64)
            np.testing.assert_array_equal(got, want.astype(dtype))
