"""Mutation fuzzing of ember's file readers: checkpoints (``ember.load``: ember's own and
PyTorch's zip checkpoints) and graph files (``ember.load_graph``), from valid seed files.

Each mutation is one of

* **bytes**: flipped bits (anywhere, or in the header), a truncation, bytes inserted, deleted or
  overwritten, a new header length; the file's checksums are left as they were, as damage
  leaves them;
* **JSON**: the header's tensor entries or a metadata structure (the checkpoint's object tree,
  the graph's nodes) parsed and changed at a random place (a value replaced by a hostile one,
  a key dropped or renamed, an item duplicated or swapped, a string or number moved from
  elsewhere in the file, a subtree nested thousands deep), then written back **with fresh
  checksums** half the time, as a crafted file would be, so the readers' own checks are what
  stands between it and the program;
* **zip** (PyTorch checkpoints, kind ``torch``): the archive rewritten with fresh CRC-32s after
  its pickle was damaged (bytes flipped, inserted, deleted, truncated, a small int changed), one
  of its globals renamed (to ``posix.system``, ``builtins.eval``, ...), the pickle replaced by a
  payload that would create a file named ``M``, or a storage record dropped, cut or grown.

`check_file` reads a file as ember's tools do (load, of the path and of its bytes in an
``io.BytesIO``, which must agree; a training checkpoint as ``ember train
--resume`` does; a graph also printed, drawn as DOT and as the viewer's table, its Python
generated, which must compile, and ``ember inspect``'s page made) and returns the description
of any exception that is not ember's own (None when the file was read, or refused with an
`EmberError`). `fuzz` runs mutations until a count or a time is reached and returns the tally.

Run on demand for minutes (see tests/io/test_fuzz_loaders.py)::

    EMBER_FUZZ_SECONDS=600 PYTHONPATH=src python -m pytest -p no:cacheprovider -o addopts="" \\
        -q -s tests/io/test_fuzz_loaders.py -k long
"""

from __future__ import annotations

import copy
import io
import json
import math
import os
import random
import time
import traceback
import zipfile
from dataclasses import dataclass, field

import numpy as np

import ember
from ember.errors import EmberError
from ember.io.checkpoint import HEADER_KEY, _crc, _header_digest

HOSTILE_STRINGS = [
    "",
    "x",
    "0",
    "N",
    "<img src=x onerror=alert(1)>",
    "</script><script>alert(1)</script>",
    "N=0;__import__('os').system('touch M');x",
    "a); import os; (b",
    "\n\r\t\x00",
    "é∂漢",
    "../../etc/passwd",
    "%s%n{0}",
    "a" * 5000,
    "float32",
    "int64",
    "bfloat16",
    "relu",
    "matmul",
    "fused_elementwise",
    "$tensor",
    "$dict",
    "nan",
    "-inf",
    "1e999",
]
HOSTILE_NUMBERS = [
    -1,
    0,
    1,
    2,
    3,
    7,
    255,
    2**31,
    2**32,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63),
    10**30,
    0.5,
    -0.0,
    1e308,
    float("inf"),
    float("nan"),
    True,
    False,
]
GRAPH_TAGS = ["none", "bool", "int", "float", "str", "tuple", "list", "dtype", "sym"]
GRAPH_TAGS += ["generator", "npscalar", "graph", "op", "program", "x"]
CHECKPOINT_TAGS = ["$dict", "$items", "$tuple", "$float", "$dtype", "$tensor", "$x"]


# ------------------------------------------------------------------------------- seed files
def _train_state():
    w = ember.randn(4, 3)
    return {
        "format": "ember-train",
        "config": {"model": "mlp", "lr": 0.05, "epochs": 2, "seed": 3},
        "epoch": 1,
        "model": {"fc.weight": w, "fc.bias": ember.zeros(4), "steps": ember.tensor(7)},
        "optimizer": {
            "state": {0: {"momentum_buffer": ember.ones(4, 3)}, 1: {"step": ember.tensor(3.0)}},
            "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0, 1]}],
        },
        "rng": ember.Generator(5).get_state(),
        "history": [{"loss": 0.3, "acc": float("nan")}, {"loss": float("inf")}],
        "extras": {
            "dtype": ember.bfloat16,
            "scalar": np.float16(1.5),
            "array": np.arange(6, dtype=np.int32).reshape(2, 3),
            "shared": w,
            "grad": ember.randn(2).requires_grad_(),
            "half": ember.randn(3).to(ember.bfloat16),
            "mask": ember.tensor([True, False]),
            "empty": ember.zeros(0, 3),
            "tuple": (1, "two", None, -0.0),
        },
    }


def _graphs():
    from ember import models
    from ember.graph import Graph, sym
    from ember.ops import REGISTRY
    from ember.types import TensorType

    f32 = ember.float32
    n = sym("N")
    small = Graph("small")
    x = small.add_input(TensorType((n, 4), f32), "x")
    w = small.add_input(TensorType((3, 4), f32), "w")
    h = small.add_call(REGISTRY["linear"], [x, w]).outputs[0]
    scale = small.add_constant(np.arange(3, dtype=np.float32).reshape(1, 3), "scale")
    y = small.add_call(REGISTRY["mul"], [h, scale]).outputs[0]
    r = small.add_call(REGISTRY["reshape"], [y], {"shape": (n * 3,)}).outputs[0]
    s = small.add_call(REGISTRY["sum"], [y], {"axes": (1,), "keepdims": False}).outputs[0]
    small.set_outputs([s, r])

    def fused(x, b):
        return ((x + b).relu() * 2.0).sum(axis=1), (x * b).tanh()

    def epilogue(x, w):
        return (x @ w).relu()

    def dropout(x):
        return ember.nn.functional.dropout(x, 0.5, training=True, generator=ember.Generator(1))

    def loop(x):
        def body(v):
            return ember.cond(v.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, v)

        return ember.while_loop(lambda v: v.abs().sum() < 100.0, body, x)

    traced = [
        ember.trace(fused, ember.randn(4, 3), ember.randn(3), opt_level=3).graph,
        ember.trace(epilogue, ember.randn(4, 3), ember.randn(3, 5), opt_level=3).graph,
        ember.trace(dropout, ember.randn(6)).graph,
        ember.trace(loop, ember.randn(4), opt_level=0).graph,
        ember.trace(models.mlp(8, 16, 4), ember.randn(2, 8), opt_level=3).graph,
    ]
    return [small, *traced]


TRAIN_SETTINGS = dict(model="mlp", epochs=2, batch_size=64, seed=3, progress=False)


def seed_files(directory) -> dict:
    """name -> (kind, bytes) of the valid files mutations start from: checkpoints, an ``ember
    train`` checkpoint (kind ``train``: also checked as --resume checks it) and graphs."""
    from ember.train import TrainConfig, run

    directory = str(directory)
    seeds = {}
    path = os.path.join(directory, "train.ckpt")
    run(TrainConfig(checkpoint=path, stop_after=1, **TRAIN_SETTINGS))
    seeds["train_run"] = ("train", open(path, "rb").read())
    path = os.path.join(directory, "seed.ckpt")
    ember.save(_train_state(), path)
    seeds["train_state"] = ("checkpoint", open(path, "rb").read())
    ember.save({"w": ember.randn(3), "step": 3}, path)
    seeds["small_checkpoint"] = ("checkpoint", open(path, "rb").read())
    sparse = ember.sparse_coo_tensor(ember.tensor([[0, 1, 1], [2, 0, 2]]), ember.randn(3), (2, 3))
    rare = {
        "sparse": sparse,
        "coalesced": sparse.coalesce(),
        "tags": {1, 2},
        "e4m3": ember.randn(4).to(ember.float8_e4m3fn),
        "fnuz": ember.randn(2).to(ember.float8_e5m2fnuz),
    }
    ember.save(rare, path)
    seeds["rare_values"] = ("checkpoint", open(path, "rb").read())
    for k, graph in enumerate(_graphs()):
        path = os.path.join(directory, f"seed{k}.graph")
        graph.save(path)
        seeds[f"graph{k}_{graph.name}"] = ("graph", open(path, "rb").read())
    seeds.update(torch_seeds())
    return seeds


def torch_seeds() -> dict:
    """PyTorch checkpoints (kind ``torch``) written by torch.save, when torch is installed: a
    CNN's state_dict with BatchNorm, an optimizer state, views of one storage, several dtypes."""
    try:
        import torch
    except ImportError:
        return {}
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2), torch.nn.Flatten(), torch.nn.Linear(8, 2)
    )
    opt = torch.optim.Adam(net.parameters())
    net(torch.randn(2, 1, 4, 4)).sum().backward()
    opt.step()
    base = torch.arange(12.0).reshape(3, 4)
    objects = {
        "torch_state_dict": net.state_dict(),
        "torch_optimizer": {"optimizer": opt.state_dict(), "epoch": 3},
        "torch_views": {
            "a": base,
            "b": base[1:, ::2],
            "c": base.t(),
            "d": base[0].expand(2, 4),
            "i": torch.arange(5, dtype=torch.int32),
            "h": torch.ones(3, dtype=torch.bfloat16),
            "m": torch.tensor([True, False]),
            "p": torch.nn.Parameter(torch.ones(2)),
        },
        "torch_rare": {
            "sparse": torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.ones(2, 2), (3, 2)),
            "f8": torch.ones(3).to(torch.float8_e5m2),
            "layout": torch.sparse_coo,
        },
    }
    seeds = {}
    for name, obj in objects.items():
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        seeds[name] = ("torch", buffer.getvalue())
    return seeds


# ------------------------------------------------------------------------------- file layout
def split(data: bytes):
    """(header dict, data bytes) of a safetensors file, or None if it does not parse."""
    if len(data) < 8:
        return None
    length = int.from_bytes(data[:8], "little")
    try:
        header = json.loads(data[8 : 8 + length])
    except ValueError:
        return None
    return (header, data[8 + length :]) if isinstance(header, dict) else None


def join(header: dict, body: bytes, refresh: bool) -> bytes:
    """A file of ``header`` and ``body``; ``refresh``: its checksums made to match (crafted)."""
    metadata = header.get("__metadata__") if isinstance(header, dict) else None
    if refresh and isinstance(metadata, dict):
        tensors = {}
        crcs = {}
        for name, info in header.items():
            if name == "__metadata__" or not isinstance(info, dict):
                continue
            tensors[name] = (info.get("dtype"), info.get("shape"))
            offsets = info.get("data_offsets")
            if (
                isinstance(offsets, list)
                and len(offsets) == 2
                and all(isinstance(o, int) for o in offsets)
                and 0 <= offsets[0] <= offsets[1] <= len(body)
            ):
                crcs[name] = _crc(np.frombuffer(body[offsets[0] : offsets[1]], np.uint8))
        if isinstance(metadata.get("crc32"), str):
            metadata["crc32"] = json.dumps(crcs)
        try:
            metadata[HEADER_KEY] = _header_digest(metadata, tensors)
        except (TypeError, ValueError, OverflowError):
            pass
    try:
        text = json.dumps(header, separators=(",", ":")).encode()
    except (RecursionError, ValueError):
        text = b"[]"
    return len(text).to_bytes(8, "little") + text + body


# ------------------------------------------------------------------------------- tree mutation
def _places(tree, limit: int = 20000) -> list:
    """(container, key) of every value in ``tree`` (the root as (None, None))."""
    places, stack = [(None, None)], [tree] if isinstance(tree, (dict, list)) else []
    while stack and len(places) < limit:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            places.append((node, key))
            if isinstance(value, (dict, list)):
                stack.append(value)
    return places


def _leaves(tree, kind) -> list:
    found = []
    for container, key in _places(tree):
        if container is not None and isinstance(container[key], kind):
            if not isinstance(container[key], bool):
                found.append(container[key])
        if isinstance(container, dict) and isinstance(key, kind):
            found.append(key)
    return found


def _op_names() -> list:
    from ember.ops import REGISTRY

    return sorted(REGISTRY)


def _random_value(rng: random.Random, tree, tags: list):
    choice = rng.random()
    if choice < 0.05 and tags is GRAPH_TAGS:
        return rng.choice(_op_names())  # another op: other arities, attributes, rules
    if choice < 0.3:
        return rng.choice(HOSTILE_STRINGS + _leaves(tree, str)[:200])
    if choice < 0.6:
        return rng.choice(HOSTILE_NUMBERS + _leaves(tree, (int, float))[:200])
    if choice < 0.7:
        return None
    if choice < 0.8:
        return rng.choice([[], {}, [[[]]], [1, 2], {"a": 1}])
    if choice < 0.9:
        return {rng.choice(tags): rng.choice([None, 1, "x", [], {}])}
    return {"t": rng.choice(GRAPH_TAGS), "v": rng.choice([None, 1, "x", [], [1], {}])}


def mutate_tree(tree, rng: random.Random, tags: list):
    """``tree`` (parsed JSON, changed in place) with one random change (see the module
    docstring)."""
    places = _places(tree)
    container, key = rng.choice(places)
    if container is None:  # the root itself
        return _random_value(rng, tree, tags) if rng.random() < 0.5 else [tree]
    op = rng.randrange(9)
    value = container[key]
    if op == 0:
        container[key] = _random_value(rng, tree, tags)
    elif op == 1 and isinstance(container, dict):
        del container[key]
    elif op == 1:
        container.pop(key)
    elif op == 2 and isinstance(container, dict):
        container[rng.choice(HOSTILE_STRINGS + list(container) + tags)] = container.pop(key)
    elif op == 2:
        container.insert(key, copy.deepcopy(value))
    elif op == 3 and isinstance(container, list) and len(container) > 1:
        other = rng.randrange(len(container))
        container[key], container[other] = container[other], container[key]
    elif op == 4 and isinstance(value, str):
        container[key] = rng.choice(_leaves(tree, str) or HOSTILE_STRINGS)
    elif op == 5 and isinstance(value, (int, float)) and not isinstance(value, bool):
        container[key] = rng.choice(
            [value + 1, value - 1, -value, value * 2**32, 0, *_leaves(tree, (int, float))[:50]]
        )
    elif op == 6:
        depth = rng.choice([2, 40, 150])  # (deeper: as text, in `mutate`)
        for _ in range(depth):
            value = [value] if rng.random() < 0.5 else {"t": "tuple", "v": [value]}
        container[key] = value
    elif op == 7 and isinstance(value, dict) and value:
        tag_key = rng.choice(list(value))
        value[tag_key] = _random_value(rng, tree, tags)
    elif op == 8 and isinstance(value, list):
        value.append(copy.deepcopy(rng.choice(value)) if value else _random_value(rng, tree, tags))
    else:
        container[key] = _random_value(rng, tree, tags)
    return tree


# ------------------------------------------------------------------------------- mutations
def mutate(data: bytes, kind: str, rng: random.Random) -> tuple[str, bytes]:
    """(what was done, the mutated bytes) of the valid file ``data``."""
    try:
        return _mutate(data, kind, rng)
    except RecursionError:  # a tree too deep for this module's own walking: damage bytes
        return _byte_mutation(data, 8 + int.from_bytes(data[:8], "little"), rng)


def _mutate(data: bytes, kind: str, rng: random.Random) -> tuple[str, bytes]:
    if kind == "torch":
        return _mutate_torch(data, rng)
    parts = split(data)
    header_end = 8 + int.from_bytes(data[:8], "little")
    family = rng.random()
    if family < 0.4 or parts is None:
        return _byte_mutation(data, header_end, rng)
    header, body = parts
    refresh = rng.random() < 0.5
    metadata = header.get("__metadata__", {})
    if family < 0.55:  # the tensor entries of the header
        header = mutate_tree(header, rng, ["dtype", "shape", "data_offsets", "__metadata__"])
        return f"header entries{' crafted' if refresh else ''}", join(header, body, refresh)
    key = "graph" if kind == "graph" else "structure"
    if rng.random() < 0.1:
        key = rng.choice(list(metadata) or [key])
    text = metadata.get(key)
    tags = GRAPH_TAGS if kind == "graph" else CHECKPOINT_TAGS
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        try:
            text = json.dumps(mutate_tree(json.loads(text), rng, tags))
        except (TypeError, ValueError):
            return _byte_mutation(data, header_end, rng)
    if rng.random() < 0.03:  # nested deeper than JSON's own encoder goes
        depth = rng.choice([1000, 5000, 50000])
        text = "[" * depth + text + "]" * depth
    metadata = dict(metadata)
    metadata[key] = text
    header = {**header, "__metadata__": metadata}
    return f"metadata {key!r}{' crafted' if refresh else ''}", join(header, body, refresh)


# PyTorch checkpoints: globals a crafted pickle may name instead of the ones torch writes
HOSTILE_GLOBALS = [
    b"posix\nsystem",
    b"os\nsystem",
    b"__builtin__\neval",
    b"builtins\nexec",
    b"subprocess\ncall",
    b"__builtin__\ngetattr",
    b"torch._utils\n_rebuild_device_tensor_from_numpy",
    b"torch.serialization\n_get_layout",
    b"collections\nOrderedDict",
    b"torch\nFloatStorage",
    b"torch\nComplexFloatStorage",
    b"torch._utils\n_rebuild_tensor_v3",
    b"torch._tensor\n_rebuild_from_type_v2",
    b"__builtin__\nbytearray",
    b"_codecs\nencode",
]
# whole pickles that would create the file M if anything ran them
HOSTILE_PICKLES = [
    b"\x80\x02cposix\nsystem\nX\x07\x00\x00\x00touch M\x85R.",
    b"\x80\x02c__builtin__\neval\nX\x0f\x00\x00\x00open('M', 'w')\x85R.",
    b"\x80\x02csubprocess\ncall\n]X\x05\x00\x00\x00touchaX\x01\x00\x00\x00Ma\x85R.",
    b"\x80\x02ccollections\nOrderedDict\n)R}X\x01\x00\x00\x00xcposix\nsystem\nsb.",
]


def _zip_records(data: bytes):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(info.filename, z.read(info.filename)) for info in z.infolist()]


def _write_zip(records) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as z:
        for name, blob in records:
            z.writestr(name, blob)
    return buffer.getvalue()


def _mutate_torch(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """A damaged or crafted PyTorch checkpoint: raw bytes (stale CRCs), or the archive rewritten
    with fresh CRCs around a damaged pickle, a renamed global, a payload or a changed record."""
    if rng.random() < 0.3:
        return _byte_mutation(data, len(data), rng)
    records = _zip_records(data)
    pkl = next(i for i, (name, _) in enumerate(records) if name.endswith("/data.pkl"))
    name, pickled = records[pkl]
    family = rng.random()
    if family < 0.4:
        what, pickled = _byte_mutation(pickled, len(pickled), rng)
        what = f"pickle {what}"
    elif family < 0.55:  # a small int (a size, stride, offset or numel) changed
        spots = [i for i in range(len(pickled) - 1) if pickled[i : i + 1] == b"K"]
        out = bytearray(pickled)
        if spots:
            out[rng.choice(spots) + 1] = rng.choice([0, 1, 2, 9, 200, 255, rng.randrange(256)])
        what, pickled = "pickle int", bytes(out)
    elif family < 0.75:  # a global renamed
        spots = [i for i in range(len(pickled)) if pickled[i : i + 1] == b"c"]
        spots = [i for i in spots if pickled.find(b"\n", i) > 0]
        if spots:
            at = rng.choice(spots)
            end = pickled.find(b"\n", pickled.find(b"\n", at + 1) + 1)
            if end > 0:
                pickled = pickled[: at + 1] + rng.choice(HOSTILE_GLOBALS) + pickled[end:]
        what = "pickle global"
    elif family < 0.85:
        what, pickled = "pickle payload", rng.choice(HOSTILE_PICKLES)
    else:  # a storage record dropped, cut short or grown
        stores = [i for i, (n, _) in enumerate(records) if "/data/" in n]
        i = rng.choice(stores)
        n, blob = records[i]
        change = rng.randrange(3)
        if change == 0:
            del records[i]
            if i < pkl:
                pkl -= 1
        else:
            records[i] = (n, blob[: rng.randrange(len(blob) + 1)] if change == 1 else blob + b"\0")
        return "storage record", _write_zip(records)
    records[pkl] = (name, pickled)
    return what, _write_zip(records)


def _byte_mutation(data: bytes, header_end: int, rng: random.Random) -> tuple[str, bytes]:
    out = bytearray(data)
    op = rng.randrange(6)
    region = min(header_end, len(out)) if rng.random() < 0.7 else len(out)
    region = max(region, 1)
    if op == 0:
        for _ in range(rng.choice([1, 1, 2, 4])):
            out[rng.randrange(region)] ^= 1 << rng.randrange(8)
        return "bit flips", bytes(out)
    if op == 1:
        return "truncated", bytes(out[: rng.randrange(len(out))])
    if op == 2:
        at = rng.randrange(region)
        return "inserted", bytes(out[:at] + bytes(rng.randrange(256) for _ in range(4)) + out[at:])
    if op == 3:
        at = rng.randrange(region)
        return "deleted", bytes(out[:at] + out[at + rng.randrange(1, 8) :])
    if op == 4:
        at = rng.randrange(region)
        out[at] = rng.choice(b'{}[]",:0\\ \x00\xff')
        return "overwritten", bytes(out)
    length = rng.choice([0, 1, 7, header_end - 9, header_end, len(data), 2**63, 2**64 - 1])
    out[:8] = (length % 2**64).to_bytes(8, "little")
    return "header length", bytes(out)


# ------------------------------------------------------------------------------- checking
def check_file(path: str, kind: str) -> str | None:
    """Read ``path`` as ember's tools do; the description of an exception that is not an
    `EmberError` (None: read, or refused by ember)."""
    if kind in ("checkpoint", "torch"):
        return _check_checkpoint(path)
    try:
        if kind == "train":
            _resume(path)
            return None
        graph = ember.load_graph(path)
    except EmberError:
        return None
    except BaseException as exc:  # noqa: BLE001 - what the fuzzer is looking for
        if isinstance(exc, KeyboardInterrupt):
            raise
        return f"load: {type(exc).__name__}: {str(exc)[:200]}\n{traceback.format_exc()[-1500:]}"
    return _check_tools(graph, path)


def _check_checkpoint(path: str) -> str | None:
    """``ember.load`` of the path and of the same bytes in an ``io.BytesIO`` (the file-object
    reader): neither may raise anything but an `EmberError`, and both must agree (read, or
    refused with the same error type; the messages differ in the file's name and the OS's
    words)."""
    outcomes = []
    with open(path, "rb") as f:
        data = f.read()
    for source, name in ((path, path), (io.BytesIO(data), "<BytesIO>")):
        try:
            ember.load(source)
            outcomes.append(None)
        except EmberError as exc:
            outcomes.append(type(exc).__name__)
        except BaseException as exc:  # noqa: BLE001 - what the fuzzer is looking for
            if isinstance(exc, KeyboardInterrupt):
                raise
            trace = traceback.format_exc()[-1500:]
            return f"load {name}: {type(exc).__name__}: {str(exc)[:200]}\n{trace}"
    if outcomes[0] != outcomes[1]:
        return f"a path and a BytesIO of the same bytes differ: {outcomes[0]!r} / {outcomes[1]!r}"
    return None


def _resume(path: str) -> None:
    """What ``ember train --resume`` does with a checkpoint before it trains: read and check
    it, and load its state into a fresh model, optimizer and scheduler."""
    from ember import models, optim
    from ember.train import TrainConfig, _read_checkpoint, _restore

    cfg = TrainConfig(resume=path, **TRAIN_SETTINGS).resolved()
    model = models.build(cfg.model, (1, 8, 8), num_classes=10)
    optimizer = optim.SGD(
        model.parameters(),
        lr=cfg.lr,
        momentum=cfg.momentum,
        weight_decay=cfg.weight_decay,
        nesterov=True,
    )
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=cfg.epochs)
    state = _read_checkpoint(path, cfg, scheduler)
    for name, target in (("model", model), ("optimizer", optimizer), ("scheduler", scheduler)):
        _restore(path, name, target, state[name])
    ember.Generator().set_state(state["shuffle_rng"])
    ember.Generator().set_state(state["default_rng"])


def _check_tools(graph, path: str) -> str | None:
    """What the tools do with a graph that loaded: print, DOT, the viewer's table, generated
    Python (which must compile: a name that broke it could have been code), ``ember inspect``'s
    page (FLOPs, memory plans, the passes run on a copy)."""
    from ember.graph.dot import to_dot
    from ember.runtime.codegen import _Writer
    from ember.tools.inspect import inspect_graph_file
    from ember.tools.viz import node_table

    steps = [
        ("print", lambda: str(graph)),
        ("dot", lambda: to_dot(graph)),
        ("viewer table", lambda: node_table(graph)),
        ("codegen", lambda: compile(_Writer(graph, {}, {}, {}, False).source(), "<f>", "exec")),
        ("inspect", lambda: inspect_graph_file(path)),
    ]
    for name, step in steps:
        try:
            step()
        except EmberError:
            continue
        except BaseException as exc:  # noqa: BLE001
            if isinstance(exc, KeyboardInterrupt):
                raise
            text = traceback.format_exc()[-1500:]
            return f"{name}: {type(exc).__name__}: {str(exc)[:200]}\n{text}"
    return None


@dataclass
class Tally:
    mutations: int = 0
    loaded: int = 0
    refused: int = 0
    failures: list = field(default_factory=list)  # (seed, what, problem, file bytes)
    by_kind: dict = field(default_factory=dict)

    def __str__(self) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.by_kind.items()))
        return (
            f"{self.mutations} mutations ({kinds}): {self.loaded} still read, {self.refused} "
            f"refused with an EmberError, {len(self.failures)} other exceptions"
        )


def fuzz(
    seeds: dict,
    directory,
    seed: int = 0,
    count: int | None = None,
    seconds: float | None = None,
) -> Tally:
    """Mutate the ``seeds`` (`seed_files`) at random (seeded) until ``count`` mutations or
    ``seconds`` have passed; each mutated file is written to ``directory`` and checked."""
    rng = random.Random(seed)
    tally = Tally()
    names = sorted(seeds)
    deadline = math.inf if seconds is None else time.monotonic() + seconds
    path = os.path.join(str(directory), "mutated")
    cwd = os.getcwd()
    os.chdir(str(directory))  # a name that became code would leave its file here
    try:
        while (count is None or tally.mutations < count) and time.monotonic() < deadline:
            name = names[tally.mutations % len(names)]
            kind, data = seeds[name]
            what, mutated = mutate(data, kind, rng)
            with open(path, "wb") as f:
                f.write(mutated)
            tally.mutations += 1
            tally.by_kind[kind] = tally.by_kind.get(kind, 0) + 1
            problem = check_file(path, kind)
            if problem is None:
                try:
                    tally.loaded += mutated == data or _reads(path, kind)
                except EmberError:
                    pass
                tally.refused = tally.mutations - tally.loaded - len(tally.failures)
            else:
                tally.failures.append((name, what, problem, mutated))
                tally.refused = tally.mutations - tally.loaded - len(tally.failures)
        if os.path.exists("M"):
            tally.failures.append(("?", "?", "a file named M appeared: code ran", b""))
    finally:
        os.chdir(cwd)
    return tally


def _reads(path: str, kind: str) -> bool:
    try:
        readers = {"checkpoint": ember.load, "torch": ember.load, "train": _resume}
        readers.get(kind, ember.load_graph)(path)
    except EmberError:
        return False
    return True
