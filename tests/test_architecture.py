"""``docs/architecture.md`` stays true: every module is listed in its package's section, and no
package imports one the page's import rules do not allow (imports inside functions count too:
a lazy import is still a dependency)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import ROOT

DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
INSTR = ROOT / "instrumentation" / "tracelens_instrumentation"
PKG = ROOT / "tracelens"


def _modules() -> list[Path]:
    files = [*INSTR.glob("*.py"), *INSTR.glob("*.c"), *PKG.rglob("*.py"), *PKG.rglob("*.c")]
    return sorted(f for f in files if "__pycache__" not in f.parts)


def _package(path: Path) -> str:
    """The import-rule package of a module: ``tracelens_instrumentation``, or the first part
    under ``tracelens/`` (``analysis``, ``cli``, ... ; top-level modules by their own name)."""
    if INSTR in path.parents:
        return "tracelens_instrumentation"
    rel = path.relative_to(PKG).parts
    if len(rel) == 1:
        stem = path.stem
        return "tracelens" if stem in ("__init__", "__main__") else stem
    return rel[0]


def _section(path: Path) -> str:
    """The text of the page's section for the module's package."""
    if INSTR in path.parents:
        head = "### `instrumentation/tracelens_instrumentation/`"
    elif len(path.relative_to(PKG).parts) == 1:
        head = "### `tracelens/` (the analyzer)"
    else:
        head = f"### `tracelens/{path.relative_to(PKG).parts[0]}/`"
    start = DOC.index(head)
    end = DOC.find("\n### ", start + 1)
    return DOC[start : end if end >= 0 else len(DOC)]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_is_in_its_section(path: Path) -> None:
    """A module by its file name; a (sub)package's ``__init__.py`` by the package's folder
    (the section's heading names a top-level one)."""
    section = _section(path)
    name = f"{path.parent.name}/" if path.name == "__init__.py" else path.name
    assert f"{name}`" in section or f"`{name}" in section, (
        f"docs/architecture.md: {path.relative_to(ROOT)} is not listed"
    )


def _rules() -> dict[str, set[str]]:
    table = DOC.split("## Import rules", 1)[1].split("## Modules", 1)[0]
    rules: dict[str, set[str]] = {}
    every: set[str] = set()
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    above: list[str] = []
    for line in rows:
        who, may = (cell.strip() for cell in line.strip("|").split("|"))
        allowed = set(re.findall(r"`([a-z_]+)`", may))
        packages = re.findall(r"`([a-z_]+)`", who)
        if "everything above" in may:
            allowed = set(every)
            above.extend(packages)
        for package in packages:
            rules[package] = allowed
        every.update(packages)
    for package in above:  # the library layer: its members import each other
        rules[package] = rules[package] | set(above)
    return rules


def _imports(path: Path) -> set[str]:
    if path.suffix != ".py":
        return set()
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "tracelens":
            names = [f"tracelens.{a.name}" for a in node.names]  # from tracelens import api
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "tracelens_instrumentation":
                found.add("tracelens_instrumentation")
            elif parts[0] == "tracelens":
                found.add(parts[1] if len(parts) > 1 else "tracelens")
    return found


def test_the_rules_cover_every_package() -> None:
    assert {_package(p) for p in _modules()} <= set(_rules())


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_rules(path: Path) -> None:
    own = _package(path)
    allowed = _rules()[own] | {own}
    assert _imports(path) <= allowed, (
        f"{path.relative_to(ROOT)} ({own}) imports {sorted(_imports(path) - allowed)}; "
        "docs/architecture.md allows " + ", ".join(sorted(allowed))
    )


def _private_imports(path: Path) -> list[str]:
    """``tracelens.X.y._name`` for every private name (not a module) the file imports from a
    module of another package."""
    if path.suffix != ".py":
        return []
    own = _package(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
            continue
        parts = node.module.split(".")
        if parts[0] != "tracelens":
            continue
        home = PKG.joinpath(*parts[1:])
        theirs = _package(home / "__init__.py" if home.is_dir() else home.with_suffix(".py"))
        for alias in node.names:
            is_module = (home / f"{alias.name}.py").exists() or (home / alias.name).is_dir()
            if alias.name.startswith("_") and not is_module and theirs != own:
                found.append(f"{node.module}.{alias.name}")
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_name_crosses_a_package(path: Path) -> None:
    """A package's underscored names are its own: what another package needs is public."""
    assert _private_imports(path) == [], f"{path.relative_to(ROOT)} imports private names"


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports, read from the source with ``ast``: every
    ``import``/``from ... import`` anywhere in the file counts (module level, inside functions,
    under ``if TYPE_CHECKING``), as an import-graph reader sees it.  ``from pkg import name``
    is an edge to ``pkg.name`` when that is a module, else to ``pkg`` (its ``__init__``)."""
    files = sorted(f for f in root.rglob("*.py") if "__pycache__" not in f.parts)

    def module_of(path: Path) -> str:
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {module_of(f): f for f in files}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package ``level - 1`` up from here
                    up = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join([*up, *([base] if base else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]  # fmt: skip
            else:
                continue
            for target in targets:
                while target and target not in modules:  # import a.b.c: the module a.b.c
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: each strongly connected component of more than one module (Tarjan's
    algorithm, with an explicit stack: no recursion), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_no_import_cycle_in_tracelens() -> None:
    """No module of tracelens/ imports, directly or through others, a module that imports it:
    results hold data and the renderers read them, engines' base class lives apart from the
    engines, the library's report calls do not import the library back."""
    cycles = import_cycles(import_graph(PKG, "tracelens"))
    assert cycles == [], "import cycles in tracelens/:\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_the_cycle_check_finds_a_planted_cycle(tmp_path: Path) -> None:
    """The check above can fail: a three-module circle through a function-level import, a
    ``TYPE_CHECKING`` import and a relative one, next to an acyclic module, is found, exactly."""
    pkg = tmp_path / "planted"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from planted.sub import b\n")
    (pkg / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from planted import c\n"
    )
    (pkg / "c.py").write_text("from . import a\nimport json\n")
    (pkg / "d.py").write_text("import planted.a\n")
    graph = import_graph(pkg, "planted")
    assert graph["planted.d"] == {"planted.a"}
    assert import_cycles(graph) == [["planted.a", "planted.c", "planted.sub.b"]]
    (pkg / "c.py").write_text("import json\n")  # break it: no circle left
    assert import_cycles(import_graph(pkg, "planted")) == []
