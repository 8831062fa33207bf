"""The tree shows the stages: no module imports a later stage, retrieval, grounding and writing do not import each
other, the import graph has no circle, and every module fits on a screen or two (400 lines). Imports inside
functions count: a lazy import is still a dependency. What crosses a module is public (no module imports another's
`_name`) and typed (`Any` only where the type is a third party's: at most MAX_ANY uses). The tests mirror the tree: a
folder per stage, a module's tests named after it."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "rag_bot"
TESTS = ROOT / "tests"
SHARED = {"types", "nodes", "settings", "prompts", "answer_words", "text", "topics", "sanitize", "errors", "logs", "question", "fitted", "interfaces"}
STAGES = ["reading", "store", "retrieval", "grounding", "writing", "engine", "evaluation", "surfaces"]
# Stages the engine alone puts in order: none of them imports another (what one hands the next travels through the
# engine's query engine, in the shared types and node metadata).
SIBLINGS = {"retrieval", "grounding", "writing"}
MAX_LINES = 400
# tests/engine/ holds the tests of rag_bot's top-level modules (engine.py and the shared ones); tests/project/ those
# of the whole project (layout, docs, install, shared data, third-party clients, bench), which mirror no package.
TOP_LEVEL = "engine"
WHOLE_PROJECT = "project"

# Uses of `typing.Any` in rag_bot at most (issue 38: 272 before the types were written; what stays is third-party
# signatures: llama-index overrides, gradio callbacks, Chroma metadata, untyped libraries' objects).
MAX_ANY = 100


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The rag_bot modules `path` imports (a `from pkg import mod` names the module `pkg.mod`)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                out.add(target if target in known else base)
    return {m for m in out if m in known and m != name}


def _stage(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return -1  # the package's docstring
    if parts[1] in SHARED:
        return 0
    return STAGES.index(parts[1]) + 1


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, name, set(modules)) for name, path in modules.items()}


def test_no_module_imports_a_later_stage():
    later = [(m, d) for m, deps in _graph().items() for d in deps if _stage(d) > _stage(m) and _stage(m) >= 0]
    assert not later, later


def test_retrieval_grounding_and_writing_do_not_import_each_other():
    def sibling(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[1] in SIBLINGS else None

    crossing = [(m, d) for m, deps in _graph().items() for d in deps
                if sibling(m) and sibling(d) and sibling(m) != sibling(d)]
    assert not crossing, crossing


def test_the_import_graph_has_no_circle():
    graph = _graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append(trail[trail.index(dep):] + [dep] if dep in trail else [node, dep])
            elif dep not in state:
                visit(dep, trail + [dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, cycles


def test_every_module_fits_on_a_screen_or_two():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


def test_every_stage_package_says_what_it_takes_and_returns():
    for stage in ("reading", "store", "retrieval", "grounding", "writing", "evaluation", "surfaces"):
        doc = ast.get_docstring(ast.parse((PACKAGE / stage / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc.split()) >= 25, stage


def test_every_package_ships_in_the_wheel():
    import tomllib

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(PACKAGE.parent).parts) for p in PACKAGE.rglob("__init__.py")}
    assert found <= listed, found - listed


def _mirrored(folder: Path) -> Path:
    """The package folder a test folder mirrors (tests/engine/ mirrors rag_bot/'s top-level modules)."""
    parts = folder.relative_to(TESTS).parts
    return PACKAGE if parts == (TOP_LEVEL,) else PACKAGE.joinpath(*parts)


def _test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def test_no_test_file_is_left_directly_in_tests():
    loose = [p.name for p in _test_files() if p.parent == TESTS]
    assert not loose, loose


def test_every_test_folder_mirrors_a_stage_package():
    folders = {p.parent for p in _test_files() if p.parent != TESTS}
    stray = [str(f.relative_to(TESTS)) for f in folders
             if f.relative_to(TESTS).parts != (WHOLE_PROJECT,) and not (_mirrored(f) / "__init__.py").is_file()]
    assert not stray, f"test folders with no package of that name under rag_bot/: {stray}"
    unimportable = [str(f.relative_to(TESTS)) for f in folders if not (f / "__init__.py").is_file()]
    assert not unimportable, f"test folders without __init__.py: {unimportable}"


def test_a_test_file_named_after_a_module_sits_in_that_modules_stage():
    homes: dict[str, set[Path]] = {}
    for module in PACKAGE.rglob("*.py"):
        if module.name != "__init__.py":
            folder = TESTS / TOP_LEVEL if module.parent == PACKAGE else TESTS / module.parent.relative_to(PACKAGE)
            homes.setdefault(module.stem, set()).add(folder)
    misplaced = {str(p.relative_to(TESTS)): sorted(str(h.relative_to(TESTS)) for h in homes[name])
                 for p in _test_files()
                 if (name := p.stem.removeprefix("test_")) in homes and p.parent not in homes[name]}
    assert not misplaced, f"test file -> the folder(s) of the module it is named after: {misplaced}"


def test_no_module_imports_a_private_name_of_another():
    """A name with a leading underscore stays in its module: what crosses a module is public (`from rag_bot.x import
    _y` is refused; `__future__`-style dunders are not private)."""
    crossing = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("rag_bot")):
                crossing += [f"{name}: {node.module}.{a.name}" for a in node.names
                             if a.name.startswith("_") and not a.name.startswith("__")]
    assert not crossing, crossing


def test_any_is_used_at_most_max_any_times():
    """`Any` only where the type is not ours to know: counted as every `Any` name or `typing.Any` attribute in the
    code of rag_bot (annotations, aliases, casts; not comments, strings or the `from typing import Any` line)."""
    uses = {}
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        n = sum(1 for node in ast.walk(tree) if (isinstance(node, ast.Name) and node.id == "Any")
                or (isinstance(node, ast.Attribute) and node.attr == "Any"))
        if n:
            uses[str(path.relative_to(PACKAGE))] = n
    assert sum(uses.values()) <= MAX_ANY, sorted(uses.items(), key=lambda item: -item[1])
