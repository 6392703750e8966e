"""The architecture holds (docs/ARCHITECTURE.md): layers import only layers below them, modules
and packages form no import cycle, and no module outside ops/ decides by an op's name.

The source is read statically: every import counts, those inside functions included, except
the ones under ``if TYPE_CHECKING:`` (they never run). A module missing from `LAYERS` fails the
test, so a new package has to be placed in the order before it can land.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# lowest first; a module may import its own layer and those before it (and, within a layer,
# nothing that forms a cycle)
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "core",
        (
            "ember.errors",
            "ember.dtypes",
            "ember.types",
            "ember.symbolic",
            "ember.symbolic_assumptions",
            "ember.random",
            "ember.random_streams",
            "ember.random_box_muller",
            "ember._files",
            "ember._file_limits",
            "ember._env",
            "ember._allocator",
            "ember.devices",
            "ember._meta",
            "ember.size",
            "ember.return_types",
            "ember.flags",
            "ember.cuda",
            "ember.accelerator",
            "ember.cpu",
            "ember.backends",
            "ember._missing",
            "ember.typeinfo",
            "ember.version",
            "ember._inductor",
        ),
    ),
    ("kernels", ("ember.kernels",)),
    ("ops", ("ember.ops",)),
    (
        "eager",
        (
            "ember.grad_mode",
            "ember.tensor",
            "ember.autograd",
            "ember.saved_hooks",
            "ember.autograd_graph",
            "ember.autograd_accumulate",
            "ember.autograd_node",
            "ember.autograd_node_hooks",
            "ember.autograd_function",
            "ember.autograd_functional",
            "ember.autograd_grad",
            "ember.autograd_forward_ad",
            "ember.eager",
            "ember._methods",
            "ember.io",
            "ember.printing",
            "ember.tensor_api",
            "ember.amp",
            "ember._tensor_extras",
            "ember._tensor_inplace",
            "ember._tensor_values",
            "ember._torch_function",
            "ember._storage",
            "ember._unsafe_split",
            "ember._views",
        ),
    ),
    ("graph", ("ember.graph",)),
    ("plan", ("ember.plan",)),
    ("transforms", ("ember.transforms",)),
    ("control", ("ember.control",)),
    ("runtime", ("ember.runtime",)),
    (
        "library",
        (
            "ember.nn",
            "ember.functional",
            "ember.optim",
            "ember.data",
            "ember.models",
            "ember.text",
            "ember.zoo",
            "ember.distributions",
            "ember.utils",
            "ember.special",
            "ember.signal",
            "ember.quantization",
            "ember.ragged",
            "ember.distributed",
        ),
    ),
    ("capture", ("ember.capture",)),
    ("tools", ("ember.profiler", "ember.tools")),
    ("interchange", ("ember.onnx",)),
    ("api", ("ember.train", "ember.cli", "ember")),
]

# module cycles allowed, each with its reason
ALLOWED_CYCLES = {
    frozenset(
        {"ember.tensor", "ember.autograd", "ember.autograd_node", "ember.autograd_accumulate"}
    ): (
        "a Tensor holds its grad_fn and backward() runs the engine; the engine, its nodes "
        "(autograd_node) and its leaves' sink (autograd_accumulate) make Tensors"
    ),
    # packages only (no module cycle): PyTorch's layout has the same three edges
    frozenset({"ember.distributed", "ember.nn", "ember.optim"}): (
        "PyTorch's names: distributed.optim's ZeroRedundancyOptimizer is an optim.Optimizer, "
        "optim.swa_utils averages nn Modules, nn.parallel's DDP and nn's SyncBatchNorm call "
        "distributed's collectives"
    ),
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((SRC / "ember").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool):
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.found: list[tuple[str, int]] = []

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _add(self, target: str, line: int) -> None:
        while target and target not in MODULES:  # an attribute of a module: the module
            target = target.rpartition(".")[0]
        if target and target != self.module:
            self.found.append((target, line))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] == "ember":
                self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            parts = self.package.split(".")
            base_parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join(base_parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        if base.split(".")[0] != "ember":
            return
        for alias in node.names:
            full = f"{base}.{alias.name}"
            self._add(full if full in MODULES else base, node.lineno)


@functools.cache
def _imports() -> dict[str, list[tuple[str, int]]]:
    """Each module's imports of ember modules, with their lines: parsed once, by the first
    test that asks (not at import, where every pytest-xdist worker would parse every module
    to collect this file's names)."""
    graph = {}
    for module, path in MODULES.items():
        visitor = _Imports(module, path.name == "__init__.py")
        visitor.visit(ast.parse(path.read_text(), str(path)))
        graph[module] = visitor.found
    return graph


def _layer(module: str) -> int | None:
    best = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    return None if best is None else best[0]


def _cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_every_module_has_a_layer():
    unplaced = [m for m in MODULES if _layer(m) is None]
    assert not unplaced, f"modules in no layer of LAYERS (place them): {unplaced}"


def test_no_import_points_up_the_layers():
    upward = []
    for module, targets in _imports().items():
        for target, line in targets:
            if _layer(target) > _layer(module):
                upward.append(
                    f"{module}:{line} ({LAYERS[_layer(module)][0]}) imports {target} "
                    f"({LAYERS[_layer(target)][0]})"
                )
    assert not upward, "imports pointing up the layer order:\n" + "\n".join(upward)


def test_no_module_cycles():
    edges = {m: {t for t, _ in targets} for m, targets in _imports().items()}
    cycles = [c for c in _cycles(edges) if frozenset(c) not in ALLOWED_CYCLES]
    assert not cycles, "module import cycles:\n" + "\n".join(str(sorted(c)) for c in cycles)


def _package(module: str) -> str:
    parts = module.split(".")
    return module if len(parts) == 1 else ".".join(parts[:2])


def test_no_package_cycles():
    edges: dict[str, set[str]] = defaultdict(set)
    for module, targets in _imports().items():
        for target, _ in targets:
            source, dest = _package(module), _package(target)
            if source != dest and "ember" not in (source, dest):
                edges[source].add(dest)
    cycles = [c for c in _cycles(edges) if frozenset(c) not in ALLOWED_CYCLES]
    assert not cycles, "package import cycles:\n" + "\n".join(str(sorted(c)) for c in cycles)


def _mentions_op_name(node: ast.expr) -> bool:
    """``op.name``, ``<anything>.op.name``, ``op_name``-like names, ``REGISTRY[...]``."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr == "name":
            owner = sub.value
            if isinstance(owner, ast.Name) and owner.id in ("op", "opdef", "producer"):
                return True
            if isinstance(owner, ast.Attribute) and owner.attr == "op":
                return True
        if isinstance(sub, ast.Name) and sub.id in ("op_name", "opname"):
            return True
    return False


def _is_literal(node: ast.expr, tables: set[str] = frozenset()) -> bool:
    """A string, a collection of strings, or a name bound to one (a table of op names)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(_is_literal(e) for e in node.elts)
    return isinstance(node, ast.Name) and (node.id in tables or node.id.isupper())


def _literal_tables(tree: ast.AST) -> set[str]:
    """Names assigned a string or a collection of strings anywhere in the module."""
    return {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _is_literal(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def _name_switches(path: Path) -> list[int]:
    lines = []
    tree = ast.parse(path.read_text(), str(path))
    tables = _literal_tables(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_mentions_op_name(s) for s in sides) and any(
                _is_literal(s, tables) for s in sides
            ):
                lines.append(node.lineno)
        elif isinstance(node, ast.Subscript):  # REGISTRY["add"] outside ops/
            if isinstance(node.value, ast.Name) and node.value.id == "REGISTRY":
                if _is_literal(node.slice):
                    lines.append(node.lineno)
    return lines


def test_no_decision_by_op_name_outside_ops():
    found = []
    for module, path in MODULES.items():
        if module == "ember.ops" or module.startswith("ember.ops."):
            continue
        found += [f"{path.relative_to(SRC)}:{line}" for line in _name_switches(path)]
    assert not found, (
        "op names compared with literals outside ops/ (declare a typed rule on the OpDef):\n"
        + "\n".join(found)
    )


@pytest.mark.parametrize(
    "source, expected",
    [
        ("if node.op.name == 'matmul': pass", True),
        ("x = op.name in ('sum', 'max')", True),
        ("y = REGISTRY['add']", True),
        ("LOOPS = ('scan',)\nok = node.op.name in LOOPS", True),
        ("names = ('a', 'b')\nok = node.op.name not in names", True),
        ("if node.kind == 'call': pass", False),
        ("if graph.name == 'g': pass", False),
    ],
)
def test_the_name_switch_detector_finds_what_it_should(tmp_path, source, expected):
    path = tmp_path / "m.py"
    path.write_text(source + "\n")
    assert bool(_name_switches(path)) is expected


def test_the_layer_check_sees_function_local_imports(tmp_path):
    tree = ast.parse("def f():\n    from ..capture import trace\n")
    visitor = _Imports("ember.ops.elementwise", False)
    visitor.visit(tree)
    assert visitor.found == [("ember.capture.trace", 2)]
