"""The project's import graph, checked against its layering.

    python scripts/import_graph.py [--dot FILE]

Layers, arrows pointing down only: the public API and the command (``doctune``) on top, which
nothing imports; the driver (``platform``) imports ``trainers`` and ``evaluators``, which never
import each other and never the driver; both build on ``doctune_core``, which imports none of the three.
Inside the driver, each folder stands on a floor (``DRIVER_FLOORS``) and imports only folders on
floors below its own, so no import runs back up and the folders form no circle: the run directory's
files (``rundir``) know nothing of specs or results, the spec (``spec``) nothing of the trackers,
strategies, clusters or searches that read it, the cluster (``cluster``) nothing of the search that
runs on it; what the trials establish (``platform.results``) never imports the search that ran
them, and resolving a search imports neither (``CONTRACTS``). Inside a package no module may
import itself through others (a cycle), a package's ``__init__``
included: a plug-in imports its registry from its package's ``base`` module, not from the package
that imports it back. Every import counts, a
function's own included (they hide tangles just as well), except those under ``if
TYPE_CHECKING:``. No module is longer than ``MAX_LINES``. Prints each package's arrows and the
broken rules; exits 1 if any rule is broken. ``--dot`` also writes the module graph for
Graphviz (``dot -Tsvg FILE``).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("doctune", "platform", "trainers", "evaluators", "doctune_core")
# package -> the project packages it must never import
FORBIDDEN = {
    "platform": {"doctune"},
    "doctune_core": {"doctune", "platform", "trainers", "evaluators"},
    "trainers": {"doctune", "platform", "evaluators"},
    "evaluators": {"doctune", "platform", "trainers"},
}
# inside the driver: modules (and their sub-modules) -> the driver modules they must never import.
# What the trials establish never reaches back into the search that ran them; resolving a search
# knows nothing of either.
CONTRACTS = {
    "platform.results": (
        "platform.search_path.tuner",
        "platform.search_path.resolution",
        "platform.search",
        "platform.study",
    ),
    "platform.search_path.resolution": ("platform.results", "platform.search_path.tuner"),
}
# the driver's folders (and its top modules), bottom floor first: each imports only lower floors
DRIVER_FLOORS = (
    ("platform", "platform.exit_codes"),
    ("platform.rundir",),
    ("platform.spec",),
    ("platform.cluster", "platform.strategies", "platform.tracking"),
    ("platform.results",),
    ("platform.export", "platform.report"),
    ("platform.search_path",),
    ("platform.search", "platform.study"),
)
MAX_LINES = 400


def driver_floor(module: str) -> tuple[str, int | None] | None:
    """The driver folder ``module`` lies in and its floor (None outside the driver; a floor of None
    for a folder ``DRIVER_FLOORS`` does not place, which is a broken rule)."""
    if module.split(".")[0] != "platform":
        return None
    folder = ".".join(module.split(".")[:2])
    return folder, next((floor for floor, folders in enumerate(DRIVER_FLOORS) if folder in folders), None)


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = ROOT) -> dict[str, Path]:
    return {module_name(p, root): p for package in PACKAGES for p in sorted((root / package).rglob("*.py"))}


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports_of(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, bool]]:
    """The project modules ``name`` imports: (module, whether the import sits inside a function)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_lines(tree)
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_function.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    found = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skipped:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from package import module`` names a module; ``from module import name`` the module
            targets = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module for a in node.names
            ]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.append((target, node.lineno in in_function))
    return sorted(set(found))


def _within(module: str, package: str) -> bool:
    """Whether ``module`` is ``package`` or one of its sub-modules."""
    return module == package or module.startswith(package + ".")


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def check(root: Path = ROOT) -> tuple[dict[str, list[tuple[str, bool]]], list[str]]:
    """Each module's project imports, and every broken rule in words."""
    known = modules(root)
    edges = {name: imports_of(name, path, known) for name, path in known.items()}
    broken = []
    for name, targets in edges.items():
        package = name.split(".")[0]
        for target, _ in targets:
            if target.split(".")[0] in FORBIDDEN.get(package, ()):
                broken.append(f"{name} imports {target}: {package} never imports {target.split('.')[0]}")
            for importer, never in CONTRACTS.items():
                if _within(name, importer) and (hit := next((n for n in never if _within(target, n)), None)):
                    broken.append(f"{name} imports {target}: {importer} never imports {hit}")
            here, there = driver_floor(name), driver_floor(target)
            if here and there and here[0] != there[0] and None not in (here[1], there[1]) and there[1] >= here[1]:
                broken.append(
                    f"{name} imports {target}: {here[0]} (floor {here[1]}) imports only the driver's floors "
                    f"below its own, and {there[0]} is on floor {there[1]}"
                )
    for package in PACKAGES:
        graph = {
            name: {t for t, _ in targets if t.split(".")[0] == package}
            for name, targets in edges.items()
            if name.split(".")[0] == package
        }
        broken += [f"cycle in {package}: {' <-> '.join(cycle)}" for cycle in find_cycles(graph)]
    unplaced = sorted({floor[0] for name in known if (floor := driver_floor(name)) and floor[1] is None})
    broken += [f"{folder} stands on no floor: place it in DRIVER_FLOORS" for folder in unplaced]
    for path in known.values():
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES:
            broken.append(f"{path.relative_to(root)} has {lines} lines: split it (at most {MAX_LINES})")
    return edges, broken


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dot", type=Path, help="also write the module graph in Graphviz's format")
    args = parser.parse_args()
    edges, broken = check()
    between: dict[tuple[str, str], int] = defaultdict(int)
    for name, targets in edges.items():
        for target, _ in targets:
            if name.split(".")[0] != target.split(".")[0]:
                between[(name.split(".")[0], target.split(".")[0])] += 1
    print("arrows between packages (imports):")
    for (source, target), count in sorted(between.items()):
        print(f"  {source} -> {target}: {count}")
    in_functions = sum(inside for targets in edges.values() for _, inside in targets)
    print(f"project imports inside functions: {in_functions}")
    if args.dot:
        lines = ["digraph doctune {", "  rankdir=TB; node [shape=box, fontsize=10];"]
        lines += [f'  "{name}" -> "{target}";' for name, targets in edges.items() for target, _ in targets]
        args.dot.write_text("\n".join([*lines, "}"]) + "\n")
    for problem in broken:
        print(f"broken: {problem}")
    print("layering holds" if not broken else f"{len(broken)} broken rule(s)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
