"""Checkpoints: round trips, the safetensors format, atomic writes, and damaged files."""

import json
import math
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest
import safetensors
import safetensors.numpy
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.io import CheckpointTypeError, load, save

try:
    import torch
except ImportError:
    torch = None

TORCH_MISSING = "PyTorch is not installed (pip install torch==2.13.0 from the CPU index)"


def _sample_array(dtype, shape=(2, 3)):
    rng = np.random.default_rng(0)
    if dtype == ember.bool:
        return rng.random(shape) < 0.5
    if dtype.is_integer:
        info = np.iinfo(dtype.np)
        return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype.np)
    values = rng.normal(size=shape) * 100
    return values.astype(dtype.np)


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def _train_state():
    """What a training loop saves: model, optimizer, scheduler, RNG and loader state, counters."""
    w, b = ember.randn(4, 3), ember.zeros(4)
    return {
        "model": {"fc.weight": w, "fc.bias": b, "bn.num_batches_tracked": ember.tensor(7)},
        "optimizer": {
            "state": {0: {"momentum_buffer": ember.ones(4, 3)}, 1: {"step": ember.tensor(3.0)}},
            "param_groups": [
                {"lr": 0.1, "betas": (0.9, 0.999), "nesterov": False, "params": [0, 1]}
            ],
        },
        "scheduler": {"last_epoch": 3, "base_lrs": [0.1], "_last_lr": [0.0125]},
        "rng": ember.Generator(5).get_state(),
        "step": 12345678901234567890,
        "history": [{"loss": 0.1 + 0.2, "acc": float("nan")}, {"loss": float("inf")}],
        "note": "unicode ✓",
        "nothing": None,
        "empty": {"list": [], "tuple": (), "dict": {}},
        "dtype": ember.bfloat16,
        "transposed": ember.randn(3, 4).transpose(0, 1),  # a non-contiguous view
    }


def _assert_same(a, b):
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, ember.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert _bits(a.numpy()) == _bits(b.numpy())
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


# ----------------------------------------------------------------------------------- round trips
def test_round_trip_of_a_training_state(tmp_path):
    state = _train_state()
    save(state, tmp_path / "ckpt")
    loaded = load(tmp_path / "ckpt", map_location="cpu")
    _assert_same(state, loaded)
    restored = ember.Generator(0).set_state(loaded["rng"])
    np.testing.assert_array_equal(
        ember.randn(3, generator=restored).numpy(),
        ember.randn(3, generator=ember.Generator(5)).numpy(),
    )


@pytest.mark.parametrize("dtype", ember.dtypes.ALL_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 4)], ids=str)
def test_every_dtype_and_shape_round_trips_bit_for_bit(tmp_path, dtype, shape):
    t = ember.tensor(_sample_array(dtype, shape), dtype=dtype)
    save({"t": t, "arr": t.numpy().copy()}, tmp_path / "x")
    out = load(tmp_path / "x")
    assert (
        isinstance(out["t"], ember.Tensor) and out["t"].dtype == dtype and out["t"].shape == shape
    )
    assert _bits(out["t"].numpy()) == _bits(t.numpy())
    assert isinstance(out["arr"], np.ndarray) and out["arr"].dtype == dtype.np


_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=5)
    | st.builds(
        lambda shape, dtype: ember.tensor(_sample_array(dtype, shape), dtype=dtype),
        st.lists(st.integers(0, 3), max_size=3).map(tuple),
        st.sampled_from(ember.dtypes.ALL_DTYPES),
    )
)
_trees = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        | st.dictionaries(st.integers(-5, 5), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=40, deadline=None)
@given(_trees)
def test_any_nested_structure_round_trips(tmp_path_factory, tree):
    path = tmp_path_factory.mktemp("tree") / "x"
    save(tree, path)
    _assert_same(tree, load(path))


@pytest.mark.parametrize(
    "name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]
)
def test_float8_tensors_round_trip_bit_for_bit(tmp_path, name):
    # (the two OCP formats under safetensors' own codes, the fnuz ones as their bytes)
    bits = np.arange(256, dtype=np.uint8).reshape(16, 16)
    t = ember.tensor(bits.view(getattr(ember, name).np))
    save({"t": t, "column": t[:, 3], "arr": t.numpy()}, tmp_path / "x")
    out = load(tmp_path / "x")
    assert out["t"].dtype == getattr(ember, name) and out["arr"].dtype == t.numpy().dtype
    assert out["t"].numpy().view(np.uint8).tobytes() == bits.tobytes()
    assert out["column"].numpy().view(np.uint8).tobytes() == bits[:, 3].tobytes()


def test_sparse_tensors_and_sets_round_trip(tmp_path):
    indices = ember.tensor([[0, 1, 1], [2, 0, 2]])
    raw = ember.sparse_coo_tensor(indices, ember.randn(3, 2), (2, 3, 2))
    grads = ember.sparse_coo_tensor(indices[:, :1], ember.ones(1), (2, 3), requires_grad=True)
    tree = {"raw": raw, "coalesced": raw.coalesce(), "grads": grads, "s": {1, "a"},
            "f": frozenset([2.5])}  # fmt: skip
    save(tree, tmp_path / "x")
    out = load(tmp_path / "x")
    for key in ("raw", "coalesced", "grads"):
        assert out[key].layout == ember.sparse_coo and out[key].shape == tree[key].shape
        assert out[key].is_coalesced() == tree[key].is_coalesced()
        assert out[key].requires_grad == tree[key].requires_grad
        np.testing.assert_array_equal(
            out[key].to_dense().detach().numpy(), tree[key].to_dense().detach().numpy()
        )
    assert out["s"] == {1, "a"} and type(out["f"]) is frozenset and out["f"] == {2.5}


def test_a_crafted_sparse_tensor_is_refused_naming_the_file(tmp_path):
    # the structure is JSON the file's author controls: indices past the size, or a tensor
    # claimed coalesced whose indices repeat, are refused before anything reads them
    for indices, size, coalesced in (([[0, 9]], [4], False), ([[1, 1]], [4], True)):
        node = {"indices": {"$tensor": "i"}, "values": {"$tensor": "v"}, "size": size,
                "coalesced": coalesced}  # fmt: skip
        arrays = {"i": np.array(indices, np.int64), "v": np.ones(2, np.float32)}
        path = _crafted(tmp_path / "c", {"$sparse_coo": node}, arrays)
        with pytest.raises(ember.CheckpointError, match="corrupt checkpoint .*sparse tensor"):
            load(path)
    node = {"indices": {"$tensor": "i"}, "values": {"$tensor": "v"}, "size": [2**70],
            "coalesced": False}  # fmt: skip
    path = _crafted(tmp_path / "c", {"$sparse_coo": node}, arrays)
    with pytest.raises(ember.CheckpointError, match="corrupt checkpoint .*list of sizes"):
        load(path)


def test_special_float_values_and_numpy_scalars(tmp_path):
    t = ember.tensor(np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45], np.float32))
    save([t, np.float16(1.5), np.int8(-3), 2.5, -0.0], tmp_path / "x")
    out = load(tmp_path / "x")
    assert _bits(out[0].numpy()) == _bits(t.numpy())
    assert out[1] == np.float16(1.5) and out[1].dtype == np.float16
    assert out[2] == -3 and out[2].dtype == np.int8
    assert out[3] == 2.5 and math.copysign(1.0, out[4]) == -1.0


def test_requires_grad_is_kept_and_shared_tensors_load_equal(tmp_path):
    w = ember.randn(3, requires_grad=True)
    save({"a": w, "b": [w, {"c": w}]}, tmp_path / "x")
    out = load(tmp_path / "x")
    assert out["a"].requires_grad and out["a"].is_leaf
    for other in (out["b"][0], out["b"][1]["c"]):
        np.testing.assert_array_equal(other.detach().numpy(), out["a"].detach().numpy())


def test_saving_overwrites_and_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "ckpt"
    save({"v": ember.tensor([1.0])}, path)
    save({"v": ember.tensor([2.0])}, path)
    assert load(path)["v"].item() == 2.0
    assert os.listdir(tmp_path) == ["ckpt"]


# ---------------------------------------------------------------------------------- the format
def test_the_file_is_a_safetensors_file_with_the_structure_in_its_metadata(tmp_path):
    state = {"model": {"fc.weight": ember.randn(2, 2), "fc.bias": ember.zeros(2)}, "epoch": 3}
    path = tmp_path / "ckpt.safetensors"
    save(state, path)
    tensors = safetensors.numpy.load_file(str(path))
    assert set(tensors) == {"model.fc.weight", "model.fc.bias"}
    np.testing.assert_array_equal(tensors["model.fc.weight"], state["model"]["fc.weight"].numpy())
    with safetensors.safe_open(str(path), framework="numpy") as f:
        metadata = f.metadata()
    assert all(isinstance(v, str) for v in metadata.values())
    structure = json.loads(metadata["structure"])
    assert structure["$dict"]["epoch"] == 3
    assert structure["$dict"]["model"]["$dict"]["fc.bias"] == {"$tensor": "model.fc.bias"}


def test_a_model_state_dict_saves_under_its_own_names(tmp_path):
    sd = {"0.weight": ember.ones(2, 2), "0.bias": ember.zeros(2)}
    save(sd, tmp_path / "m")
    assert set(safetensors.numpy.load_file(str(tmp_path / "m"))) == set(sd)


@pytest.mark.skipif(torch is None, reason=TORCH_MISSING)
def test_bfloat16_and_bool_tensors_are_readable_by_safetensors_torch(tmp_path):
    import safetensors.torch

    b16 = ember.tensor(_sample_array(ember.float32), dtype=ember.bfloat16)
    mask = ember.tensor(_sample_array(ember.bool))
    save({"b16": b16, "mask": mask}, tmp_path / "x")
    tensors = safetensors.torch.load_file(str(tmp_path / "x"))
    assert tensors["b16"].dtype == torch.bfloat16 and tensors["mask"].dtype == torch.bool
    np.testing.assert_array_equal(tensors["b16"].float().numpy(), b16.numpy().astype(np.float32))
    np.testing.assert_array_equal(tensors["mask"].numpy(), mask.numpy())


def test_unsupported_objects_are_refused_with_their_place(tmp_path):
    with pytest.raises(CheckpointTypeError, match="'opt.fn' is a function") as info:
        save({"opt": {"fn": lambda: 0}}, tmp_path / "x")
    assert isinstance(info.value, TypeError) and isinstance(info.value, ember.EmberError)
    loop = []
    loop.append(loop)
    with pytest.raises(CheckpointTypeError, match="contains itself"):
        save(loop, tmp_path / "x")
    with pytest.raises(CheckpointTypeError, match="key of type tuple"):
        save({(1, 2): 3}, tmp_path / "x")
    assert not os.listdir(tmp_path)  # nothing was written
    with pytest.raises(ember.CheckpointError, match="does not exist"):
        save({}, tmp_path / "missing-dir" / "x")


# ----------------------------------------------------------------------------------- atomicity
def test_a_failed_replace_leaves_the_old_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt"
    save({"v": ember.tensor([1.0, 2.0])}, path)

    def failing_replace(src, dst):
        assert os.path.getsize(src) > 0  # the new file was fully written
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(ember.CheckpointError, match="previous file.*unchanged"):
        save({"v": ember.tensor([9.0, 9.0])}, path)
    monkeypatch.undo()
    assert load(path)["v"].numpy().tolist() == [1.0, 2.0]
    assert os.listdir(tmp_path) == ["ckpt"]  # the temporary file was removed


def test_a_process_killed_mid_save_leaves_the_old_checkpoint(tmp_path):
    path = tmp_path / "ckpt"
    save({"v": ember.tensor([1.0, 2.0])}, path)
    script = textwrap.dedent(
        f"""
        import os, signal
        import ember
        from ember.io import save

        def die(fd):  # the temporary file is written; die before it is renamed
            os.kill(os.getpid(), signal.SIGKILL)

        os.fsync = die
        save({{"v": ember.ones(1000)}}, {str(path)!r})
        """
    )
    for _ in range(3):
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
        assert result.returncode == -9, result.stderr
    # each killed save removed its predecessor's temporary: one is left, the last one's
    leftovers = [n for n in os.listdir(tmp_path) if n != "ckpt"]
    assert len(leftovers) == 1 and leftovers[0].endswith(".tmp")
    assert load(path)["v"].numpy().tolist() == [1.0, 2.0]
    # and the next save removes it
    save({"v": ember.tensor([3.0])}, path)
    assert os.listdir(tmp_path) == ["ckpt"]


# ------------------------------------------------------------------------------- damaged files
@pytest.fixture
def good_file(tmp_path):
    path = tmp_path / "good.ckpt"
    save({"w": ember.randn(16, 16), "step": 3}, path)
    return path


@pytest.mark.parametrize("keep", [0, 5, 8, 40, -1, -100])
def test_truncated_files_raise_checkpoint_error(good_file, keep):
    data = good_file.read_bytes()
    good_file.write_bytes(data[:keep])
    with pytest.raises(ember.CheckpointError) as info:
        load(good_file)
    assert str(good_file) in str(info.value)
    assert "truncated" in str(info.value) or "empty" in str(info.value)


def test_a_flipped_data_byte_is_caught_by_the_checksum(good_file):
    data = bytearray(good_file.read_bytes())
    data[-10] ^= 0x40
    good_file.write_bytes(bytes(data))
    with pytest.raises(ember.CheckpointError, match="'w' is corrupt"):
        load(good_file)


def test_a_damaged_header_raises_checkpoint_error(good_file):
    data = bytearray(good_file.read_bytes())
    data[9] = ord("#")  # inside the JSON header
    good_file.write_bytes(bytes(data))
    with pytest.raises(ember.CheckpointError, match="corrupt safetensors header"):
        load(good_file)


def test_a_tampered_tensor_extent_raises_checkpoint_error(good_file):
    data = good_file.read_bytes()
    length = int.from_bytes(data[:8], "little")
    header = data[8 : 8 + length].replace(b"[16,16]", b"[16,17]")
    good_file.write_bytes(data[:8] + header + data[8 + length :])
    with pytest.raises(ember.CheckpointError, match="needs 1088 bytes"):
        load(good_file)


def test_non_ember_files_raise_checkpoint_error(tmp_path):
    plain = tmp_path / "plain.safetensors"
    safetensors.numpy.save_file({"a": np.zeros(2, np.float32)}, str(plain))
    with pytest.raises(ember.CheckpointError, match="not an ember checkpoint"):
        load(plain)
    garbage = tmp_path / "garbage"
    # (random bytes, but not starting with 0x80 or "PK": those read as a PyTorch pickle, the
    # next test's case; os.urandom began with 0x80 one run in 256)
    noise = np.random.default_rng(0).integers(0, 256, 256, dtype=np.uint8).tobytes()
    garbage.write_bytes(b"\x01" + noise[1:])
    with pytest.raises(ember.CheckpointError, match="not a safetensors file"):
        load(garbage)
    with pytest.raises(ember.CheckpointError, match="no such file"):
        load(tmp_path / "missing")
    with pytest.raises(ember.CheckpointError, match="is a directory"):
        load(tmp_path)


@pytest.mark.skipif(torch is None, reason=TORCH_MISSING)
def test_pytorch_checkpoints_are_read_without_unpickling(tmp_path):
    path = tmp_path / "model.pt"
    torch.save({"w": torch.zeros(2)}, path)
    assert load(path)["w"].numpy().tolist() == [
        0.0,
        0.0,
    ]  # the zip format: tests/io/test_torch_format.py
    torch.save({"w": torch.ones(2)}, path, _use_new_zipfile_serialization=False)
    assert load(path)["w"].numpy().tolist() == [1.0, 1.0]  # the legacy format, as weights only
    import os as _os
    import pickle

    class Evil:
        def __reduce__(self):
            return (_os.system, ("echo pwned",))

    path.write_bytes(pickle.dumps(Evil(), protocol=2))
    with pytest.raises(ember.CheckpointError, match="never unpickles"):
        load(path)
    path.write_bytes(pickle.dumps({"w": [1, 2]}, protocol=2))
    with pytest.raises(ember.CheckpointError, match="not a PyTorch checkpoint"):
        load(path)


def test_bfloat16_values_survive_exactly(tmp_path):
    values = np.array([1.0, -2.5, 3.140625, 1e30], dtype=ml_dtypes.bfloat16)
    save(ember.tensor(values), tmp_path / "x")
    out = load(tmp_path / "x")
    assert out.dtype == ember.bfloat16
    assert _bits(out.numpy()) == _bits(values)


# ------------------------------------------------------------------------------ crafted files
def _crafted(path, structure, arrays=None, tensors=None):
    """A checkpoint whose structure JSON is ``structure`` (text or an object) and whose header
    lists ``tensors`` (name -> header entry) over ``arrays``' bytes: the header checksum is made
    to match, as an attacker would, so only the loader's own checks stand in the way."""
    from ember.io.checkpoint import HEADER_KEY, _header_digest

    arrays = arrays or {}
    text = structure if isinstance(structure, str) else json.dumps(structure)
    data, entries, at = b"", {}, 0
    for name, a in arrays.items():
        raw = np.ascontiguousarray(a).tobytes()
        entries[name] = {
            "dtype": {np.dtype(np.int64): "I64"}.get(np.dtype(a.dtype), "F32"),
            "shape": list(a.shape),
            "data_offsets": [at, at + len(raw)],
        }
        data, at = data + raw, at + len(raw)
    entries.update(tensors or {})
    metadata = {"ember_checkpoint": "1", "structure": text, "crc32": "{}"}
    shapes = {n: (e["dtype"], e["shape"]) for n, e in entries.items() if isinstance(e, dict)}
    try:
        metadata[HEADER_KEY] = _header_digest(metadata, shapes)
    except (TypeError, ValueError):
        pass  # a header too broken to hash: the loader must refuse it before that matters
    header = json.dumps({"__metadata__": metadata, **entries}).encode()
    path.write_bytes(len(header).to_bytes(8, "little") + header + data)
    return path


@pytest.mark.parametrize(
    "tensors, message",
    [
        ({"t": {"dtype": "F32", "shape": [2**64, 0], "data_offsets": [0, 0]}}, "malformed shape"),
        ({"t": {"dtype": "F32", "shape": [2**62, 0], "data_offsets": [0, 0]}}, "malformed shape"),
        ({"t": {"dtype": "F32", "shape": "12", "data_offsets": [0, 8]}}, "malformed shape"),
        ({"t": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}}, "malformed shape"),
        ({"t": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}, "dtype"),
        ({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, "4"]}}, "data_offsets"),
        ({"t": [1, 2]}, "malformed entry"),
        ({"t": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}}, "data_offsets"),
    ],
)
def test_crafted_tensor_entries_raise_checkpoint_error(tmp_path, tensors, message):
    path = _crafted(tmp_path / "c", {"$tensor": "t"}, tensors=tensors)
    with pytest.raises(ember.CheckpointError, match=message) as info:
        load(path)
    assert str(path) in str(info.value) and "'t'" in str(info.value)


def test_overlapping_extents_raise_checkpoint_error(tmp_path):
    a = np.zeros(4, np.float32)
    tensors = {"b": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}
    path = _crafted(
        tmp_path / "c", {"$tuple": [{"$tensor": "a"}, {"$tensor": "b"}]}, {"a": a}, tensors
    )
    with pytest.raises(ember.CheckpointError, match="overlaps"):
        load(path)


def _deep(depth):
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "structure, message",
    [
        ({"$tensor": []}, "tensor reference should be a name"),
        ({"$tensor": "a", "junk": 1}, "unknown keys"),
        ({"$tensor": "a", "requires_grad": "yes"}, "requires_grad"),
        ({"$tensor": "a", "kind": "numpy_scalar"}, "holds 4 values"),
        ({"$items": [[[1, 2], 3]]}, "dict key of type list"),
        ({"$items": [[{"$dict": {}}, 3]]}, "dict key of type dict"),
        ({"$items": [[{"$tensor": "a"}, 3]]}, "dict key of type Tensor"),
        ({"$dict": {"x": {"$float": "1.5"}}}, r"at 'x'.*unknown tag '\$float'"),
        (_deep(5000), "nested too deeply"),
        (_deep(900), "nested more than 200 deep"),
        ("[" + "9" * 5000 + "]", "Exceeds the limit"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 40 else None,
)
def test_crafted_structures_raise_checkpoint_error(tmp_path, structure, message):
    path = _crafted(tmp_path / "c", structure, {"a": np.zeros(4, np.float32)})
    with pytest.raises(ember.CheckpointError, match=rf"(?s)c\b.*{message}"):
        load(path)


def test_a_header_deeper_than_json_can_parse(tmp_path):
    header = ('{"__metadata__":' + _deep(5000) + "}").encode()
    path = tmp_path / "c"
    path.write_bytes(len(header).to_bytes(8, "little") + header)
    with pytest.raises(ember.CheckpointError, match="corrupt safetensors header.*too deeply"):
        load(path)


# ---------------------------------------------------------------------------- the header checksum
def _flips(data: bytes, start: int, stop: int):
    for i in range(start, stop):
        for bit in range(8):
            damaged = bytearray(data)
            damaged[i] ^= 1 << bit
            yield bytes(damaged)


def _outcome(path, original):
    """'refused' (a CheckpointError), 'same' (loads as the saved object) or 'different'."""
    try:
        loaded = load(path)
    except ember.CheckpointError:
        return "refused"
    try:
        _assert_same(original, loaded)
    except AssertionError:
        return "different"
    return "same"


def test_no_flipped_header_bit_loads_as_a_different_object(tmp_path):
    """Every single-bit flip of a training state's header is refused or changes nothing; before
    the header had a checksum, 786 of these 5,248 flips loaded as another object (a renamed
    key, another learning rate or epoch)."""
    state = {
        "config": {"model": "cnn", "lr": 0.05, "batch_size": 32},
        "epoch": 3,
        "model": {"fc.weight": ember.randn(4, 3), "fc.bias": ember.zeros(4)},
        "optimizer": {"param_groups": [{"lr": 0.05, "momentum": 0.9, "params": [0, 1]}]},
        "history": [{"epoch": 1, "loss": 0.5}],
    }
    path = tmp_path / "ckpt"
    save(state, path)
    data = path.read_bytes()
    length = int.from_bytes(data[:8], "little")
    outcomes = {"refused": 0, "same": 0, "different": 0}
    for damaged in _flips(data, 0, 8 + length):
        path.write_bytes(damaged)
        outcomes[_outcome(path, state)] += 1
    # ("same": a flip JSON reads the same, such as the exponent of 1e-05 as 1E-05)
    assert outcomes["different"] == 0, outcomes


def test_the_header_checksum_names_the_problem_and_old_files_still_load(tmp_path):
    from ember.io.checkpoint import HEADER_KEY

    path = tmp_path / "ckpt"
    save({"lr": 0.05, "w": ember.ones(2)}, path)
    data = path.read_bytes()
    path.write_bytes(data.replace(b"0.05", b"0.95"))
    with pytest.raises(ember.CheckpointError, match=f"ckpt: corrupt header.*{HEADER_KEY}"):
        load(path)
    # a file written before the header had a checksum (no entry) loads, its tensors checked
    path.write_bytes(data)
    header_len = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + header_len])
    del header["__metadata__"][HEADER_KEY]
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data[8 + header_len :])
    assert load(path)["lr"] == 0.05
    np.testing.assert_array_equal(safetensors.numpy.load_file(str(path))["w"], [1, 1])


@pytest.mark.parametrize("dtype", [ember.complex64, ember.complex128])
@pytest.mark.parametrize("shape", [(), (0, 3), (2, 3)])
def test_complex_tensors_round_trip(tmp_path, dtype, shape):
    rng = np.random.default_rng(0)
    array = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype.np)
    tensor = ember.tensor(array, requires_grad=True)
    save({"t": tensor, "scalar": array.reshape(-1)[:1][0] if array.size else 1j}, tmp_path / "c")
    got = load(tmp_path / "c")
    assert got["t"].dtype == dtype and got["t"].requires_grad
    np.testing.assert_array_equal(got["t"].detach().numpy(), array)
    # other safetensors readers see the real and imaginary parts as a last axis of 2
    parts = safetensors.numpy.load_file(tmp_path / "c")["t"]
    assert parts.shape == (*shape, 2)
    np.testing.assert_array_equal(parts[..., 1], array.imag)


def test_a_complex_reference_to_an_odd_array_is_damage(tmp_path):
    path = tmp_path / "c"
    save({"t": ember.ones(3, dtype=ember.complex64)}, path)
    metadata, arrays = ember.io.checkpoint.read_safetensors(
        path, ember.io.checkpoint._check_checkpoint_metadata
    )
    arrays["t"] = np.ones((3, 3), np.float32)  # not a last axis of 2
    metadata.pop(ember.io.checkpoint.HEADER_KEY)
    ember.io.checkpoint.write_safetensors(path, arrays, metadata)
    with pytest.raises(ember.CheckpointError, match="last axis of 2"):
        load(path)
