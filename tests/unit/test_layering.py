"""The layers of sparkcdc import only downward, and the import graph has no cycle.

model/errors → config → capture/codec/dispatch → sink → pipeline → server/cli.
Every module under ``src/sparkcdc`` is parsed with ``ast`` (nothing is
imported); an import counts wherever it is written: at module level, inside a
function or class, in ``try``/``except ImportError``, under ``if TYPE_CHECKING:``.

Rules:

(a) ``sparkcdc.capture`` and ``sparkcdc.codec`` import nothing from
    ``sparkcdc.pipeline``, ``sparkcdc.server`` or ``sparkcdc.cli``.
(b) ``sparkcdc.config`` imports nothing from ``sparkcdc.dispatch``,
    ``sparkcdc.capture``, ``sparkcdc.codec``, ``sparkcdc.sink``,
    ``sparkcdc.pipeline``, ``sparkcdc.server`` or ``sparkcdc.cli``.
(c) A sink package is a directory ``sparkcdc/sink/<a>/``. A module of sink
    package ``<a>`` imports nothing from another sink package ``<b>``; it may
    import the shared sink modules, which are the files directly under
    ``sparkcdc/sink/`` (the registry in ``__init__.py``, ``base.py``). The
    shared modules import no sink package (the registry names them as strings
    and loads them with importlib).
(d) The graph of the imports Python executes when a module is imported (module
    level, class bodies included; not inside functions, not under
    ``TYPE_CHECKING``) has no cycle. Importing ``a.b.c`` also runs the
    ``__init__`` of ``a`` and ``a.b``, so those count as edges too, except a
    module's own enclosing packages (they are already being imported).
(e) Adding the imports inside functions (again not ``TYPE_CHECKING``) makes
    no cycle either: a lazy import that closes a loop is a layering mistake
    that only hides until someone moves the import up.
(f) No module runs generated source: no call of the builtins ``exec``, ``eval`` or
    ``compile`` (one readable implementation per hot path; ``re.compile`` is a method).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT = "sparkcdc"

KNOWN_SINK_CROSS_IMPORTS: frozenset[tuple[str, str]] = frozenset()
"""Rule (c) violations that exist (none): an entry is an (importer, imported) module pair."""


@dataclass(frozen=True)
class Import:
    """One import statement's target module, and how it runs."""

    importer: str
    target: str
    line: int
    in_function: bool
    type_checking: bool


def _module_names() -> dict[str, tuple[Path, bool]]:
    """Module name → (file, is a package ``__init__``)."""
    out: dict[str, tuple[Path, bool]] = {}
    for path in sorted((SRC / ROOT).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_package)
    return out


MODULES = _module_names()


def _existing(name: str) -> str:
    """The deepest module of ``name`` that exists (``pkg.mod.Class`` → ``pkg.mod``)."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        # ``from pkg import mod`` imports the submodule; ``from mod import name`` the module
        names = [
            f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in MODULES else prefix
            for alias in node.names
        ]
    return sorted({_existing(n) for n in names if n == ROOT or n.startswith(ROOT + ".")})


def _imports_of(module: str) -> Iterator[Import]:
    path, is_package = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from visit_stmt(stmt, in_function, True)
                for stmt in child.orelse:
                    yield from visit_stmt(stmt, in_function, type_checking)
                continue
            yield from visit_stmt(child, in_function, type_checking)

    def visit_stmt(node: ast.AST, in_function: bool, type_checking: bool) -> Iterator[Import]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in _targets(module, is_package, node):
                yield Import(module, target, node.lineno, in_function, type_checking)
            return
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from visit(node, inner, type_checking)

    yield from visit(tree, False, False)


IMPORTS: list[Import] = [imp for module in MODULES for imp in _imports_of(module) if imp.target != module]


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _violations(importers: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{imp.importer} (line {imp.line}) imports {imp.target}"
        for imp in IMPORTS
        if any(_in(imp.importer, p) for p in importers) and any(_in(imp.target, p) for p in forbidden)
    )


def test_the_parse_sees_the_package() -> None:
    """Guard against a vacuous pass: the walk finds the modules and their imports, lazy ones included."""
    assert len(MODULES) > 50
    found = {(i.importer, i.target, i.in_function) for i in IMPORTS}
    assert ("sparkcdc.capture.catalog", "sparkcdc.capture.ddl", False) in found
    assert ("sparkcdc.sink.kafka.large_message", "sparkcdc.sink.objectstore", False) in found
    assert any(i.type_checking for i in IMPORTS)


def test_capture_and_codec_do_not_import_pipeline_server_or_cli() -> None:
    """Rule (a)."""
    layers = ("sparkcdc.pipeline", "sparkcdc.server", "sparkcdc.cli")
    assert _violations(("sparkcdc.capture", "sparkcdc.codec"), layers) == []


def test_config_imports_no_higher_layer() -> None:
    """Rule (b)."""
    higher = (
        "sparkcdc.dispatch",
        "sparkcdc.capture",
        "sparkcdc.codec",
        "sparkcdc.sink",
        "sparkcdc.pipeline",
        "sparkcdc.server",
        "sparkcdc.cli",
    )
    assert _violations(("sparkcdc.config",), higher) == []


def _sink_package(module: str) -> str | None:
    """``sparkcdc.sink.<a>`` for a module of sink package ``<a>``; None for the shared modules."""
    parts = module.split(".")
    if len(parts) < 3 or parts[:2] != [ROOT, "sink"]:
        return None
    package = ".".join(parts[:3])
    return package if MODULES.get(package, (None, False))[1] else None


def test_sink_packages_do_not_import_each_other() -> None:
    """Rule (c); today's exceptions are listed in KNOWN_SINK_CROSS_IMPORTS."""
    found: set[tuple[str, str]] = set()
    for imp in IMPORTS:
        if not (_in(imp.importer, "sparkcdc.sink") and _in(imp.target, "sparkcdc.sink")):
            continue
        mine, theirs = _sink_package(imp.importer), _sink_package(imp.target)
        if theirs is not None and mine != theirs:
            found.add((imp.importer, imp.target))
    new = sorted(found - KNOWN_SINK_CROSS_IMPORTS)
    assert new == [], f"sink packages import each other (move what both need to sparkcdc/sink/): {new}"
    gone = sorted(KNOWN_SINK_CROSS_IMPORTS - found)
    assert gone == [], f"fixed, so remove from KNOWN_SINK_CROSS_IMPORTS: {gone}"


def _edges(*, with_functions: bool) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in IMPORTS:
        if imp.type_checking or (imp.in_function and not with_functions):
            continue
        parts = imp.target.split(".")
        # the packages an import runs on the way, except the importer's own (already running)
        for k in range(2, len(parts) + 1):
            ran = ".".join(parts[:k])
            if ran != imp.importer and not _in(imp.importer, ran):
                edges[imp.importer].add(ran)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path) for every strongly connected group of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group: set[str] = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return [_path_through(sorted(g), g, edges) for g in groups]


def _path_through(members: list[str], group: set[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest cycle from the group's first member back to itself."""
    start = members[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for v in frontier:
            for w in sorted(edges[v] & group):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w not in previous:
                    previous[w] = v
                    following.append(w)
        frontier = following
    return members


def test_module_level_imports_have_no_cycle() -> None:
    """Rule (d)."""
    cycles = _cycles(_edges(with_functions=False))
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_function_level_imports_close_no_cycle() -> None:
    """Rule (e)."""
    cycles = _cycles(_edges(with_functions=True))
    assert cycles == [], "import cycles through function-level imports: " + "; ".join(
        " -> ".join(c) for c in cycles
    )


def test_no_source_is_generated_at_run_time() -> None:
    """Rule (f)."""
    found = []
    for name, (path, _) in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in ("exec", "eval", "compile"):
                    found.append(f"{name}:{node.lineno} {node.func.id}")
    assert found == []
