"""A whole pickled model (``torch.save(model)``) is refused by ``ember.load`` whatever
``weights_only`` says, as PyTorch 2.6+'s default ``weights_only=True`` refuses it; the error names
the type and says to save the state_dict. ``ember.save(module)`` says the same."""

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


def test_saving_a_module_or_optimizer_says_to_save_its_state_dict(tmp_path):
    m = ember.nn.Linear(2, 2)
    for obj in (m, ember.optim.SGD(m.parameters(), lr=0.1)):
        with pytest.raises(ember.CheckpointError, match="save its state_dict"):
            ember.save(obj, tmp_path / "x.pt")
    ember.save(m.state_dict(), tmp_path / "ok.pt")  # the advice works
    fresh = ember.nn.Linear(2, 2)
    fresh.load_state_dict(ember.load(tmp_path / "ok.pt"))
    assert (fresh.weight == m.weight).all()
