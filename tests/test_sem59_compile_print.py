"""``print`` inside an ``ember.compile``'d function prints on every call, with the call's
values, as ``torch.compile`` does (its graph break at print); a capture that only traced the
call printed once, symbols (capture/prints.py, ops/host_print.py)."""

from __future__ import annotations

import pytest

import ember

torch = pytest.importorskip("torch")


def _program(m):
    def f(x, scale):
        y = x * scale + 1
        print("y is", y, "sum", y.sum(), sep=" | ")
        print("plain text")
        return (y * 2).sum()

    return f


def _outputs(m, capsys, compiled):
    out = []
    for k in range(3):
        x = m.arange(3.0) + k
        compiled(x, 2.0)
        out.append(capsys.readouterr().out)
    return out


def test_prints_every_call_with_the_calls_values_as_torch_compile(capsys):
    torch._dynamo.reset()
    want = _outputs(torch, capsys, torch.compile(_program(torch)))
    got = _outputs(ember, capsys, ember.compile(_program(ember)))
    assert got == want
    assert "SymbolicTensor" not in "".join(got)


@pytest.mark.parametrize("executor", ["interpreter", "codegen"])
def test_prints_under_each_executor_in_program_order(capsys, executor):
    def f(x):
        print("first", x)
        y = x.exp()
        print("second", y.sum())
        return y

    compiled = ember.compile(f, options={"executor": executor})
    for values in ([0.0, 1.0], [2.0, 3.0]):
        compiled(ember.tensor(values))
        eager = capsys.readouterr().out
        f(ember.tensor(values))
        assert eager == capsys.readouterr().out


def test_prints_in_a_compiled_training_module_and_leaves_print_alone_after(capsys):
    class Net(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = ember.nn.Linear(2, 2)

        def forward(self, x):
            h = self.fc(x)
            print("h", h.shape)
            return h.relu().sum()

    net = ember.compile(Net())
    for _ in range(2):
        net(ember.ones(3, 2)).backward()
    assert capsys.readouterr().out == "h ember.Size([3, 2])\n" * 2
    assert print.__module__ == "builtins"  # (the recording print was taken down after the call)


def test_dynamic_sizes_print_each_calls_values(capsys):
    compiled = ember.compile(lambda x: (print(x.sum()), x * 2)[1])
    for n in (2, 3, 4):
        compiled(ember.ones(n))
    assert capsys.readouterr().out == "tensor(2.)\ntensor(3.)\ntensor(4.)\n"
