"""Reverse-mode gradients through loops in graphs (control/flow_grad.py).

``scan``'s VJP (a reverse scan in ember ops) and ``while_loop``'s (the ``while_loop_grad`` node)
are checked against independent references: central finite differences in float64 and a
PyTorch loop. Graph autodiff (``ember.grad``), the eager tape and a compiled training step
(``ember.function``) agree; checkpointing gives the same gradients while holding fewer carries.
"""

import numpy as np
import pytest

import ember

from .gradcheck import fd

rng = np.random.default_rng(7)


def eager_grads(fn, *args):
    leaves = [ember.tensor(a, requires_grad=True) for a in args]
    fn(*leaves).backward()
    return [np.zeros_like(a) if t.grad is None else t.grad.numpy() for a, t in zip(args, leaves)]


def close(a, b, rtol=1e-6, atol=1e-8):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------ scan


def elman_loss(h0, xs, w):
    """A scan with a float and an int carry, a float and an int sequence, closing over w."""
    mask = (xs[:, 0] > 0).to(ember.int64)

    def step(carry, x):
        h, count = carry
        seq, keep = x
        h = (h @ w + seq).tanh() * (keep.to(h.dtype) * 0.5 + 0.75)
        return (h, count + keep), (h * h).sum()

    (h, count), ys = ember.scan(step, (h0, ember.tensor(0)), (xs, mask))
    return (ys * ember.arange(ys.shape[0]).to(ys.dtype)).sum() + h.sin().sum()


SCAN_ARGS = (rng.standard_normal(3), rng.standard_normal((5, 3)), rng.standard_normal((3, 3)) * 0.6)


def torch_elman_grads(h0, xs, w):
    torch = pytest.importorskip("torch", reason="PyTorch is the peer for the loop gradients")
    h0, xs, w = (torch.tensor(a, requires_grad=True) for a in (h0, xs, w))
    h, ys = h0, []
    for t in range(xs.shape[0]):
        keep = float(xs[t, 0] > 0)
        h = torch.tanh(h @ w + xs[t]) * (keep * 0.5 + 0.75)
        ys.append((h * h).sum())
    loss = (torch.stack(ys) * torch.arange(len(ys), dtype=h.dtype)).sum() + h.sin().sum()
    loss.backward()
    return [a.grad.numpy() for a in (h0, xs, w)]


def test_scan_gradients_traced_eager_finite_differences_and_torch():
    traced = ember.grad(elman_loss, argnums=(0, 1, 2))(*(ember.tensor(a) for a in SCAN_ARGS))
    eager = eager_grads(elman_loss, *SCAN_ARGS)
    reference = torch_elman_grads(*SCAN_ARGS)
    for k, (g, e, r) in enumerate(zip(traced, eager, reference)):
        close(g.numpy(), e, rtol=1e-10, atol=1e-12)
        close(g.numpy(), fd(elman_loss, *SCAN_ARGS, wrt=k), rtol=1e-6, atol=1e-8)
        close(g.numpy(), r, rtol=1e-10, atol=1e-12)


def test_staged_scan_gradient_on_the_tape_and_in_a_traced_graph():
    from ember.control.scan import staged_scan

    def loss(h0, xs, w):
        carry, ys = staged_scan(lambda c, x: ((c * w + x).sin(), c * x), h0, xs)
        return (ys * ys).sum() + carry.sum()

    w = SCAN_ARGS[2][0]
    args = (SCAN_ARGS[0], SCAN_ARGS[1], w)
    expected = [fd(loss, *args, wrt=k) for k in range(3)]
    for g, e in zip(eager_grads(loss, *args), expected):  # the scan node's VJP, run eagerly
        close(g, e)
    graph_grad = ember.grad(loss, argnums=(0, 1, 2))
    for executor in ("codegen", "interpreter"):
        tensors = [ember.tensor(a) for a in args]
        traced = ember.trace(graph_grad, *tensors, executor=executor, opt_level=0)
        assert "= scan(" in str(traced.graph)  # the reverse scan, not unrolled at O0
        for g, e in zip(traced(*tensors), expected):
            close(g.numpy(), e)


def test_scan_gradient_differentiated_again():
    h0, xs, w = SCAN_ARGS
    v = rng.standard_normal(w.shape)

    def first(w):  # <d loss / d w, v>: a scalar made of the scan's VJP
        g = ember.grad(lambda w: elman_loss(ember.tensor(h0), ember.tensor(xs), w))(w)
        return (g * ember.tensor(v)).sum()

    second = ember.grad(first)(ember.tensor(w)).numpy()
    close(second, fd(first, w, eps=1e-5), rtol=1e-5, atol=1e-7)


# ------------------------------------------------------------------------------ while_loop


def grow(x, w):
    """``while |x|^2 < 100: x = x * w + 0.1``: the trip count depends on x and w."""
    y = ember.while_loop(lambda v: (v * v).sum() < 100.0, lambda v: v * w + 0.1, x)
    return (y * y.cos()).sum()


W_GROW = np.array([1.3, 1.5, 1.2])
STARTS = {  # trip counts: 0, 2, 8
    "zero": np.array([20.0, 1.0, 1.0]),
    "few": np.array([3.0, 4.0, 5.0]),
    "many": np.array([0.5, 0.2, 0.3]),
}


@pytest.mark.parametrize("start", sorted(STARTS))
def test_while_loop_gradients_for_data_dependent_trip_counts(start):
    x = STARTS[start]
    expected = [fd(grow, x, W_GROW, wrt=k) for k in range(2)]
    with ember.record_loop_gradients() as runs:
        traced = ember.grad(grow, argnums=(0, 1))(ember.tensor(x), ember.tensor(W_GROW))
    # (the suite's conftest runs every compiled graph a second time, with the interpreter)
    assert {r.iterations for r in runs} == {{"zero": 0, "few": 2, "many": 8}[start]}
    for g, e in zip(traced, expected):
        close(g.numpy(), e)
    for g, e in zip(eager_grads(grow, x, W_GROW), expected):  # the tape of the Python loop
        close(g, e)


def test_one_traced_gradient_graph_serves_every_trip_count():
    graph_grad = ember.trace(
        ember.grad(grow, argnums=(0, 1)), ember.tensor(STARTS["few"]), ember.tensor(W_GROW)
    )
    assert "while_loop_grad(" in str(graph_grad.graph)
    for x in STARTS.values():
        for g, k in zip(graph_grad(ember.tensor(x), ember.tensor(W_GROW)), range(2)):
            close(g.numpy(), fd(grow, x, W_GROW, wrt=k))


def powers(x, w, n):
    """fori_loop with a tensor bound; the int64 counter carry gets no gradient."""
    return ember.fori_loop(0, n, lambda i, v: (v * w).sin() + i.to(v.dtype) * 0.1, x).sum()


def test_fori_loop_with_a_tensor_bound():
    x, w = rng.standard_normal(4), rng.standard_normal(4)
    graph_grad = ember.trace(
        ember.grad(powers, argnums=(0, 1)), ember.tensor(x), ember.tensor(w), ember.tensor(3)
    )
    for n in (0, 1, 5):
        got = graph_grad(ember.tensor(x), ember.tensor(w), ember.tensor(n))
        for k, g in enumerate(got):
            expected = fd(lambda a, b: powers(a, b, ember.tensor(n)), x, w, wrt=k)
            close(g.numpy(), expected)


def nested(xs, w):
    """A cond inside a while_loop inside a scan."""

    def step(h, x):
        def body(v):
            return ember.cond(
                v.sum() > 0, lambda a: a * 1.5 + (a * w).tanh(), lambda a: a * 1.2 - w * 0.3, v
            )

        v = ember.while_loop(lambda v: (v * v).sum() < 9.0, body, h * 0.5 + x)
        return (v * 0.3).tanh(), v.sum()

    h, ys = ember.scan(step, ember.zeros(3, dtype=xs.dtype), xs)
    return (ys * ys).sum() + h.sum()


def test_cond_inside_while_loop_inside_scan():
    xs = rng.standard_normal((4, 3))
    w = rng.standard_normal(3) * 0.5
    expected = [fd(nested, xs, w, wrt=k) for k in range(2)]
    with ember.record_loop_gradients() as runs:
        traced = ember.grad(nested, argnums=(0, 1))(ember.tensor(xs), ember.tensor(w))
    assert len({r.iterations for r in runs}) > 1  # a loop per step, each its own trip count
    for g, e in zip(traced, expected):
        close(g.numpy(), e, rtol=1e-5, atol=1e-7)
    for g, e in zip(eager_grads(nested, xs, w), expected):
        close(g, e, rtol=1e-5, atol=1e-7)


# ------------------------------------------------------------------------------ checkpointing


def long_loop(x, w, k):
    body = lambda i, v: (v * w).sin() + v * 0.5  # noqa: E731
    return (ember.fori_loop(0, 100, body, x, checkpoint_every=k) ** 2).sum()


def test_checkpointing_gives_identical_gradients_with_fewer_carries():
    x, w = rng.standard_normal(3), rng.standard_normal(3)
    grads, peaks = {}, {}
    for k in (None, 10):
        with ember.record_loop_gradients() as runs:
            fn = ember.grad(lambda a, b: long_loop(a, b, k), argnums=(0, 1))
            grads[k] = [g.numpy() for g in fn(ember.tensor(x), ember.tensor(w))]
        run = runs[-1]
        assert all(r == run for r in runs)  # the conftest's second run, by the interpreter
        assert run.iterations == 100 and run.checkpoint_every == k
        peaks[k] = run.peak_carries
    assert peaks[None] == 100
    assert peaks[10] <= 100 // 10 + 10 + 2
    for a, b in zip(grads[None], grads[10]):
        np.testing.assert_array_equal(a, b)
    close(grads[10][1], fd(lambda a, b: long_loop(a, b, None), x, w, wrt=1), rtol=1e-5)

    # eager: the tape keeps every iteration, unless checkpoint_every makes the loop one node
    with ember.record_loop_gradients() as runs:
        tape = eager_grads(lambda a, b: long_loop(a, b, None), x, w)
    assert runs == []
    with ember.record_loop_gradients() as runs:
        checkpointed = eager_grads(lambda a, b: long_loop(a, b, 10), x, w)
    assert [r.peak_carries for r in runs] == [peaks[10]]
    for a, b, c in zip(tape, checkpointed, grads[10]):
        np.testing.assert_array_equal(b, c)
        close(a, b, rtol=1e-12, atol=1e-14)


P = ember.tensor(rng.standard_normal((3, 4)) * 0.5)


def scan_loss(h0, xs, w, k):
    """A 4-wide carry over 3-wide inputs, so stacked carries (n, 4) stand out in the graph."""
    h, ys = ember.scan(
        lambda h, x: ((h * w + x @ P).tanh(), (h * x.sum()).sum()), h0, xs, checkpoint_every=k
    )
    return (ys * ys).sum() + h.sum()


def _all_types(graph) -> set:
    types = set()
    for node in graph.nodes:
        types |= {(tuple(v.type.shape), v.type.dtype) for v in node.outputs}
        for attr in node.attrs.values():
            if isinstance(attr, ember.graph.Graph):
                types |= _all_types(attr)
    return types


@pytest.mark.parametrize("n", [100, 23])  # 23 = 4 segments of 5 and a tail of 3
def test_scan_checkpointing_gives_identical_gradients_with_fewer_stacked_carries(n):
    k = 10 if n == 100 else 5
    args = (rng.standard_normal(4), rng.standard_normal((n, 3)), rng.standard_normal(4))
    tensors = [ember.tensor(a) for a in args]
    grads, graphs = {}, {}
    for every in (None, k):
        fn = ember.grad(lambda h, xs, w: scan_loss(h, xs, w, every), argnums=(0, 1, 2))
        traced = ember.trace(fn, *tensors, opt_level=0)
        graphs[every] = _all_types(traced.graph)
        grads[every] = [g.numpy() for g in traced(*tensors)]
    stacked = ((n, 4), ember.float64)  # every step's carry, stacked
    assert stacked in graphs[None] and stacked not in graphs[k]
    assert ((n // k, 4), ember.float64) in graphs[k] and ((k, 4), ember.float64) in graphs[k]
    for a, b in zip(grads[None], grads[k]):
        np.testing.assert_array_equal(a, b)
    eager = eager_grads(lambda h, xs, w: scan_loss(h, xs, w, k), *args)  # one node on the tape
    for a, b in zip(eager, grads[k]):
        close(a, b, rtol=1e-12, atol=1e-14)
    if n == 23:
        close(grads[k][2], fd(lambda h, xs, w: scan_loss(h, xs, w, None), *args, wrt=2))


def test_checkpointed_scan_differentiated_again():
    h0, xs = rng.standard_normal(4), rng.standard_normal((7, 3))
    v = rng.standard_normal(4)

    def first(w):
        g = ember.grad(lambda w: scan_loss(ember.tensor(h0), ember.tensor(xs), w, 3))(w)
        return (g * ember.tensor(v)).sum()

    w = rng.standard_normal(4)
    close(ember.grad(first)(ember.tensor(w)).numpy(), fd(first, w, eps=1e-5), rtol=1e-5, atol=1e-7)


def test_checkpoint_every_is_checked():
    with pytest.raises(ember.EmberError, match="while_loop: checkpoint_every must be a positive"):
        ember.while_loop(lambda v: v.sum() < 1, lambda v: v + 1, ember.zeros(2), checkpoint_every=0)
    with pytest.raises(ember.EmberError, match="scan: checkpoint_every must be a positive"):
        ember.scan(lambda c, x: (c, x), ember.zeros(2), ember.zeros(3, 2), checkpoint_every=2.5)


# ------------------------------------------------------------------------------ limits


def test_no_second_derivative_through_a_while_loop():
    def first(w):
        return ember.grad(lambda v: grow(ember.tensor(STARTS["few"]), v))(w).sum()

    with pytest.raises(ember.AutogradError, match="while_loop_grad"):
        ember.grad(first)(ember.tensor(W_GROW))


def test_a_loop_body_drawing_random_numbers_is_refused():
    def noisy(x):
        return ember.fori_loop(0, 3, lambda i, v: v * ember.rand(3, dtype=v.dtype), x).sum()

    with pytest.raises(ember.AutogradError, match="while_loop: the loop body draws random"):
        ember.grad(noisy)(ember.tensor(np.ones(3)))


# ------------------------------------------------------------------------------ training


class LoopModel(ember.nn.Module):
    """A scan (Elman cell) feeding a while_loop with a data-dependent trip count."""

    def __init__(self):
        super().__init__()
        gen = np.random.default_rng(3)
        self.w = ember.nn.Parameter(ember.tensor(gen.standard_normal((3, 3)) * 0.4))
        self.u = ember.nn.Parameter(ember.tensor(gen.standard_normal(3) * 0.2 + 1.1))

    def forward(self, xs):
        h, _ = ember.scan(
            lambda h, x: ((h @ self.w + x).tanh(), h), ember.zeros(3, dtype=xs.dtype), xs
        )
        grown = ember.while_loop(
            lambda v: (v * v).sum() < 4.0, lambda v: v * self.u + 0.2, h, checkpoint_every=2
        )
        return (grown - 1.0).pow(2).mean()


def test_compiled_training_step_through_loops_equals_eager_steps():
    eager_model, model = LoopModel(), LoopModel()
    eager_opt = ember.optim.SGD(eager_model.parameters(), lr=0.05)
    opt = ember.optim.SGD(model.parameters(), lr=0.05)

    def step(model, opt, xs):
        opt.zero_grad()
        loss = model(xs)
        loss.backward()
        opt.step()
        return loss

    compiled = ember.function(step)
    data = [ember.tensor(rng.standard_normal((20, 3))) for _ in range(4)]  # 20: not unrolled
    for xs in data:
        expected = step(eager_model, eager_opt, xs)
        close(compiled(model, opt, xs).detach().numpy(), expected.detach().numpy(), rtol=1e-10)
        for p, q in zip(model.parameters(), eager_model.parameters()):
            close(p.detach().numpy(), q.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert compiled.stats.traces <= 2
    text = str(compiled.graph)
    assert "= scan(" in text and "= while_loop_grad(" in text
