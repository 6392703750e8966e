"""Names PyTorch has and ember lacks raise `NotInEmberError` (an AttributeError) naming them and
ember's alternative; names neither has keep Python's message, with close matches."""

from __future__ import annotations

import pytest

import ember
import ember.nn.functional as F
from ember import nn, optim
from ember._missing import TORCH_ONLY

torch = pytest.importorskip("torch")

NAMESPACES = {
    "ember": (ember, torch),
    "ember.nn": (nn, torch.nn),
    "ember.nn.functional": (F, torch.nn.functional),
    "ember.optim": (optim, torch.optim),
}


@pytest.mark.parametrize("namespace", sorted(NAMESPACES))
def test_table_lists_only_names_torch_has_and_ember_lacks(namespace):
    ours, theirs = NAMESPACES[namespace]
    for name in TORCH_ONLY[namespace]:
        assert hasattr(theirs, name), f"torch has no {namespace}.{name}: drop it from the table"
        assert name not in vars(ours), f"ember has {namespace}.{name} now: drop it from the table"
        with pytest.raises(ember.NotInEmberError) as info:
            getattr(ours, name)
        assert isinstance(info.value, AttributeError)
        assert repr(name) in str(info.value) and info.value.name == name


def test_tensor_table_lists_only_torch_tensor_attributes():
    x = ember.ones(2)
    for name in TORCH_ONLY["Tensor"]:
        assert hasattr(torch.Tensor, name), name
        assert not hasattr(type(x), name), f"ember has Tensor.{name} now: drop it from the table"
        with pytest.raises(ember.NotInEmberError, match=f"Tensor.{name}"):
            getattr(x, name)


def test_alternatives_are_named():
    with pytest.raises(ember.NotInEmberError, match=r"torch\.jit\.CompilationUnit.*jit\.script"):
        ember.jit.CompilationUnit  # noqa: B018
    with pytest.raises(ember.NotInEmberError, match=r"torch\.fx.*ember\.trace"):
        ember.fx.symbolic_trace  # noqa: B018
    with pytest.raises(ember.NotInEmberError, match="COO"):
        ember.sparse_csc_tensor  # noqa: B018
    with pytest.raises(ember.NotInEmberError, match="no ember counterpart"):
        ember.hub  # noqa: B018
    with pytest.raises(ember.NotInEmberError, match="Tensor.to_sparse_csc"):
        ember.ones(2).to_sparse_csc()
    error = pytest.raises(ember.NotInEmberError, lambda: nn.quantized).value
    assert error.op == "ember.nn.quantized" and "no ember counterpart" in str(error)


def test_hasattr_and_getattr_defaults_still_work():
    x = ember.ones(2)
    assert not hasattr(ember, "hub") and not hasattr(x, "to_sparse_csc")
    assert getattr(nn, "quantized", None) is None
    assert getattr(x, "no_such_attribute", 5) == 5
    assert not hasattr(x, "__array_interface__")


def test_unknown_names_suggest_close_matches():
    with pytest.raises(AttributeError, match=r"module 'ember' has no attribute 'zerso'.*'zeros'"):
        ember.zerso  # noqa: B018
    with pytest.raises(AttributeError, match=r"'ember.nn' has no attribute 'Linaer'.*'Linear'"):
        nn.Linaer  # noqa: B018
    with pytest.raises(AttributeError, match=r"'ember.optim'.*'Adma'.*'Adam'"):
        optim.Adma  # noqa: B018
    with pytest.raises(AttributeError, match=r"'Tensor' object has no attribute 'sumx'.*'sum'"):
        ember.ones(2).sumx  # noqa: B018
    error = pytest.raises(AttributeError, lambda: F.nothing_like_this_xyz).value
    assert not isinstance(error, ember.NotInEmberError)
    assert "Did you mean" not in str(error)


def test_symbolic_tensors_report_missing_names_too():
    seen = {}

    def f(x):
        for name in ("to_sparse_csc", "sumx"):
            try:
                getattr(x, name)
            except AttributeError as error:
                seen[name] = error
        return x * 2

    ember.trace(f, ember.ones(2))
    assert isinstance(seen["to_sparse_csc"], ember.NotInEmberError)
    assert "SymbolicTensor" in str(seen["sumx"]) and "'sum'" in str(seen["sumx"])


def test_private_and_dunder_names_are_plain_attribute_errors():
    with pytest.raises(AttributeError) as info:
        ember.__no_such_dunder__  # noqa: B018
    assert type(info.value) is AttributeError
    with pytest.raises(AttributeError) as info:
        ember.ones(1)._no_such_private  # noqa: B018
    assert type(info.value) is AttributeError
