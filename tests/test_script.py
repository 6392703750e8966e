"""``ember.script`` (capture/script*.py): tensor-dependent Python control flow converted to graph
control flow.

Every program runs three ways on inputs that take each path: the original Python function
(the reference), the scripted function eagerly, and the scripted function captured once with
``ember.trace`` / ``ember.function`` and then called on every input. Gradients are checked
against central finite differences in float64, the Elman RNN against an eager loop and PyTorch.
Errors name the construct and the user's file:line; tracebacks point at the original source.
"""

import inspect
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest

import ember
from ember import nn

from .gradcheck import fd

rng = np.random.default_rng(0)
ROOT = Path(__file__).resolve().parents[1]


def t(a):
    return ember.tensor(np.asarray(a, dtype=np.float64) if np.ndim(a) else a)


def arrays(out):
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in arrays(o)]
    return [np.asarray(out.numpy() if hasattr(out, "numpy") else out)]


def check_all_ways(fn, arg_sets):
    """Scripted eager, traced once (both executors) and ember.function equal plain Python."""
    scripted = ember.script(fn)
    traced = {
        ex: ember.trace(scripted, *arg_sets[0], executor=ex) for ex in ("codegen", "interpreter")
    }
    compiled = ember.function(scripted)
    for args in arg_sets:
        want = arrays(fn(*args))
        for got in [scripted(*args), compiled(*args), *(g(*args) for g in traced.values())]:
            for w, g in zip(want, arrays(got), strict=True):
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    return scripted, traced["codegen"]


def line_of(fn, text: str) -> str:
    """'file:line' of the first source line of ``fn`` containing ``text``."""
    lines, start = inspect.getsourcelines(fn)
    offset = next(i for i, line in enumerate(lines) if text in line)
    return f"{inspect.getsourcefile(fn)}:{start + offset}"


POS, NEG, MID = t([0.5, 1.5, 1.0]), t([-0.5, -1.5, -2.0]), t([0.2, -0.1, 0.05])


# ------------------------------------------------------------------------------ if / elif / else


def three_way(x):
    if x.sum() > 1.0:
        y = x * 2.0
        z = y.sin()
    elif x.sum() > -1.0:
        y = x - 1.0
        z = y * y
    else:
        y = -x
        z = y.exp()
    return y + z


def test_if_elif_else_every_path():
    scripted, traced = check_all_ways(three_way, [(POS,), (MID,), (NEG,)])
    text = str(traced.graph)
    assert text.count("= cond(") == 2  # the elif is a cond inside the false branch
    assert "true_branch" in text and "false_branch" in text
    assert "if_stmt" in scripted.source and scripted.__wrapped__ is three_way


def test_unscripted_trace_raises_trace_error_that_mentions_script():
    with pytest.raises(ember.TraceError, match=r"ember\.script") as info:
        ember.trace(three_way, POS)
    assert line_of(three_way, "if x.sum() > 1.0") in str(info.value)


def logic(x, y):
    if x.sum() > 0 and not y.sum() > 0 or x.max() > 10:
        out = x - y
    else:
        out = x + y
    return out * 2.0 if x.min() > 0 else out


def test_and_or_not_and_conditional_expressions():
    cases = [(POS, NEG), (POS, POS), (NEG, POS), (t([20.0, -30.0, 1.0]), POS)]
    check_all_ways(logic, cases)


def python_branch(x, double: bool, scale: int):
    if double and scale > 1:  # Python values: stay Python, baked into the graph
        x = x * scale
    return x


def test_python_conditions_stay_python():
    scripted = ember.script(python_branch)
    traced = ember.trace(scripted, POS, True, 3)
    assert "cond(" not in str(traced.graph)
    np.testing.assert_allclose(traced(NEG, True, 3).numpy(), NEG.numpy() * 3)
    np.testing.assert_allclose(scripted(NEG, False, 3).numpy(), NEG.numpy())


def early_return(x):
    if x.sum() > 0:
        return x * 3.0
    z = x + 1.0
    if z.sum() > 0:
        return z.sin()
    return z * z


def test_early_return_in_tensor_dependent_ifs():
    check_all_ways(early_return, [(POS,), (t([-0.5, 0.1, 0.2]),), (NEG,)])


def returns_tuple(x):
    if x.sum() > 0:
        return x, x.sum()
    else:
        return -x, x.max()


def test_both_branches_return_a_tuple():
    check_all_ways(returns_tuple, [(POS,), (NEG,)])


# ------------------------------------------------------------------------------ loops


def halve(x):
    steps = 0
    while x.abs().sum() > 1.0:
        x = x * 0.5
        steps += 1  # a Python number changed by a tensor loop becomes a tensor
    return x, steps


def test_while_with_data_dependent_trip_count():
    _, traced = check_all_ways(halve, [(POS * 0.1,), (POS,), (POS * 100.0,)])
    assert "= while_loop(" in str(traced.graph)
    _, steps = traced(POS * 100.0)
    assert int(steps.numpy()) == halve(POS * 100.0)[1]


def weighted_sum(x, n):
    acc = ember.zeros_like(x)
    for i in range(n):
        acc = acc + x * (i + 1)
    for j in range(1, 3):  # Python bounds: a Python loop
        acc = acc * j
    return acc


def test_for_range_with_a_tensor_bound():
    sets = [(POS, ember.tensor(k)) for k in (3, 0, 1, 5)]
    _, traced = check_all_ways(weighted_sum, sets)
    assert str(traced.graph).count("= while_loop(") == 1


def range_from(x, lo, hi):
    acc = x
    for i in range(lo, hi):
        acc = acc + i
    return acc


def test_for_range_with_two_tensor_bounds():
    sets = [(POS, ember.tensor(a), ember.tensor(b)) for a, b in ((1, 4), (3, 3), (5, 2))]
    check_all_ways(range_from, sets)


def break_and_continue(x, n):
    acc = ember.zeros_like(x)
    for i in range(n):
        if i % 2 == 1:
            continue
        if acc.sum() > 4.0:
            break
        acc = acc + x
    k = 0
    while k < n:
        k = k + 1
        if acc.max() > 100.0:
            break
        acc = acc * 1.5
    else:
        acc = acc - 1.0  # only when the while loop ends without break
    return acc


def test_break_and_continue_and_while_else():
    sets = [(POS, ember.tensor(k)) for k in (0, 1, 4, 12)] + [(POS * 20, ember.tensor(9))]
    check_all_ways(break_and_continue, sets)


def first_large(x, n):
    for i in range(n):
        if x[i] > 1.0:
            return x * i
    return x - 1.0


def test_return_inside_a_tensor_loop():
    check_all_ways(first_large, [(t([0.1, 2.0, 3.0]), ember.tensor(3)), (POS, ember.tensor(1))])


def list_loop(x, weights):
    for w in weights:  # a Python list: a Python loop, its body converted
        if x.sum() > 0:
            x = x * w
        else:
            x = x + w
    return x


def test_for_over_a_list_stays_python_with_converted_body():
    scripted, traced = check_all_ways(list_loop, [(POS, [0.5, 2.0, -1.0]), (NEG, [0.5, 2.0, -1.0])])
    assert str(traced.graph).count("= cond(") == 3


def nested(x, n):
    if x.sum() > 0:
        for _ in range(n):
            if x.max() > 2.0:
                x = x * 0.5
            else:
                x = x + 1.0
    else:
        while x.sum() < -1.0:
            x = x * 0.5
    return x


def test_nested_control_flow():
    check_all_ways(nested, [(POS, ember.tensor(4)), (NEG, ember.tensor(4)), (POS, ember.tensor(0))])


@ember.script
def inner_step(x):
    if x.sum() > 0:
        return x.sin()
    return x.cos()


@ember.script
def calls_scripted(x):
    y = ember.zeros_like(x)
    for i in range(3):
        y = y + inner_step(x - i)
    if y.sum() > 0:
        y = y * 10.0
    return y.sum()


def test_scripted_calling_scripted():
    plain = calls_scripted.__wrapped__
    for x in (POS, NEG, t([2.5, 1.0, 3.0])):
        traced = ember.trace(calls_scripted, POS)
        np.testing.assert_allclose(traced(x).numpy(), plain(x).numpy(), rtol=1e-12)
        np.testing.assert_allclose(calls_scripted(x).numpy(), plain(x).numpy(), rtol=1e-12)


def test_closure_reads_see_later_updates():
    scale = 2.0

    def fn(x):
        if x.sum() > 0:
            x = x * scale
        return x

    scripted = ember.script(fn)
    np.testing.assert_allclose(scripted(POS).numpy(), POS.numpy() * 2)
    scale = 5.0
    np.testing.assert_allclose(scripted(POS).numpy(), POS.numpy() * 5)


# ------------------------------------------------------------------------------ modules


class Base(nn.Module):
    def forward(self, x):
        return x * 2.0


class Gate(Base):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.__scale = 3.0  # a private (name-mangled) attribute

    @ember.script
    def forward(self, x):
        y = self.lin(x)
        if y.sum() > 0:
            y = super().forward(y) * self.__scale
        else:
            y = -y
        return y


class Clipper(nn.Module):
    def forward(self, x):
        while (x * x).sum() > 1.0:
            x = x * 0.5
        return x


def test_scripted_forward_method_with_super_and_private_names():
    ember.manual_seed(0)
    gate = Gate().double()  # (the inputs are float64: a layer takes its own dtype only)
    ref = Gate.forward.__wrapped__
    with ember.no_grad():
        traced, compiled = ember.trace(gate, POS), ember.function(gate)
        for x in (POS, NEG, -POS):
            want = ref(gate, x).numpy()
            for got in (gate(x), traced(x), compiled(x)):
                np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


def test_script_a_module_instance():
    clipper = Clipper()
    with pytest.raises(ember.TraceError):
        ember.trace(clipper, POS)
    assert ember.script(clipper) is clipper and ember.script(clipper) is clipper
    traced = ember.trace(clipper, POS)
    for x in (POS * 0.1, POS * 30):
        np.testing.assert_allclose(traced(x).numpy(), Clipper.forward(clipper, x).numpy())
    assert "while_stmt" in clipper.forward.source


# ------------------------------------------------------------------------------ gradients


def smooth(x):
    if (x * x).sum() > 2.0:
        y = (x * 1.5).sin()
    else:
        y = x * x - x
    return (y * y).sum()


@pytest.mark.parametrize("x", [POS.numpy() * 2, MID.numpy()], ids=["true", "false"])
def test_cond_gradients_match_finite_differences(x):
    scripted = ember.script(smooth)
    expected = fd(smooth, x)
    np.testing.assert_allclose(ember.grad(scripted)(ember.tensor(x)).numpy(), expected, rtol=1e-6)
    inside = ember.trace(ember.grad(scripted), POS)(ember.tensor(x)).numpy()
    np.testing.assert_allclose(inside, expected, rtol=1e-6)
    leaf = ember.tensor(x, requires_grad=True)
    scripted(leaf).backward()
    np.testing.assert_allclose(leaf.grad.numpy(), expected, rtol=1e-6)


def test_early_return_gradient():
    def loss(x):
        return early_return(x).pow(2).sum()

    scripted = ember.script(early_return)
    for x in (POS.numpy(), NEG.numpy()):
        got = ember.grad(lambda v: scripted(v).pow(2).sum())(ember.tensor(x)).numpy()
        np.testing.assert_allclose(got, fd(loss, x), rtol=1e-6, atol=1e-8)


def loop_loss(x, n):
    acc = x
    for _ in range(n):
        acc = (acc * 0.9 + x).sin()
    return (acc * acc).sum()


def test_loop_gradients_eager_and_traced():
    scripted = ember.script(loop_loss)
    x = rng.standard_normal(3)
    expected = fd(lambda v: loop_loss(v, 4), x)
    leaf = ember.tensor(x, requires_grad=True)
    scripted(leaf, ember.tensor(4)).backward()  # eager: the tape of the iterations run
    np.testing.assert_allclose(leaf.grad.numpy(), expected, rtol=1e-6)
    traced = ember.grad(scripted)(ember.tensor(x), ember.tensor(4))  # through while_loop_grad
    np.testing.assert_allclose(traced.numpy(), expected, rtol=1e-6)


# ------------------------------------------------------------------------------ errors


def one_branch_only(x):
    if x.sum() > 0:
        y = x * 2
    return y


def python_values_differ(x):
    k = 1
    if x.sum() > 0:
        k = 2
    return x * k


def shape_changes(x):
    while x.sum() > 10:  # never true for POS, so the eager call ends; staging still sees the body
        x = x.sum(0)
    return x


def try_around(x):
    try:
        if x.sum() > 0:
            x = x * 2
    except ValueError:
        pass
    return x


def no_final_return(x):
    if x.sum() > 0:
        return x


def loop_only_var(x, n):
    for i in range(n):
        y = x * i  # noqa: F841 (the test: a loop-only variable, staged, is an error)
    return x


@pytest.mark.parametrize(
    "fn, args, line, words",
    [
        (one_branch_only, (POS,), "if x.sum() > 0", ["'y'", "only one branch", "`if`"]),
        (python_values_differ, (POS,), "if x.sum() > 0", ["'k'", "int 2", "int 1", "`if`"]),
        (shape_changes, (POS,), "while x.sum() > 10", ["'x'", "f64[3] to f64[]", "`while`"]),
        (try_around, (POS,), "if x.sum() > 0", ["`if` inside `try`"]),
        (no_final_return, (POS,), "def no_final_return", ["returns a value on some paths"]),
        (loop_only_var, (POS, ember.tensor(2)), "for i in range(n)", ["`for`", "y"]),
    ],
    ids=["one-branch", "python-values", "loop-shape", "try", "falls-off", "loop-var"],
)
def test_staging_errors_name_the_construct_and_line(fn, args, line, words):
    scripted = ember.script(fn)
    plain = fn(*args)  # eagerly the scripted function is plain Python: no error
    for a, b in zip(arrays(scripted(*args)), arrays(plain)):
        np.testing.assert_allclose(a, b)
    with pytest.raises(ember.ScriptError) as info:
        ember.trace(scripted, *args)
    message = str(info.value)
    assert line_of(fn, line) in message
    for word in words:
        assert word in message


def generator(x):
    yield x


G = 0


def writes_global(x):
    global G
    G = 1
    return x


def make_nonlocal_writer():
    count = 0

    def fn(x):
        nonlocal count
        if x.sum() > 0:
            count = count + 1
        return x

    return fn


@pytest.mark.parametrize(
    "fn, line, words",
    [
        (generator, "yield x", ["`yield`"]),
        (writes_global, "global G", ["`global G`"]),
        (make_nonlocal_writer(), "if x.sum() > 0", ["`nonlocal count`", "`if`"]),
    ],
    ids=["yield", "global", "nonlocal"],
)
def test_unsupported_constructs_are_refused_when_scripting(fn, line, words):
    with pytest.raises(ember.ScriptError) as info:
        ember.script(fn)
    assert line_of(fn, line) in str(info.value)
    for word in words:
        assert word in str(info.value)


def test_functions_without_source_are_refused():
    square = lambda x: x * x  # noqa: E731
    with pytest.raises(ember.ScriptError, match="lambda") as info:
        ember.script(square)
    assert f"{__file__}:{square.__code__.co_firstlineno}" in str(info.value)
    namespace: dict = {}
    exec("def dynamic(x):\n    return x\n", namespace)
    with pytest.raises(ember.ScriptError, match="no source"):
        ember.script(namespace["dynamic"])
    with pytest.raises(ember.ScriptError, match="Python function"):
        ember.script(len)


def fails_inside(x):
    if x.sum() > 0:
        y = x.reshape(7)
    else:
        y = x
    return y


@pytest.mark.parametrize("mode", ["eager", "traced"])
def test_errors_inside_scripted_code_point_at_the_original_line(mode):
    scripted = ember.script(fails_inside)
    with pytest.raises(ember.ShapeError) as info:
        scripted(POS) if mode == "eager" else ember.trace(scripted, POS)
    frames = [f for f in traceback.extract_tb(info.value.__traceback__) if f.filename == __file__]
    assert frames[-1].line == "y = x.reshape(7)"
    assert f"{frames[-1].filename}:{frames[-1].lineno}" == line_of(fails_inside, "x.reshape(7)")
    assert line_of(fails_inside, "x.reshape(7)") in str(info.value)


# ------------------------------------------------------------------------------ RNN


class ElmanRNN(nn.Module):
    """tanh Elman RNN over a padded batch (T, B, I); each sequence stops at its length."""

    def __init__(self, inputs: int, hidden: int):
        super().__init__()
        gen = np.random.default_rng(1)
        bound = 1 / np.sqrt(hidden)
        self.hidden = hidden
        self.w_ih = nn.Parameter(ember.tensor(gen.uniform(-bound, bound, (hidden, inputs))))
        self.w_hh = nn.Parameter(ember.tensor(gen.uniform(-bound, bound, (hidden, hidden))))
        self.b_ih = nn.Parameter(ember.tensor(gen.uniform(-bound, bound, hidden)))
        self.b_hh = nn.Parameter(ember.tensor(gen.uniform(-bound, bound, hidden)))

    def forward(self, xs, lengths):
        steps, batch = xs.shape[0], xs.shape[1]
        h = ember.zeros(batch, self.hidden, dtype=xs.dtype)
        out = ember.zeros(steps, batch, self.hidden, dtype=xs.dtype)
        position = ember.arange(steps).reshape(steps, 1, 1)
        for t in range(lengths.max()):  # the trip count is read from a tensor
            pre = xs[t] @ self.w_ih.T + self.b_ih + h @ self.w_hh.T + self.b_hh
            h_new = pre.tanh()
            alive = (lengths > t).reshape(batch, 1)
            h = ember.where(alive, h_new, h)
            out = ember.where(ember.logical_and(position == t, alive), h_new, out)
        return out, h


def eager_rnn(model, xs, lengths):
    """The reference: a Python loop over each sequence separately."""
    x, n = xs.numpy(), lengths.numpy()
    out = np.zeros((x.shape[0], x.shape[1], model.hidden))
    final = np.zeros((x.shape[1], model.hidden))
    w_ih, w_hh = model.w_ih.detach().numpy(), model.w_hh.detach().numpy()
    b = model.b_ih.detach().numpy() + model.b_hh.detach().numpy()
    for j in range(x.shape[1]):
        h = np.zeros(model.hidden)
        for s in range(n[j]):
            h = np.tanh(w_ih @ x[s, j] + w_hh @ h + b)
            out[s, j] = h
        final[j] = h
    return out, final


RNN_LENGTHS = [[6, 2, 4], [1, 1, 1], [6, 6, 6], [3, 5, 2]]


def test_scripted_rnn_matches_the_eager_loop_for_any_lengths():
    model = ElmanRNN(4, 5)
    xs = ember.tensor(rng.standard_normal((6, 3, 4)))
    with pytest.raises(ember.TraceError):
        ember.trace(model, xs, ember.tensor(np.array(RNN_LENGTHS[0])))
    ember.script(model)
    with ember.no_grad():
        traced = ember.trace(model, xs, ember.tensor(np.array(RNN_LENGTHS[0])))
    assert "= while_loop(" in str(traced.graph)
    for lengths in RNN_LENGTHS:
        n = ember.tensor(np.array(lengths))
        want_out, want_h = eager_rnn(model, xs, n)
        for out, h in (model(xs, n), traced(xs, n)):
            np.testing.assert_allclose(out.detach().numpy(), want_out, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(h.detach().numpy(), want_h, rtol=1e-12, atol=1e-14)


def test_scripted_rnn_matches_torch_outputs_and_gradients():
    torch = pytest.importorskip("torch", reason="PyTorch is the peer for the RNN comparison")
    model = ElmanRNN(4, 5)
    ember.script(model)
    xs_np = rng.standard_normal((6, 3, 4))
    lengths = [6, 2, 4]
    ref = torch.nn.RNN(4, 5, dtype=torch.float64)
    with torch.no_grad():
        for name in ("w_ih", "w_hh", "b_ih", "b_hh"):
            getattr(ref, f"{'weight' if name[0] == 'w' else 'bias'}_{name[2:]}_l0").copy_(
                torch.from_numpy(getattr(model, name).detach().numpy())
            )
    xt = torch.tensor(xs_np, requires_grad=True)
    packed = torch.nn.utils.rnn.pack_padded_sequence(xt, lengths, enforce_sorted=False)
    out_p, h_t = ref(packed)
    out_t, _ = torch.nn.utils.rnn.pad_packed_sequence(out_p, total_length=6)
    ((out_t**2).sum() + h_t.sum()).backward()

    xs = ember.tensor(xs_np, requires_grad=True)
    out, h = model(xs, ember.tensor(np.array(lengths)))
    ((out * out).sum() + h.sum()).backward()  # eager: the tape of the scripted loop
    np.testing.assert_allclose(out.detach().numpy(), out_t.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h.detach().numpy(), h_t[0].detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.w_hh.grad.numpy(), ref.weight_hh_l0.grad.numpy(), rtol=1e-9)
    np.testing.assert_allclose(model.b_ih.grad.numpy(), ref.bias_ih_l0.grad.numpy(), rtol=1e-9)

    def step(xs, lengths):  # compiled: the backward of the loop is a while_loop_grad node
        model.zero_grad()
        out, h = model(xs, lengths)
        loss = (out * out).sum() + h.sum()
        loss.backward()
        return loss

    compiled = ember.function(step)
    for n in (lengths, [1, 6, 3]):  # one graph, any lengths (the trip count is data)
        xs = ember.tensor(xs_np, requires_grad=True)
        compiled(xs, ember.tensor(np.array(n)))
        xt.grad = None
        ref.zero_grad()
        packed = torch.nn.utils.rnn.pack_padded_sequence(xt, n, enforce_sorted=False)
        out_p, h_t = ref(packed)
        out_t, _ = torch.nn.utils.rnn.pad_packed_sequence(out_p, total_length=6)
        ((out_t**2).sum() + h_t.sum()).backward()
        np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)
        for name in ("w_ih", "w_hh", "b_ih", "b_hh"):
            peer = getattr(ref, f"{'weight' if name[0] == 'w' else 'bias'}_{name[2:]}_l0")
            got = getattr(model, name).grad.numpy()
            np.testing.assert_allclose(got, peer.grad.numpy(), rtol=1e-9, atol=1e-12)
    assert compiled.stats.traces == 1 and "= while_loop_grad(" in str(compiled.graph)


def test_scripted_rnn_traced_gradients():
    model = ElmanRNN(4, 5)
    ember.script(model)
    xs_np = rng.standard_normal((6, 3, 4))
    lengths = ember.tensor(np.array([6, 2, 4]))

    def loss(xs):
        out, h = model(xs, lengths)
        return (out * out).sum() + h.sum()

    expected = fd(loss, xs_np)
    leaf = ember.tensor(xs_np, requires_grad=True)
    loss(leaf).backward()
    np.testing.assert_allclose(leaf.grad.numpy(), expected, rtol=1e-6, atol=1e-8)
    traced = ember.grad(loss)(ember.tensor(xs_np))
    np.testing.assert_allclose(traced.numpy(), expected, rtol=1e-6, atol=1e-8)


# ------------------------------------------------------------------------------ the example


def test_trace_vs_script_example():
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trace_vs_script.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "TraceError: bool() of a traced tensor" in text and "ember.script" in text
    assert "trace_vs_script.py:17" in text  # the user's `if` line
    assert text.count("match=True") == 2 and "match=False" not in text
    assert "= cond(" in text and "true_branch(" in text and "false_branch(" in text
    assert "_ember_rt.if_stmt(" in text
