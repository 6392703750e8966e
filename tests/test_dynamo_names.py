"""PyTorch names scripts reach for around compilation and tensors: torch._dynamo / compiler
reset and config, tensors carrying the user's own attributes."""

import copy
import io
import pickle

import pytest

import ember
from ember.capture import function as function_module


def test_reset_empties_every_compiled_cache_and_the_next_call_retraces():
    model = ember.nn.Linear(4, 2)
    compiled = ember.compile(model)
    fn = ember.function(lambda a: a * 2)
    x = ember.randn(3, 4)
    compiled(x), compiled(x), fn(x)
    inner = compiled.compiled_function
    assert inner.stats.traces == 1 and fn.stats.traces == 1
    ember._dynamo.reset()
    assert len(inner._cache) == 0 and len(fn._cache) == 0
    compiled(x), fn(x)
    assert inner.stats.traces == 2 and fn.stats.traces == 2
    ember.compiler.reset()
    fn(x)
    assert fn.stats.traces == 3


def test_config_cache_size_limit_is_the_functions_default_and_unknown_settings_are_refused():
    config = ember._dynamo.config
    before = function_module.DEFAULT_CACHE_SIZE
    try:
        config.cache_size_limit = 3
        assert function_module.DEFAULT_CACHE_SIZE == 3 and config.recompile_limit == 3
        fn = ember.function(lambda a: a + 1)
        for n in range(1, 6):
            fn(ember.randn(n))
        assert len(fn._cache) == 3
        with pytest.raises(ValueError):
            config.cache_size_limit = 0
    finally:
        function_module.DEFAULT_CACHE_SIZE = before
    config.suppress_errors = True  # (kept: ember falls back to eager at a failed capture)
    assert config.suppress_errors is True
    config.suppress_errors = False
    with pytest.raises(AttributeError, match="no setting 'not_a_setting'"):
        config.not_a_setting = 1
    x = ember.randn(2, 3)
    ember._dynamo.mark_dynamic(x, 0)
    assert x._dynamo_dynamic_indices == {0}
    with pytest.raises(IndexError):
        ember._dynamo.mark_dynamic(x, 5)


def test_tensors_and_parameters_carry_their_users_attributes():
    t = ember.randn(2)
    t.label = "input"
    assert t.label == "input" and copy.deepcopy(t).label == "input"
    p = ember.nn.Parameter(ember.randn(3))
    p.no_decay = True
    assert copy.deepcopy(p).no_decay is True
    assert pickle.loads(pickle.dumps(p)).no_decay is True
    with pytest.raises(AttributeError):  # (reading one never set is still an error)
        _ = p.not_set
    torch = pytest.importorskip("torch")
    tp = torch.nn.Parameter(torch.randn(3))
    tp.no_decay, tp.grad_scale = True, 0.5
    stream = io.BytesIO()
    torch.save({"p": tp}, stream)
    stream.seek(0)
    loaded = ember.load(stream, weights_only=True)["p"]
    assert loaded.no_decay is True and loaded.grad_scale == 0.5


def test_inductor_config_keeps_the_settings_scripts_assign():
    """gpt-fast's lines run; values read back; a misspelling is refused by name."""
    cfg = ember._inductor.config
    before = cfg.coordinate_descent_tuning
    cfg.coordinate_descent_tuning = True
    cfg.triton.unique_kernel_names = True
    cfg.fx_graph_cache = True
    try:
        assert cfg.coordinate_descent_tuning is True and cfg.triton.unique_kernel_names is True
        with pytest.raises(AttributeError, match="coordinate_descent_tunning"):
            cfg.coordinate_descent_tunning = True
        with pytest.raises(AttributeError, match="group of settings"):
            cfg.triton = {}
    finally:
        cfg.coordinate_descent_tuning = before
        cfg.triton.unique_kernel_names = False
