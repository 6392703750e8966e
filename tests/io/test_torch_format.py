"""`ember.load` reading PyTorch checkpoints (torch.save's zip format) without torch and without
running pickle code: state_dicts into ember models, optimizer states, views and dtypes, malicious
and damaged files refused with a CheckpointError naming the file."""

import io
import os
import pickle
import zipfile

import ml_dtypes
import numpy as np
import pytest

import ember
from ember import nn
from ember.io import torch_format

torch = pytest.importorskip("torch", reason="PyTorch writes the files these tests read")


def _np(t):
    return t.detach().to(torch.float32).numpy() if t.dtype == torch.bfloat16 else t.numpy()


class TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 6 * 6, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


class EmberNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x):
        return self.fc(ember.relu(self.bn(self.conv(x))).flatten(1))


def test_a_torch_state_dict_loads_into_an_ember_model(tmp_path):
    torch.manual_seed(0)
    net = TorchNet()
    net.train()
    for _ in range(3):  # move the running statistics and num_batches_tracked
        net(torch.randn(8, 1, 6, 6))
    net.eval()
    path = tmp_path / "net.pt"
    torch.save(net.state_dict(), path)

    state = ember.load(path)
    assert list(state) == list(net.state_dict())
    assert state["bn.num_batches_tracked"].dtype == ember.int64
    assert int(state["bn.num_batches_tracked"].item()) == 3
    model = EmberNet()
    model.load_state_dict(state)
    model.eval()
    x = np.random.default_rng(1).normal(size=(2, 1, 6, 6)).astype(np.float32)
    with torch.no_grad():
        expected = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(
        model(ember.tensor(x)).detach().numpy(), expected, rtol=1e-5, atol=1e-5
    )
    assert int(model.bn.num_batches_tracked.item()) == 3


def test_a_torch_optimizer_state_dict(tmp_path):
    torch.manual_seed(0)
    net = TorchNet()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, betas=(0.8, 0.99))
    net(torch.randn(2, 1, 6, 6)).sum().backward()
    opt.step()
    path = tmp_path / "opt.pth"
    torch.save({"optimizer": opt.state_dict(), "epoch": 7, "names": ["a", "b"]}, path)

    got = ember.load(path, map_location="cpu", weights_only=True)
    want = opt.state_dict()
    assert got["epoch"] == 7 and got["names"] == ["a", "b"]
    group, want_group = got["optimizer"]["param_groups"][0], want["param_groups"][0]
    assert group == {k: v for k, v in want_group.items()}
    assert group["betas"] == (0.8, 0.99) and group["params"] == list(range(6))
    assert set(got["optimizer"]["state"]) == set(want["state"])
    for index, entry in want["state"].items():
        for key, value in entry.items():
            np.testing.assert_array_equal(got["optimizer"]["state"][index][key].numpy(), _np(value))


def test_views_into_a_shared_storage(tmp_path):
    base = torch.arange(24.0).reshape(4, 6)
    views = {
        "base": base,
        "rows": base[1:3],
        "strided": base[1:, ::2],
        "transposed": base.t(),
        "expanded": base[0].expand(3, 6),
        "scalar": base[2, 3],
        "empty": base[:0],
    }
    path = tmp_path / "views.pt"
    torch.save(views, path)
    got = ember.load(path)
    for name, value in views.items():
        assert got[name].shape == tuple(value.shape), name
        np.testing.assert_array_equal(got[name].numpy(), value.numpy(), err_msg=name)
    got["base"].numpy()[1, 0] = -1.0  # non-overlapping views share the storage, as in torch
    assert got["rows"].numpy()[0, 0] == -1.0


@pytest.mark.parametrize(
    "name",
    [
        "float32",
        "float64",
        "float16",
        "bfloat16",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "bool",
    ],
)
def test_every_ember_dtype(tmp_path, name):
    dtype = getattr(torch, name)
    values = torch.tensor([[0, 1, 2], [3, 100, 5]]).to(dtype)
    torch.save(
        {"t": values, "dtype": dtype, "p": torch.nn.Parameter(torch.ones(2))}, tmp_path / "d.pt"
    )
    got = ember.load(tmp_path / "d.pt")
    assert got["t"].dtype == getattr(ember, "bool_" if name == "bool" else name)
    assert got["dtype"] == got["t"].dtype
    if name == "bfloat16":
        np.testing.assert_array_equal(got["t"].numpy().astype(np.float32), _np(values))
        assert got["t"].numpy().dtype == ml_dtypes.bfloat16
    else:
        np.testing.assert_array_equal(got["t"].numpy(), values.numpy())
    assert got["p"].requires_grad and not got["t"].requires_grad


def test_other_python_values(tmp_path):
    obj = {
        "bytes": b"\x00\xff",
        "set": {1, 2},
        "complex": 1 + 2j,
        "size": torch.Size([2, 3]),
        "none": None,
        "tuple": (1.5, "x"),
        "big": 2**70,
        "device": torch.device("cpu"),
    }
    torch.save(obj, tmp_path / "o.pt")
    got = ember.load(tmp_path / "o.pt")
    assert got == {**obj, "size": (2, 3), "device": "cpu"}


@pytest.mark.parametrize("name", ["complex64", "complex128", "cfloat"])
def test_complex_tensors_and_views_of_them(tmp_path, name):
    dtype = getattr(torch, name)
    whole = torch.randn(3, 4, dtype=dtype)
    torch.save({"t": whole, "column": whole[:, 1], "dtype": dtype}, tmp_path / "c.pt")
    got = ember.load(tmp_path / "c.pt")
    assert got["t"].dtype == getattr(ember, name) == got["dtype"]
    np.testing.assert_array_equal(got["t"].numpy(), whole.numpy())
    np.testing.assert_array_equal(got["column"].numpy(), whole[:, 1].numpy())


@pytest.mark.parametrize(
    "name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]
)
@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_float8_tensors_and_strided_views_of_them(tmp_path, name, legacy):
    # (float8_e5m2's NumPy kind is "f" with one byte: strided views of it once read as "<f1")
    whole = torch.tensor([[1.0, -2.5, 0.25], [3.0, 448.0 if "e4m3" in name else 57344.0, 0]])
    whole = whole.to(getattr(torch, name))
    path = tmp_path / "f8.pt"
    torch.save({"t": whole, "column": whole.t()[1], "dtype": whole.dtype}, path,
               _use_new_zipfile_serialization=not legacy)  # fmt: skip
    got = ember.load(path)
    assert got["t"].dtype == getattr(ember, name) == got["dtype"]
    np.testing.assert_array_equal(got["t"].float().numpy(), whole.float().numpy())
    np.testing.assert_array_equal(got["column"].float().numpy(), whole.t()[1].float().numpy())


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_sparse_coo_tensors_and_layouts(tmp_path, legacy):
    hybrid = torch.sparse_coo_tensor(
        torch.tensor([[0, 1, 1], [2, 0, 2]]), torch.randn(3, 2), (2, 3, 2)
    )
    repeated = torch.sparse_coo_tensor(torch.tensor([[0, 0, 2]]), torch.tensor([1.0, 2, 3]), (3,))
    obj = {"eye": torch.eye(3).to_sparse(), "hybrid": hybrid, "repeated": repeated,
           "layouts": (torch.strided, torch.sparse_coo)}  # fmt: skip
    torch.save(obj, tmp_path / "s.pt", _use_new_zipfile_serialization=not legacy)
    got = ember.load(tmp_path / "s.pt")
    for key in ("eye", "hybrid", "repeated"):
        assert got[key].layout == ember.sparse_coo
        assert got[key].is_coalesced() == obj[key].is_coalesced()
        np.testing.assert_array_equal(got[key].to_dense().numpy(), obj[key].to_dense().numpy())
    assert got["layouts"] == (ember.strided, ember.sparse_coo)


def test_sparse_indices_outside_the_size_are_refused(tmp_path):
    # a crafted file: an index past the declared size (torch's weights-only reader checks this
    # too) must not become a tensor that reads outside its values
    bad = torch.sparse_coo_tensor(torch.tensor([[0, 7]]), torch.tensor([1.0, 2.0]), (8,))
    buffer = io.BytesIO()
    torch.save({"s": bad}, buffer)
    with zipfile.ZipFile(buffer) as z, zipfile.ZipFile(tmp_path / "s.pt", "w") as out:
        for name in z.namelist():
            data = z.read(name)
            if name.endswith("data.pkl"):  # the size (8,) -> (4,)
                data, count = data.replace(b"K\x08\x85", b"K\x04\x85"), data.count(b"K\x08\x85")
                assert count == 1
            out.writestr(name, data)
    with pytest.raises(ember.CheckpointError, match="s.pt: damaged .*sparse tensor"):
        ember.load(tmp_path / "s.pt")
    # the legacy format: its pickle is read once over placeholder storages, then over the data
    # (checked then); and a tensor marked coalesced whose indices repeat
    for size, indices in (((4,), [[0, 7]]), ((8,), [[3, 3]])):
        legacy = torch.sparse_coo_tensor(torch.tensor([[0, 7]]), torch.ones(2), (8,))
        buffer = io.BytesIO()
        torch.save({"s": legacy.coalesce()}, buffer, _use_new_zipfile_serialization=False)
        data = buffer.getvalue().replace(b"K\x08\x85", b"K%c\x85" % size[0])
        index_bytes = np.array([0, 7], np.int64).tobytes()
        data = data.replace(index_bytes, np.array(indices[0], np.int64).tobytes())
        (tmp_path / "l.pt").write_bytes(data)
        with pytest.raises(ember.CheckpointError, match="l.pt: damaged .*sparse tensor"):
            ember.load(tmp_path / "l.pt")


def test_layouts_ember_lacks_are_named(tmp_path):
    torch.save({"t": torch.eye(3).to_sparse_csr()}, tmp_path / "csr.pt")
    with pytest.raises(ember.CheckpointError, match="csr.pt: cannot read a sparse tensor of "
                       "layout torch.sparse_csr"):  # fmt: skip
        ember.load(tmp_path / "csr.pt")
    # (quantized tensors load: tests/test_sem57_quantized_params.py)


@pytest.mark.parametrize("dtype", ["complex32", "uint16"])
def test_a_dtype_ember_does_not_have_is_named(tmp_path, dtype):
    torch.save({"t": torch.zeros(2, dtype=getattr(torch, dtype))}, tmp_path / "c.pt")
    with pytest.raises(
        ember.CheckpointError, match=f"c.pt: cannot read a tensor of dtype torch.{dtype}"
    ):
        ember.load(tmp_path / "c.pt")


# ------------------------------------------------------------------------------ hostile files
class _Payload:
    """Unpickling this would run ``func(*args)``."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return (self.func, self.args)


def _zip(path, pickled: bytes, records=None, name="archive"):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{name}/data.pkl", pickled)
        z.writestr(f"{name}/byteorder", "little")
        for key, data in (records or {}).items():
            z.writestr(f"{name}/data/{key}", data)
        z.writestr(f"{name}/version", "3\n")


@pytest.mark.parametrize("weights_only", [True, False, None])
@pytest.mark.parametrize(
    "func, refused",
    [
        (os.system, f"{os.system.__module__}.system"),
        (eval, "builtins.eval"),
        (__import__("subprocess").call, "subprocess.call"),
    ],
)
def test_a_malicious_pickle_runs_nothing(tmp_path, monkeypatch, func, refused, weights_only):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "pwned"
    if func is eval:
        args = (f"open({str(marker)!r}, 'w').close()",)
    elif func is os.system:
        args = (f"touch {marker}",)
    else:
        args = (["touch", str(marker)],)
    payload = {"weights": torch.zeros(2), "evil": _Payload(func, *args)}
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    path = tmp_path / "evil.pt"
    path.write_bytes(buffer.getvalue())
    with pytest.raises(ember.CheckpointError) as info:
        ember.load(path, weights_only=weights_only)
    assert not marker.exists()
    assert str(path) in str(info.value) and f"the global {refused}" in str(info.value)


def test_a_hand_made_payload_and_a_build_are_refused(tmp_path):
    marker = tmp_path / "pwned"
    evil = pickle.dumps(_Payload(os.system, f"touch {marker}"), protocol=2)
    _zip(tmp_path / "a.pt", evil)
    with pytest.raises(ember.CheckpointError, match="refused the global"):
        ember.load(tmp_path / "a.pt")
    # BUILD on something other than an OrderedDict (here a set) is refused too
    build = b"\x80\x02c__builtin__\nset\n)R}b."
    _zip(tmp_path / "b.pt", build)
    with pytest.raises(ember.CheckpointError, match="BUILD"):
        ember.load(tmp_path / "b.pt")
    assert not marker.exists()


def _legacy_object():
    base = torch.arange(12.0).reshape(3, 4)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    return {
        "base": base,
        "row": base[1],
        "t": base.t(),
        "expand": torch.ones(3).expand(2, 3),
        "half": torch.ones(3, dtype=torch.float16) / 3,
        "bf16": torch.ones(2, dtype=torch.bfloat16),
        "int": torch.tensor([1, -2, 3]),
        "bool": torch.tensor([True, False]),
        "complex": torch.tensor([1 + 2j]),
        "model": model.state_dict(),
        "param": torch.nn.Parameter(torch.ones(2)),
        "plain": [1, 2.5, "x", (3, None), {"k": b"bytes"}],
        "empty": torch.zeros(0, 3),
    }


def _same(want, got, path="obj"):
    if isinstance(want, torch.Tensor):
        assert isinstance(got, ember.Tensor), path
        assert str(want.dtype).split(".")[-1] == got.dtype.name, path
        np.testing.assert_array_equal(_np(want.detach()), got.detach().numpy(), err_msg=path)
        assert got.requires_grad == want.requires_grad, path
    elif isinstance(want, dict):
        assert list(want) == list(got), path
        for k in want:
            _same(want[k], got[k], f"{path}.{k}")
    elif isinstance(want, (list, tuple)):
        assert type(want) is type(got) and len(want) == len(got), path
        for i, (a, b) in enumerate(zip(want, got)):
            _same(a, b, f"{path}[{i}]")
    else:
        assert want == got, path


def test_the_legacy_format_reads_as_weights_only(tmp_path):
    """torch.save(..., _use_new_zipfile_serialization=False) (and torch < 1.6): every value as
    torch.load(weights_only=True) gives it, views of one storage sharing memory."""
    path = tmp_path / "old.pt"
    torch.save(_legacy_object(), path, _use_new_zipfile_serialization=False)
    got = ember.load(path)
    _same(torch.load(path, weights_only=True), got)
    got["base"][1, 0] = 99.0  # (row is a view of base's storage, as in torch)
    assert got["row"][0].item() == 99.0
    with open(path, "rb") as stream:  # a binary file object too
        _same(torch.load(path, weights_only=True), ember.load(stream))
    torch.save(torch.nn.Linear(2, 2), tmp_path / "module.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(ember.CheckpointError, match="refused the global torch.nn"):
        ember.load(tmp_path / "module.pt")


def test_damaged_legacy_files_raise_checkpoint_errors(tmp_path):
    """Every truncation and a seeded set of byte changes: a CheckpointError or a value, never
    another exception."""
    path = tmp_path / "old.pt"
    torch.save(_legacy_object(), path, _use_new_zipfile_serialization=False)
    data = path.read_bytes()
    rng = np.random.default_rng(11)
    bad = tmp_path / "bad.pt"
    cuts = sorted(set(rng.integers(1, len(data), 60).tolist()) | {1, 2, 10, len(data) - 1})
    variants = [data[:n] for n in cuts]
    for _ in range(150):
        mutated = bytearray(data)
        for i in rng.integers(0, len(data), rng.integers(1, 4)):
            mutated[i] = int(rng.integers(0, 256))
        variants.append(bytes(mutated))
    for variant in variants:
        bad.write_bytes(variant)
        try:
            ember.load(bad)
        except ember.CheckpointError:
            pass


# ------------------------------------------------------------------------------ damaged files
@pytest.fixture
def good(tmp_path):
    path = tmp_path / "good.pt"
    base = torch.arange(6.0)
    torch.save({"a": base, "b": base[2:4]}, path)
    return path


def _rewrite(src, dst, change):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = change(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)


def test_damaged_files_raise_checkpoint_error_naming_the_file(good, tmp_path):
    data = good.read_bytes()
    cases = {}
    cases["truncated"] = data[: len(data) // 2]
    flipped = bytearray(data)
    start = data.index(b"\x00\x00\x80\x3f")  # the bytes of 1.0 in the storage
    flipped[start + 3] ^= 0x40
    cases["crc"] = bytes(flipped)
    for name, blob in cases.items():
        (tmp_path / name).write_bytes(blob)
    for name in cases:
        with pytest.raises(ember.CheckpointError, match=str(tmp_path / name)):
            ember.load(tmp_path / name)

    def drop_storage(name, blob):
        return None if name.endswith("/data/0") else blob

    _rewrite(good, tmp_path / "missing.pt", drop_storage)
    with pytest.raises(ember.CheckpointError, match="missing.pt.*record .*data/0.* is missing"):
        ember.load(tmp_path / "missing.pt")

    def short_storage(name, blob):
        return blob[:8] if name.endswith("/data/0") else blob

    _rewrite(good, tmp_path / "short.pt", short_storage)
    with pytest.raises(ember.CheckpointError, match="short.pt.*holds 8 bytes"):
        ember.load(tmp_path / "short.pt")

    def no_pickle(name, blob):
        return None if name.endswith("data.pkl") else blob

    _rewrite(good, tmp_path / "nopkl.pt", no_pickle)
    with pytest.raises(ember.CheckpointError, match="nopkl.pt .*not a PyTorch checkpoint"):
        ember.load(tmp_path / "nopkl.pt")


def test_a_view_beyond_its_storage_is_refused(tmp_path):
    base = torch.arange(6.0)
    buffer = io.BytesIO()
    torch.save({"b": base[2:4]}, buffer)
    src = tmp_path / "src.pt"
    src.write_bytes(buffer.getvalue())

    def bigger_view(name, blob):  # the view's size 2 becomes 9: beyond the 6-element storage
        return blob.replace(b"K\x02\x85", b"K\x09\x85", 1) if name.endswith("data.pkl") else blob

    _rewrite(src, tmp_path / "beyond.pt", bigger_view)
    with pytest.raises(ember.CheckpointError, match="beyond.pt.*storage is too small"):
        ember.load(tmp_path / "beyond.pt")


def test_a_garbage_pickle_is_refused(tmp_path):
    for k, junk in enumerate([b"", b"\x80\x02", b"\x80\x02]q\x00(K\x01", b"\x80\x02h\x05.", b"zz"]):
        _zip(tmp_path / f"j{k}.pt", junk)
        with pytest.raises(ember.CheckpointError, match=f"j{k}.pt"):
            ember.load(tmp_path / f"j{k}.pt")


def test_ember_checkpoints_still_load(tmp_path):
    ember.save({"w": ember.ones(2)}, tmp_path / "e.ckpt")
    assert ember.load(tmp_path / "e.ckpt")["w"].numpy().tolist() == [1.0, 1.0]
    assert torch_format.is_torch_file(b"PK\x03\x04") and not torch_format.is_torch_file(b"\x10")


def test_a_record_claiming_more_than_the_file_holds_allocates_nothing(tmp_path):
    # a deflated storage record that claims 4 GiB: refused before any allocation
    pickled = (
        b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nByteStorage\n"
        b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpu\x8a\x05\xff\xff\xff\xff\x00tQK\x00"
        b"\x8a\x05\xff\xff\xff\xff\x00\x85K\x01\x85\x89)tR."
    )
    path = tmp_path / "bomb.pt"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("archive/data.pkl", pickled)
        z.writestr("archive/data/0", b"\0" * 4096)
    data = bytearray(path.read_bytes())
    # claim 2**32 - 1 bytes uncompressed in the central directory entry of archive/data/0
    at = data.rindex(b"PK\x01\x02")
    data[at + 24 : at + 28] = (2**32 - 1).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(ember.CheckpointError, match="bomb.pt.*which the file cannot hold"):
        ember.load(path)


_TENSOR_PICKLE = (  # a float32 tensor of 2 elements in storage "0"
    b"ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\n"
    b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x02tQK\x00K\x02\x85K\x01\x85\x89)tR"
)


@pytest.mark.parametrize(
    "program, refused",
    [
        # items set into a tensor would write the file's values into it
        (_TENSOR_PICKLE + b"(K\x00K\x05u", "SETITEMS into a Tensor"),
        (_TENSOR_PICKLE + b"K\x00K\x05s", "SETITEM into a Tensor"),
        (b"]K\x00K\x05s", "SETITEM into a list"),
        (b"}K\x05a", "APPEND into a dict"),
        (b"}(K\x05e", "APPENDS into a dict"),
    ],
)
def test_items_go_only_into_containers(tmp_path, program, refused):
    _zip(tmp_path / "i.pt", b"\x80\x02" + program + b".", {"0": b"\0" * 8})
    with pytest.raises(ember.CheckpointError, match=refused):
        ember.load(tmp_path / "i.pt")


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_numpy_arrays_scalars_and_dtypes_are_read_as_plain_data(tmp_path, legacy):
    """A training script's checkpoint often holds NumPy values beside the tensors (a best
    accuracy as np.float64, a class-count array): built from their bytes, never by NumPy's
    own unpickling functions, and what torch.load(weights_only=False) gives."""
    arrays = {
        "counts": np.arange(6, dtype=np.int64).reshape(2, 3),
        "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        "big_endian": np.arange(4, dtype=">i4"),
        "empty": np.zeros((0, 3), np.float32),
        "flags": np.array([True, False]),
        "complex": np.array([1 + 2j], np.complex64),
        "zero_d": np.array(2.5),
    }
    scalars = {"best": np.float64(0.875), "step": np.int32(7), "ok": np.bool_(True)}
    obj = {**arrays, **scalars, "dtype": np.dtype("float16"), "again": None, "t": torch.ones(2)}
    obj["again"] = obj["counts"]  # a second reference to one array (the memo)
    torch.save(obj, tmp_path / "n.pt", _use_new_zipfile_serialization=not legacy)
    got = ember.load(tmp_path / "n.pt")
    want = torch.load(tmp_path / "n.pt", weights_only=False)
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            np.testing.assert_array_equal(got[key].numpy(), value.numpy())
            continue
        assert type(got[key]) is type(value), key
        if isinstance(value, np.ndarray):
            assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
            np.testing.assert_array_equal(got[key], value)
        else:
            assert got[key] == value, key
    assert got["again"] is got["counts"]


@pytest.mark.parametrize(
    "value, refused",
    [
        (np.array([{"a": 1}, None], dtype=object), "dtype object"),
        (np.zeros(2, dtype=[("x", "f4"), ("y", "i4")]), "fields"),
        (np.array(["ab"]), "only numbers"),
        (np.ma.masked_array([1.0, 2.0]), "refused the global numpy.ma"),
    ],
    ids=["object", "structured", "string", "masked"],
)
def test_numpy_values_other_than_numbers_are_refused(tmp_path, value, refused):
    torch.save({"x": value}, tmp_path / "n.pt")
    with pytest.raises(ember.CheckpointError, match=refused):
        ember.load(tmp_path / "n.pt")


def test_a_numpy_array_whose_bytes_do_not_fill_its_shape_is_refused(tmp_path):
    """A hand-made state claiming a huge shape over a few bytes allocates nothing."""
    reconstruct, args, _ = np.arange(1).__reduce__()

    class Claim:
        def __reduce__(self):
            return reconstruct, args, (1, (1 << 40,), np.dtype("i8"), False, bytes(24))

    _zip(tmp_path / "n.pt", pickle.dumps({"x": Claim()}, protocol=2))
    with pytest.raises(ember.CheckpointError, match="bytes of data"):
        ember.load(tmp_path / "n.pt")
