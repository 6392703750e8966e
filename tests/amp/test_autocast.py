"""ember.autocast's behaviour against torch.autocast on the CPU: gradients through the casts,
regions (nesting, enabled=False inside, decorators, threads), the weight-cast cache,
custom_fwd/custom_bwd, and captured functions (casts in the graph, the region in the cache key,
redundant casts removed by the passes)."""

import threading
import warnings

import numpy as np
import pytest

import ember
from ember.ops import _autocast
from ember.transforms.pipeline import optimize

torch = pytest.importorskip("torch")

_BF16_EPS = 2.0**-8


def _mlp(lib, seed=0):
    rng = np.random.default_rng(seed)
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(8, 16), lib.nn.ReLU(), lib.nn.Linear(16, 3))
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)) * 0.3).float())
    return model


def _batch(lib):
    rng = np.random.default_rng(5)
    x = lib.tensor(rng.standard_normal((6, 8)).astype(np.float32))
    y = lib.tensor(np.array([0, 1, 2, 0, 1, 2]))
    return x, y


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_gradients_reach_float32_parameters_in_float32_as_torch(dtype):
    grads = {}
    for lib in (ember, torch):
        model = _mlp(lib)
        x, y = _batch(lib)
        with lib.autocast("cpu", dtype=getattr(lib, dtype)):
            logits = model(x)
            loss = lib.nn.functional.cross_entropy(logits, y)
        assert str(logits.dtype).endswith(dtype) and str(loss.dtype).endswith("float32")
        loss.backward()
        grads[lib.__name__] = [p.grad for p in model.parameters()]
    for ours, theirs in zip(grads["ember"], grads["torch"]):
        assert ours.dtype == ember.float32 and theirs.dtype == torch.float32
        want = theirs.numpy()
        # products in the 16-bit dtype: a few roundings of terms of the gradient's magnitude
        scale = max(1.0, np.abs(want).max())
        np.testing.assert_allclose(ours.numpy(), want, atol=8 * _BF16_EPS * scale)


def test_backward_inside_the_region_computes_in_the_forward_dtypes():
    model = _mlp(ember)
    x, y = _batch(ember)
    with ember.autocast("cpu"):
        loss = ember.nn.functional.cross_entropy(model(x), y)
        loss.backward()  # VJPs run with autocast off: the casts' VJPs restore float32
    assert all(p.grad.dtype == ember.float32 for p in model.parameters())


def test_regions_nest_disable_and_restore_as_torch():
    states = {}
    for lib in (ember, torch):
        x = lib.ones(2, 2)
        seen = []
        with lib.autocast("cpu"):
            seen.append((str((x @ x).dtype), lib.is_autocast_enabled("cpu")))
            with lib.autocast("cpu", enabled=False):
                seen.append((str((x @ x).dtype), lib.is_autocast_enabled("cpu")))
                seen.append(str(lib.get_autocast_dtype("cpu")))
            with lib.autocast("cpu", dtype=lib.float16):
                seen.append(str((x @ x).dtype))
                with lib.autocast("cpu"):  # dtype None: the current one
                    seen.append(str((x @ x).dtype))
            seen.append(str((x @ x).dtype))
        seen.append((str((x @ x).dtype), lib.is_autocast_enabled("cpu")))
        seen.append(str(lib.get_autocast_dtype("cpu")))
        states[lib.__name__] = [
            tuple(s.split(".")[-1] if isinstance(s, str) else s for s in item)
            if isinstance(item, tuple)
            else item.split(".")[-1]
            for item in seen
        ]
    assert states["ember"] == states["torch"]
    assert ember.amp.is_autocast_available("cpu") and torch.amp.is_autocast_available("cpu")


def test_decorator_threads_and_unsupported_dtypes():
    @ember.autocast("cpu")
    def product(a, b):
        return a @ b

    x = ember.ones(2, 2)
    assert product(x, x).dtype == ember.bfloat16
    assert (x @ x).dtype == ember.float32

    seen = []
    with ember.autocast("cpu"):
        thread = threading.Thread(target=lambda: seen.append((x @ x).dtype))
        thread.start()
        thread.join()
    assert seen == [ember.float32]  # the state is the thread's own, as PyTorch's

    for lib in (ember, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with lib.autocast("cpu", dtype=lib.float64):
                assert not lib.is_autocast_enabled("cpu")
                assert str((lib.ones(2, 2) @ lib.ones(2, 2)).dtype).endswith("float32")
        assert any("not supported" in str(w.message) for w in caught)


def test_promote_refuses_a_foreign_16_bit_dtype_as_torch():
    for lib, error in ((ember, ember.EmberError), (torch, RuntimeError)):
        x = lib.ones(2, 2)
        with lib.autocast("cpu"), pytest.raises(error, match="ScalarType"):
            lib.cat([x.to(lib.bfloat16), x.to(lib.float16)])


def test_float64_and_integer_operands_are_never_cast():
    d = ember.ones(2, 2, dtype=ember.float64)
    with ember.autocast("cpu"):
        assert (d @ d).dtype == ember.float64
        assert ember.cat([ember.ones(2, 2), ember.ones(2, 2, dtype=ember.int64)]).dtype == (
            ember.float32
        )


def test_weight_casts_are_cached_within_the_outermost_region():
    w = ember.nn.Parameter(ember.ones(3, 3))
    x = ember.ones(2, 3)
    with ember.autocast("cpu"):
        a = x @ w
        with ember.autocast("cpu"):
            b = x @ w
        assert len(_autocast.local.cache) == 1  # one cast of w, shared by both products
        (cached,) = [entry[2] for entry in _autocast.local.cache.values()]
        with ember.no_grad():
            w.add_(1.0)  # a new version: a new cast replaces the stale one
        c = x @ w
        (recast,) = [entry[2] for entry in _autocast.local.cache.values()]
        assert recast is not cached
    assert len(_autocast.local.cache) == 0  # cleared when the outermost region ends
    np.testing.assert_array_equal(a.float().detach().numpy(), b.float().detach().numpy())
    np.testing.assert_array_equal(c.float().detach().numpy(), np.full((2, 3), 6.0))
    (a.float().sum() + c.float().sum()).backward()
    np.testing.assert_array_equal(w.grad.detach().numpy(), np.full((3, 3), 4.0))
    with ember.autocast("cpu", cache_enabled=False):
        x @ w
        x @ w
        assert len(_autocast.local.cache) == 0


def test_custom_fwd_and_bwd_as_torch():
    results = {}
    for lib in (ember, torch):

        class Square(lib.autograd.Function):
            @staticmethod
            @lib.amp.custom_fwd(device_type="cpu", cast_inputs=lib.float32)
            def forward(ctx, x):
                ctx.save_for_backward(x)
                ctx.dtype_in = x.dtype
                return x * x

            @staticmethod
            @lib.amp.custom_bwd(device_type="cpu")
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                ctx.enabled_in_backward = lib.is_autocast_enabled("cpu")
                return 2 * x * g

        x = lib.tensor([1.5, -2.0], requires_grad=True)
        with lib.autocast("cpu"):
            y = Square.apply(x.to(lib.bfloat16))
            y.sum().backward()
        results[lib.__name__] = (str(y.dtype).split(".")[-1], x.grad.tolist())
    assert results["ember"] == results["torch"]


# ----------------------------------------------------------------------------- captured


def test_a_captured_function_keys_on_the_region():
    model = _mlp(ember)
    f = ember.function(lambda x: model(x))
    x, _ = _batch(ember)
    outside = f(x)
    with ember.autocast("cpu"):
        inside = f(x)
        again = f(x)
        with ember.autocast("cpu", dtype=ember.float16):
            half = f(x)
    after = f(x)
    assert outside.dtype == after.dtype == ember.float32
    assert inside.dtype == again.dtype == ember.bfloat16 and half.dtype == ember.float16
    assert f.stats.traces == 3  # float32, bfloat16, float16: none reused for another
    with ember.autocast("cpu"):
        eager = model(x)
    np.testing.assert_array_equal(inside.float().detach().numpy(), eager.float().detach().numpy())


def _casts(graph):
    return [n for n in graph.nodes if n.kind == "call" and n.op.name == "cast"]


def _cast_pairs(graph):
    """(source dtype, target dtype) of every cast left in ``graph``: nodes, and instructions
    of fused loops (a cast that reads a node's input directly)."""
    pairs = [(n.inputs[0].type.dtype.name, n.attrs["dtype"].name) for n in _casts(graph)]
    for n in graph.nodes:
        for ins in n.attrs.get("program", ()) if n.kind == "call" else ():
            if ins.op.name == "cast" and hasattr(ins.operands[0], "index"):
                source = n.inputs[ins.operands[0].index].type.dtype
                pairs.append((source.name, ins.kwargs["dtype"].name))
    return pairs


def test_the_passes_remove_redundant_casts_in_a_captured_region():
    w = ember.nn.Parameter(ember.randn(4, 4))
    x = ember.randn(2, 4)

    def step(x):
        y = x @ w  # casts x and w to bfloat16
        z = y.float() @ w  # the float32 copy is cast back to bfloat16: both casts go
        return ember.nn.functional.mse_loss(z @ w, x)  # w's cast again: CSE merges

    with ember.autocast("cpu"), ember.no_grad():
        graph = ember.trace(step, x, opt_level=0).graph
        eager = step(x)
    before = _casts(graph)
    assert len(before) == 7  # x, w, y to float32 and back, w twice more, z @ w to float32
    optimized, _ = optimize(graph)
    # left: x and w to bfloat16 (once each), and the last product to float32 for the loss
    # (that one may sit inside the loss's fused loop)
    assert _cast_pairs(optimized) == [
        ("float32", "bfloat16"),
        ("float32", "bfloat16"),
        ("bfloat16", "float32"),
    ]
    with ember.autocast("cpu"):
        captured = ember.function(step)(x)
    np.testing.assert_array_equal(captured.detach().numpy(), eager.detach().numpy())


def test_compiled_training_step_under_autocast_matches_eager():
    results = []
    for compiled in (False, True):
        model = _mlp(ember)
        opt = ember.optim.SGD(model.parameters(), lr=0.1)
        x, y = _batch(ember)

        def step(x, y):
            opt.zero_grad()
            with ember.autocast("cpu"):
                loss = ember.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        run = ember.compile(step) if compiled else step
        losses = [float(run(x, y)) for _ in range(3)]
        results.append((losses, [p.detach().numpy().copy() for p in model.parameters()]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_in_place_variants_are_not_autocast_as_torch():
    results = {}
    for lib in (ember, torch):
        x, a = lib.ones(2, 2), lib.full((2, 2), 1 / 3)
        with lib.autocast("cpu"):
            x.addmm_(a, a)  # addmm is on the list, addmm_ is not: computed in float32
        results[lib.__name__] = (str(x.dtype).split(".")[-1], x.numpy())
    assert results["ember"][0] == results["torch"][0] == "float32"
    np.testing.assert_allclose(results["ember"][1], results["torch"][1], rtol=2**-22)
