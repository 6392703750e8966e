"""Regressions hunt54 found, each compared with PyTorch 2.13: ``torch.compile(dynamic=True)``
called with tensors of another rank, dtype or trailing size compiles again (it refused the call
with the first call's signature); torch.jit's classes (``isinstance(m, torch.jit.ScriptModule)``
of a scripted or traced module, ``ScriptFunction``, a ``ScriptModule`` subclass with
``@script_method``), ``TracerWarning``, ``jit.Attribute``, ``jit.isinstance`` and the fusion
switches; a module's own ``_save_to_state_dict``; ``dtype.to_complex``; ``load(weights_only=False)``
of a checkpoint holding a program's object, and the default load's UnpicklingError."""

import argparse
import io
import pickle
import sys
import typing
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _dynamic_calls(lib):
    # (PyTorch's eager backend: its guards and recompiles without inductor's compile time)
    options = {"backend": "eager"} if lib is torch else {}
    f = lib.compile(lambda x: x.cos() + 1, dynamic=True, **options)
    inputs = [
        np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4),
        np.linspace(0, 1, 20, dtype=np.float32).reshape(5, 4),  # another batch
        np.linspace(0, 1, 5, dtype=np.float32),  # another rank
        np.linspace(0, 1, 15, dtype=np.float32).reshape(3, 5),  # another trailing size
        np.linspace(0, 1, 12, dtype=np.float64).reshape(3, 4),  # another dtype
        np.float32(0.5),  # a 0-d tensor
    ]
    return [f(lib.tensor(a)).numpy() for a in inputs]


def test_compile_dynamic_compiles_again_for_other_ranks_dtypes_and_sizes():
    for want, got in zip(_dynamic_calls(torch), _dynamic_calls(ember)):
        assert want.dtype == got.dtype and want.shape == got.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_compile_dynamic_keeps_one_graph_per_signature_past_the_batch():
    f = ember.compile(lambda x: x * 2, dynamic=True)
    for n in (2, 3, 7):
        f(ember.ones(n, 4))
    f(ember.ones(3))
    compiled = f._compiled
    assert len(compiled.dynamic_functions) == 2
    assert compiled.function.stats.traces == 1  # (the last signature's, traced once)
    ember.compiler.reset()
    assert not compiled.dynamic_functions


def _jit_answers(lib):
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(x).relu()

    x = lib.ones(2, 3)
    scripted = lib.jit.script(Net())
    traced = lib.jit.trace(Net(), (x,))

    def double(a):
        return a * 2

    s_fn = lib.jit.script(double)
    t_fn = lib.jit.trace(lambda a: a + 1, (x,))
    plain = Net()
    jit = lib.jit
    return [
        isinstance(scripted, jit.ScriptModule),
        isinstance(scripted, jit.RecursiveScriptModule),
        isinstance(traced, jit.ScriptModule),
        isinstance(traced, jit.TopLevelTracedModule),
        isinstance(traced, jit.TracedModule),
        isinstance(traced, jit.RecursiveScriptModule),
        isinstance(plain, jit.ScriptModule),
        isinstance(s_fn, jit.ScriptFunction),
        isinstance(t_fn, jit.ScriptFunction),
        isinstance(double, jit.ScriptFunction) if s_fn is not double else False,
        isinstance(scripted, jit.ScriptFunction),
        isinstance(x, jit.ScriptModule),
        issubclass(jit.TracerWarning, Warning),
        jit.Attribute(3, int),
        jit.isinstance([1, 2], list[int]),
        jit.isinstance([1, "a"], list[int]),
        jit.isinstance({"a": x}, dict[str, lib.Tensor]),
        jit.isinstance((1, "a"), tuple[int, str]),
        jit.isinstance(None, int | None),
        jit.isinstance([None, 2], typing.List[typing.Optional[int]]),  # noqa: UP006, UP045
        jit.isinstance(2.0, int),
    ]


def test_jit_classes_answer_isinstance_as_pytorchs():
    assert _jit_answers(ember) == _jit_answers(torch)


def test_script_module_subclass_with_script_methods_runs_as_python():
    def run(lib):
        class Old(lib.jit.ScriptModule):
            def __init__(self):
                super().__init__()
                self.scale = lib.jit.Attribute(2.0, float)
                self.w = lib.nn.Parameter(lib.ones(3))

            @lib.jit.script_method
            def forward(self, x):
                return x * self.w * self.scale

        m = Old()
        out = m(lib.arange(3.0))
        out.sum().backward()
        return [out.detach().numpy(), m.w.grad.numpy(), isinstance(m, lib.jit.ScriptModule)]

    want, got = run(torch), run(ember)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[2] == want[2] is True


def test_tracer_warning_filters_and_fusion_switches():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=ember.jit.TracerWarning)
        warnings.warn("ignored", ember.jit.TracerWarning, stacklevel=1)
    previous = ember.jit.set_fusion_strategy([("DYNAMIC", 3)])
    assert ember.jit.set_fusion_strategy(previous) == [("DYNAMIC", 3)]
    ember.jit.enable_onednn_fusion(True)
    assert ember.jit.onednn_fusion_enabled()
    ember.jit.enable_onednn_fusion(False)
    with ember.jit.strict_fusion():
        y = ember.ones(2) * 2
    assert y.sum().item() == 4.0
    assert issubclass(ember.jit.Error, RuntimeError)


def _legacy_state(lib):
    nn = lib.nn

    class Legacy(nn.Module):
        """Saves its buffer under another name and converts it back when loading."""

        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.register_buffer("scale", lib.tensor(2.0))

        def _save_to_state_dict(self, destination, prefix, keep_vars):
            super()._save_to_state_dict(destination, prefix, keep_vars)
            destination[prefix + "scale_x10"] = self.scale * 10
            del destination[prefix + "scale"]

        def _load_from_state_dict(self, state_dict, prefix, *args):
            key = prefix + "scale_x10"
            if key in state_dict:
                state_dict[prefix + "scale"] = state_dict.pop(key) / 10
            super()._load_from_state_dict(state_dict, prefix, *args)

    lib.manual_seed(0)
    saved = nn.Sequential(Legacy(), nn.ReLU()).state_dict()
    fresh = nn.Sequential(Legacy(), nn.ReLU())
    fresh[0].scale.fill_(0)
    result = fresh.load_state_dict(saved)
    return list(saved), saved["0.scale_x10"].item(), str(result), fresh[0].scale.item()


def test_a_module_overriding_save_to_state_dict_is_saved_through_it():
    assert _legacy_state(ember) == _legacy_state(torch)


def test_dtype_to_complex_and_to_real_are_pytorchs():
    for name in ("float32", "float64", "bfloat16", "complex64", "complex128"):
        ours, theirs = getattr(ember, name), getattr(torch, name)
        assert str(ours.to_complex()).split(".")[1] == str(theirs.to_complex()).split(".")[1]
        assert str(ours.to_real()).split(".")[1] == str(theirs.to_real()).split(".")[1]
    assert ember.float16.to_complex() is ember.complex64  # (PyTorch's complex32, which ember lacks)
    with pytest.raises(ember.EmberError):
        ember.int32.to_complex()


def _namespace_checkpoint(lib):
    buffer = io.BytesIO()
    lib.save({"args": argparse.Namespace(lr=0.1, name="run"), "w": lib.ones(2)}, buffer)
    buffer.seek(0)
    try:
        lib.load(buffer)
        refused = None
    except pickle.UnpicklingError:
        refused = "UnpicklingError"
    buffer.seek(0)
    loaded = lib.load(buffer, weights_only=False)
    return refused, vars(loaded["args"]), loaded["w"].tolist()


def test_weights_only_false_builds_the_programs_imported_classes():
    """The default load refuses a Namespace as PyTorch's (an UnpicklingError, which programs
    catch to retry), weights_only=False builds it."""
    assert _namespace_checkpoint(ember) == _namespace_checkpoint(torch)


def test_weights_only_false_imports_nothing_the_file_names():
    structure = {"$dict": {"x": {"$object": {"class": "no_such_module_54.Thing", "state": {}}}}}
    with pytest.raises(ember.CheckpointError, match="not allowed"):
        ember.io._tree.decode(structure, {}, "f", trusted=True)
    assert "no_such_module_54" not in sys.modules


def test_process_group_calls_before_init_raise_valueerror_as_pytorchs():
    """Scripts fall back to a single process on PyTorch's ValueError."""
    for lib in (torch, ember):
        for call in (
            lambda: lib.distributed.get_rank(),
            lambda: lib.distributed.get_world_size(),
            lambda: lib.distributed.all_reduce(lib.ones(1)),
        ):
            with pytest.raises(ValueError, match="not been initialized"):
                call()


def test_save_takes_pytorchs_pickle_and_format_arguments(tmp_path):
    for lib in (torch, ember):
        path = tmp_path / f"{lib.__name__}.pt"
        lib.save({"a": lib.ones(2)}, path, pickle_protocol=2, _use_new_zipfile_serialization=False)
        loaded = lib.load(path, map_location=lambda storage, location: storage)
        assert loaded["a"].tolist() == [1.0, 1.0]
