"""PyTorch's own OpInfo database (``op_db``, 700 OpInfos) run through ember (torch_opdb.py):
float32 values, and float64 values and gradients, of each OpInfo's first samples.

An OpInfo that differs must be listed in torch_opdb_expected.py with the reason, and a listed
one that now agrees fails too, so the list stays true. Skipped without torch or expecttest
(op_db's module imports it)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")

from .torch_opdb import key, load_op_db, run_op, selected  # noqa: E402
from .torch_opdb_expected import EXPECTED  # noqa: E402

# both tests share op_db (imported once, a 20-second import) in one worker
pytestmark = pytest.mark.xdist_group("test_torch_opinfo")

# the first samples of each OpInfo (its simple cases, then broadcasting, 0-d and empty ones);
# all of them: ``python tests/ops/torch_opdb.py f64 --grad``
MAX_SAMPLES = 6
MODES = {"float32": (torch.float32, False), "float64-grad": (torch.float64, True)}


@pytest.fixture(scope="module")
def op_db():
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield load_op_db(monkeypatch)


@pytest.mark.parametrize("mode", list(MODES))
def test_op_db_samples_match_pytorch(op_db, mode):
    dtype, grad = MODES[mode]
    expected = EXPECTED[mode]
    outcomes = {
        key(op): run_op(op, dtype, grad, torch, MAX_SAMPLES) for op in selected(op_db, dtype)
    }
    unexpected = {name: why for name, why in outcomes.items() if why != "ok"}
    unexpected = {name: why for name, why in unexpected.items() if name not in expected}
    assert not unexpected, "ember differs from PyTorch on:\n" + "\n".join(
        f"  {name}: {why}" for name, why in sorted(unexpected.items())
    )
    agreeing = sorted(name for name in expected if outcomes.get(name) == "ok")
    assert not agreeing, f"listed as differing in torch_opdb_expected.py but agree: {agreeing}"
    unknown = sorted(name for name in expected if name not in outcomes)
    assert not unknown, f"torch_opdb_expected.py lists OpInfos not compared: {unknown}"
