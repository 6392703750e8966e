"""A whole pickled PyTorch model (``torch.save(model)`` by PyTorch) is refused by ``ember.load``
whatever ``weights_only`` says (ember runs no pickle code), as PyTorch 2.6+'s default
``weights_only=True`` refuses it; the error names the type and says to save the state_dict.
``ember.save(module)`` keeps the module's attributes, which ``ember.load(weights_only=False)``
builds again (its class in a module the program imported), as PyTorch's pickle does; the
default load refuses it as PyTorch's, and a whole optimizer is still refused."""

import pickle

import pytest
import torch

import ember


def test_loading_a_pickled_torch_module_names_it_and_says_what_to_do(tmp_path):
    path = tmp_path / "model.pt"
    torch.save(torch.nn.Linear(2, 2), path)
    with pytest.raises(Exception, match="Weights only load failed"):
        torch.load(path)  # PyTorch's own default refuses it too
    for kwargs in ({}, {"weights_only": False}, {"weights_only": True}):
        with pytest.raises(ember.CheckpointError) as info:
            ember.load(path, **kwargs)
        message = str(info.value)
        assert "torch.nn.modules.linear.Linear" in message
        assert "state_dict()" in message and "whatever weights_only says" in message


def test_a_saved_module_loads_whole_with_weights_only_false(tmp_path):
    m = ember.nn.Sequential(ember.nn.Linear(2, 3), ember.nn.BatchNorm1d(3))
    ember.save(m, tmp_path / "model.pt")
    with pytest.raises(ember.CheckpointError, match="weights_only=False") as info:
        ember.load(tmp_path / "model.pt")  # (PyTorch's default refuses a whole model too)
    assert isinstance(info.value, pickle.UnpicklingError)
    loaded = ember.load(tmp_path / "model.pt", weights_only=False)
    assert type(loaded) is ember.nn.Sequential and type(loaded[0].weight) is ember.nn.Parameter
    x = ember.randn(4, 2)
    m.eval(), loaded.eval()
    assert (loaded(x) == m(x)).all()
    assert sorted(loaded.state_dict()) == sorted(m.state_dict())
    optimizer = ember.optim.SGD(loaded.parameters(), lr=0.1)  # (its parameters are leaves)
    loaded(x).sum().backward()
    optimizer.step()
    assert not (loaded[0].weight == m[0].weight).all()


def test_saving_an_optimizer_says_to_save_its_state_dict(tmp_path):
    m = ember.nn.Linear(2, 2)
    with pytest.raises(ember.CheckpointError, match="save its state_dict"):
        ember.save(ember.optim.SGD(m.parameters(), lr=0.1), tmp_path / "x.pt")
    ember.save(m.state_dict(), tmp_path / "ok.pt")  # the advice works
    fresh = ember.nn.Linear(2, 2)
    fresh.load_state_dict(ember.load(tmp_path / "ok.pt"))
    assert (fresh.weight == m.weight).all()
