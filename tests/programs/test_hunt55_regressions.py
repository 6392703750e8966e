"""Regressions hunt55 found, each compared with PyTorch 2.13 where PyTorch has the behaviour: a
checkpoint holding one module, list or dict in two places loads it once, as pickle's memo makes
``torch.load``'s (ember loaded two copies, so a module shared by two names came back as two
modules and a Parameter saved beside its module's state_dict came back as a plain tensor);
crafted references in a checkpoint's structure are refused naming the file.
"""

import io
import json

import pytest

import ember

torch = pytest.importorskip("torch")


def _aliasing(lib):
    nn = lib.nn
    lib.manual_seed(0)
    shared = nn.Linear(3, 3)
    model = nn.Sequential(shared, nn.Tanh(), shared)
    buf = io.BytesIO()
    groups = [{"params": list(shared.parameters())}]
    lib.save(
        {
            "model": model,
            "again": shared,
            "weight": shared.weight,
            "sd": shared.state_dict(),
            "groups": [groups, groups],
        },
        buf,
    )
    buf.seek(0)
    out = lib.load(buf, weights_only=False)
    m = out["model"]
    return [
        m[0] is m[2],
        out["again"] is m[0],
        out["weight"] is m[0].weight,
        type(out["weight"]).__name__,
        out["sd"]["weight"].data_ptr() == m[0].weight.data_ptr(),
        out["groups"][0] is out["groups"][1],
        len(list(m.parameters())),
    ]


def test_objects_saved_twice_load_once_as_pytorchs():
    assert _aliasing(ember) == _aliasing(torch)


def test_a_module_shared_by_two_names_trains_as_one_after_loading():
    ember.manual_seed(0)
    shared = ember.nn.Linear(2, 2)
    buf = io.BytesIO()
    ember.save(ember.nn.Sequential(shared, shared), buf)
    buf.seek(0)
    model = ember.load(buf, weights_only=False)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    model(ember.ones(1, 2)).sum().backward()
    opt.step()
    assert model[0] is model[1] and model[0].weight.grad is not None
    assert len(opt.param_groups[0]["params"]) == 2


def _crafted(path, structure):
    from ember.io.checkpoint import write_safetensors

    metadata = {"ember_checkpoint": "1", "structure": json.dumps(structure)}
    write_safetensors(path, {}, metadata)
    return path


@pytest.mark.parametrize(
    "structure, message",
    [
        ({"$dict": {"a": {"$ref": 1}}}, "not read before"),  # (only the outer dict, number 0)
        ({"$dict": {"a": {"$ref": 0}}}, "contains it"),  # (a cycle)
        ([{"$ref": -1}], "not read before"),
        ([{"$ref": "0"}], "not read before"),
        ([[], {"$set": [{"$ref": 1}]}], "cannot be hashed"),
    ],
)
def test_crafted_references_are_refused_naming_the_file(tmp_path, structure, message):
    path = _crafted(tmp_path / "c", structure)
    with pytest.raises(ember.CheckpointError, match=message) as info:
        ember.load(path)
    assert str(path) in str(info.value)


def test_a_reference_reads_the_object_it_names(tmp_path):
    path = _crafted(tmp_path / "c", [[1], {"$dict": {"x": {"$ref": 1}}}, {"$ref": 2}])
    out = ember.load(path)
    assert out == [[1], {"x": [1]}, {"x": [1]}]
    assert out[1]["x"] is out[0] and out[2] is out[1]


def _explained(lib):
    def straight(x):
        return (x.sin() * 2).sum()

    def branchy(x):
        return x * 2 if x.sum() > 0 else x

    x = lib.ones(3)
    whole, broken = lib._dynamo.explain(straight)(x), lib._dynamo.explain(branchy)(x)
    return [
        (whole.graph_count, whole.graph_break_count, len(whole.break_reasons), len(whole.graphs)),
        (broken.graph_break_count, len(broken.break_reasons), broken.break_reasons[0].graph_break),
    ]


def test_dynamo_explain_counts_graphs_ops_and_breaks():
    want, got = _explained(torch), _explained(ember)
    assert got[0] == want[0]  # (one graph; no break)
    # (PyTorch's op_count counts only the graph's call_function nodes, not methods: ember's
    # counts every op of its graph)
    assert ember._dynamo.explain(lambda x: (x.sin() * 2).sum())(ember.ones(3)).ops_per_graph == [
        ["sin", "mul", "sum"]
    ]
    # a data-dependent branch breaks the graph in both; ember then has no graph at all (it never
    # captures part of a function), where PyTorch has the two around the break
    assert got[1] == want[1]
    out = ember._dynamo.explain(lambda x: x * 2 if x.sum() > 0 else x)(ember.ones(2))
    assert out.graph_count == 0 and "bool() of a traced tensor" in out.break_reasons[0].reason
    assert out.break_reasons[0].user_stack[0].filename == __file__
    assert "Graph Break Count: 1" in str(out)


def test_compile_accepts_inductors_settings_as_options():
    options = {"max_autotune": True, "triton.cudagraphs": False, "epilogue_fusion": False}
    f = ember.compile(lambda x: x * 3, options=options)
    assert f(ember.ones(2)).tolist() == [3.0, 3.0]
    with pytest.raises(TypeError, match="max_autotunes"):
        ember.compile(lambda x: x, options={"max_autotunes": True})


def test_parameter_dict_repr_names_the_tensor_type_as_pytorchs():
    def reprs(lib):
        values = {"w": lib.nn.Parameter(lib.ones(2, 3)), "b": lib.zeros(2, dtype=lib.float64)}
        return repr(lib.nn.ParameterDict(values))

    assert reprs(ember) == reprs(torch)


def test_parameter_dict_adds_a_plain_dicts_items_sorted_as_pytorch():
    from collections import OrderedDict

    def orders(lib):
        p = lib.nn.Parameter
        plain = {"w": p(lib.ones(1)), "b": p(lib.ones(2)), "a": p(lib.ones(3))}
        built = lib.nn.ParameterDict(plain)
        updated = lib.nn.ParameterDict()
        updated.update({"z": p(lib.ones(1)), "c": p(lib.ones(1))})
        ordered = lib.nn.ParameterDict(OrderedDict(plain))
        pairs = lib.nn.ParameterDict(list(plain.items()))
        return [
            list(built.keys()),
            [t.shape[0] for t in built.parameters()],  # (what an optimizer sees, in order)
            list(updated.keys()),
            list(ordered.keys()),
            list(pairs.keys()),
            list(lib.nn.ParameterDict(built).keys()),
        ]

    assert orders(ember) == orders(torch)


def _parameter_containers(lib):
    p = lib.nn.Parameter
    values = lib.nn.ParameterList([lib.ones(2), "x", None, p(lib.zeros(1)), 3])
    out = [len(values), [type(v).__name__ for v in values]]
    out += [[n for n, _ in values.named_parameters()], list(values.state_dict())]
    out.append(repr(values).replace("ember.", "torch."))
    values[1] = lib.ones(3)  # (a tensor where a string was: registered after the others)
    out += [[n for n, _ in values.named_parameters()], len(values[1:3])]
    table = lib.nn.ParameterDict({"b": "text", "a": lib.ones(1), "c": None})
    out += [list(table.keys()), [n for n, _ in table.named_parameters()], table["b"], table["c"]]
    out.append(repr(table))
    table["a"] = lib.zeros(2)
    del table["b"]
    out += [list(table.keys()), "b" in table, list(table.copy().keys())]
    out.append(list((table | lib.nn.ParameterDict({"z": lib.ones(1)})).keys()))
    return out


def test_parameter_containers_keep_other_objects_as_pytorchs():
    # PyTorch's ParameterList and ParameterDict hold any object, registering only tensors
    # (wrapped as Parameters); ember refused everything but tensors and None
    assert _parameter_containers(ember) == _parameter_containers(torch)
