"""An ember-written ONNX file's ``ember.symbolic_sizes`` metadata (onnx/_size_contract.py) with
its numbers changed by type: a JSON ``Infinity`` as a symbol's power or a size's coefficient
reached ``int()`` in SymDim.from_json and escaped `ember.onnx.load` as a raw OverflowError; a
float or a string there was silently truncated into a size the file never said. The record's
numbers are now whole numbers as JSON spells them, checked by the shared reader
(symbolic.py's `SymDim.from_json`, which graph files use too), and a seeded slice of JSON
mutations loads and runs or is refused with an `EmberError`
(``EMBER_FUZZ_CASES``/``EMBER_FUZZ_SEED`` for more).
"""

from __future__ import annotations

import json
import random

import pytest

import ember
from ember.capture.signature import TensorSpec
from ember.errors import EmberError, OnnxError
from ember.graph import sym
from ember.symbolic import SymDim

from . import files54_fuzzing as fz

onnx = pytest.importorskip("onnx")
KEY = "ember.symbolic_sizes"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    ember.manual_seed(0)
    layer = ember.nn.Linear(4, 4)

    def f(x, y):
        return layer(x).sum() + y.reshape(-1).sum()

    path = tmp_path_factory.mktemp("sc") / "m.onnx"
    signature = [TensorSpec((None, 4)), TensorSpec((sym("n") * 2, 3))]
    ember.onnx.export(ember.function(f), path, input_signature=signature)
    proto = onnx.load(path)
    record = json.loads(next(p.value for p in proto.metadata_props if p.key == KEY))
    return proto, record


def _with(proto, text: str) -> bytes:
    copy = type(proto)()
    copy.CopyFrom(proto)
    for prop in copy.metadata_props:
        if prop.key == KEY:
            prop.value = text
    return copy.SerializeToString()


def _call(data: bytes) -> None:
    model = ember.onnx.load(data)
    model(ember.randn(3, 4), ember.randn(4, 3))


@pytest.mark.parametrize(
    "field, value",
    [("power", "Infinity"), ("coefficient", "Infinity"), ("power", "1.5"), ("coefficient", '"2"')],
)
def test_a_size_number_that_is_no_whole_number_is_refused(exported, field, value):
    proto, record = exported
    _call(_with(proto, json.dumps(record)))  # the file as written runs
    size = record["inputs"]["y"][0]["sym"]
    text = json.dumps({**size, "factors": [["n", 999]]} if field == "power" else {**size})
    text = text.replace("999", value) if field == "power" else text
    if field == "coefficient":
        text = text.replace(f'"coefficient": {size["coefficient"]}', f'"coefficient": {value}')
    changed = json.dumps(record).replace(json.dumps(size), text)
    assert changed != json.dumps(record)
    with pytest.raises(OnnxError, match="bad symbolic size"):
        _call(_with(proto, changed))


@pytest.mark.parametrize(
    "record",
    [
        {"coefficient": float("inf"), "factors": [["n", 1]]},
        {"coefficient": 2, "factors": [["n", 1.0]]},
        {"coefficient": True, "factors": [["n", 1]]},
        {"coefficient": 2, "factors": [["n", 1], ["n", 2]]},
        {"coefficient": 2, "factors": [["not a name", 1]]},
        {"coefficient": 2, "factors": [["n", 65]]},
        {"coefficient": 0, "factors": [["n", 1]]},
    ],
)
def test_the_shared_reader_refuses_what_no_writer_spells(record):
    with pytest.raises(ValueError):
        SymDim.from_json(record)
    assert SymDim.from_json({"coefficient": 2, "factors": [["n", 1]]}) == 2 * sym("n")


def test_seeded_mutations_of_the_record_load_or_are_refused(exported):
    proto, record = exported
    rng = random.Random(fz.seed(56))
    escaped = []
    for _ in range(fz.cases(150)):
        changed = fz.mutate_json(record, rng)
        try:
            text = json.dumps(changed)
        except (ValueError, RecursionError):
            continue
        try:
            _call(_with(proto, text))
        except EmberError:
            pass
        except Exception as exc:  # noqa: BLE001 - what the fuzzer looks for
            escaped.append(f"{type(exc).__name__}: {exc} <- {text[:200]}")
    assert not escaped, escaped[:3]
