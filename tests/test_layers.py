"""The house's layers (docs/architecture.md): no package imports one above it, and no import cycles.

Every import counts -- at module level, inside functions and under ``TYPE_CHECKING`` -- because a
lazy import is still a dependency. Read statically, so nothing of the package is run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "pytest_elr"

#: bottom to top; a package may import its own layer and the layers below
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("actions", "model"),
    ("sut", "workload", "lazyfs"),
    ("faults", "checker"),
    ("backends",),
    ("report", "scenario"),
    ("schedule",),
    ("plugin", "parallel", "settings", "api", "cli", "__main__", "__init__"),
)
LAYER_OF = {pkg: i for i, names in enumerate(LAYERS) for pkg in names}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every ``pytest_elr`` module ``path`` imports, as absolute dotted names."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    own = module_name(path).split(".")
    package = own if path.name == "__init__.py" else own[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("pytest_elr")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            if base.startswith("pytest_elr"):
                # `from pytest_elr.x import y` may name a submodule y: count it when it is one.
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    found.add(sub if _exists(sub) else base)
    return found


def _exists(module: str) -> bool:
    rel = Path(*module.split(".")[1:])
    return (ROOT / rel).with_suffix(".py").is_file() or (ROOT / rel / "__init__.py").is_file()


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in sorted(ROOT.rglob("*.py"))}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_every_package_has_a_layer() -> None:
    packages = {package_of(m) for m in graph()}
    assert packages - set(LAYER_OF) == set(), "add the new package to LAYERS and docs/architecture.md"


def test_no_package_imports_a_layer_above_it() -> None:
    upward = sorted(
        f"{src} -> {dst}"
        for src, targets in graph().items()
        for dst in targets
        if LAYER_OF.get(package_of(dst), 0) > LAYER_OF.get(package_of(src), 0)
    )
    assert upward == []


def _collapse(edges: dict[str, set[str]], key: object) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for src, targets in edges.items():
        a = key(src)  # type: ignore[operator]
        out.setdefault(a, set())
        out[a] |= {key(t) for t in targets if key(t) != a}  # type: ignore[operator]
    return out


@pytest.mark.parametrize("level", ["package", "module"])
def test_no_import_cycles(level: str) -> None:
    edges = graph()
    if level == "package":
        edges = _collapse(edges, package_of)
    else:
        # A package's __init__ importing its own modules is how a package exports names, not a
        # cycle of behaviour: leave out edges from a package to its own submodules.
        edges = {src: {t for t in targets if not t.startswith(src + ".")} for src, targets in edges.items()}
    assert cycles(edges) == []


def test_the_checks_see_a_cycle_and_an_upward_import() -> None:
    """The checks above can fail: a planted cycle and a planted upward edge are found."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert LAYER_OF["plugin"] > LAYER_OF["core"]
