"""State-dict hooks and ``_load_from_state_dict`` overrides against PyTorch: key renames in an
override, load pre- and post-hooks (a post-hook clearing an expected missing key under strict),
state_dict pre- and post-hooks, and ember's all-or-nothing load where no post-hook asks for
PyTorch's order."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _program(lib):
    nn = lib.nn
    seen = []

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.scale = nn.Parameter(lib.ones(1))

        def _load_from_state_dict(self, state_dict, prefix, *args):
            old = prefix + "old_scale"  # a checkpoint from before the rename
            if old in state_dict:
                state_dict[prefix + "scale"] = state_dict.pop(old)
            super()._load_from_state_dict(state_dict, prefix, *args)

        def forward(self, x):
            return self.lin(x) * self.scale

    m = nn.Sequential(Block(), nn.ReLU(), Block())
    m[2].register_load_state_dict_pre_hook(
        lambda mod, sd, prefix, *rest: seen.append(
            ("pre", prefix, sorted(k for k in sd if k.startswith(prefix)))
        )
    )

    def forgive(mod, keys):
        seen.append(("post", sorted(keys.missing_keys)))
        if "2.lin.bias" in keys.missing_keys:
            keys.missing_keys.remove("2.lin.bias")

    m.register_load_state_dict_post_hook(forgive)
    m.register_state_dict_pre_hook(lambda mod, prefix, keep: seen.append(("save", prefix)))
    m[0].register_state_dict_post_hook(
        lambda mod, sd, prefix, meta: seen.append(
            ("saved", sorted(k for k in sd if k.startswith(prefix)))
        )
    )
    sd = {
        k: lib.tensor(np.full(tuple(v.shape), 0.5 + i, np.float32))
        for i, (k, v) in enumerate(m.state_dict().items())
    }
    sd["0.old_scale"] = sd.pop("0.scale") * 3
    del sd["2.lin.bias"]
    result = m.load_state_dict(sd)  # strict: the post-hook forgave the one missing key
    x = lib.ones(1, 2)
    # (2.lin.bias was not loaded: its random value differs between the libraries)
    return [m[0](x).detach().numpy(), m[0].scale.item(), list(result.missing_keys), seen]


def test_state_dict_hooks_and_load_overrides_match_torch():
    want, got = _program(torch), _program(ember)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    assert got[1:] == want[1:]


def test_strict_load_without_post_hooks_loads_nothing_on_error():
    m = ember.nn.Linear(2, 2)
    before = m.weight.detach().numpy().copy()
    with pytest.raises(ember.errors.StateDictError, match="Missing key"):
        m.load_state_dict({"weight": ember.zeros(2, 2)})
    np.testing.assert_array_equal(m.weight.detach().numpy(), before)
