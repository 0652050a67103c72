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
