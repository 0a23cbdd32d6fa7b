"""The direction of imports (ARCHITECTURE.md): arrows point down, and no module
of the project imports, at module or function level, a module that imports it
back, directly or through others (issue 20). A circle hides what depends on
what: committing an answer that reopens a settlement, a search that calls its
own workers."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PROJECT = ("review", "labels", "codebook", "store", "pages", "cli.py", "app.py")
BELOW_THE_PAGES = ("review", "labels", "codebook", "store")


def modules() -> dict[str, Path]:
    """{dotted name: file} of every module of the project (packages by their name)."""
    found = {}
    for root in PROJECT:
        path = ROOT / root
        for f in [path] if path.is_file() else sorted(path.rglob("*.py")):
            name = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = f
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports, anywhere in it (function level too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    wanted: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            wanted.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            wanted.add(base)
            wanted.update(f"{base}.{a.name}" for a in node.names)
    out = set()
    for target in wanted:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            out.add(target)
    return out


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def test_no_module_imports_one_that_imports_it_back():
    assert circles(graph()) == []


def test_the_checker_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_arrows_point_down_from_the_pages():
    """Nothing below the pages imports a page, the app, the command line or Streamlit."""
    up = ("pages", "app", "cli")
    wrong = [(name, target) for name, targets in graph().items()
             if name.startswith(BELOW_THE_PAGES) for target in targets
             if target.split(".")[0] in up]
    assert wrong == []
    for name, path in modules().items():
        if name.startswith(BELOW_THE_PAGES):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
            assert not any(m == "streamlit" or m.startswith("streamlit.") for m in names), name
