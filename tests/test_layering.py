"""The import rules of docs/architecture.md, read from every import statement of digest/,
baselines/ and experiments/ (function-level ones too; only ``if TYPE_CHECKING:`` blocks are
skipped): no cycle among the project's modules, digest/ never imports baselines/ or experiments/
(except its entry point), and inside digest/ and inside experiments/ a layer imports only its own
layer and the layers below it."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("digest", "baselines", "experiments")

# digest/'s layers, bottom to top (docs/architecture.md): a module may import its own layer's
# modules and any layer below. The package's __init__ (the public API) sits above them all.
LAYERS = [
    {"digest.errors", "digest.options", "digest.files", "digest.seeds"},
    {"digest.methods"},
    {"digest.config"},
    {"digest.data", "digest.runtime"},
    {"digest.models"},
    {"digest.policies"},
    {"digest.training"},
    {"digest.asynchronous"},
    {"digest.advise"},
    {"digest.flags", "digest.cli", "digest.__main__"},
    {"digest"},
]
ENTRY_POINT = "digest.cli"  # python -m digest: arguments and printing only
CLI_LINES = 150

# experiments/'s layers, bottom to top (docs/architecture.md): the core (suites, running,
# analysis, render), then the studies (experiments/studies/NAME/: one question's analysis,
# rendering and command each), then the core's commands (the modules at experiments/'s top, each
# a ``python -m experiments.X`` entry point). A module imports its own layer and the layers below;
# a study imports the core and never another study; the core imports no study.
HARNESS_LAYERS = ["experiments.suites", "experiments.running", "experiments.analysis",
                  "experiments.render", "experiments.studies"]
STUDIES = "experiments.studies"
HARNESS_TOP = 6  # modules at experiments/'s top: the core's commands and __init__
MIN_STUDIES = 5
LONGEST_FUNCTION = 60  # lines, in experiments/


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _walk(tree: ast.AST):
    """Every node but those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                stack.extend(child.orelse)
            else:
                stack.append(child)


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules that ``name`` imports (a ``from pkg import sub`` names the submodule)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `import a.b.c` of a package path
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layer_of(module: str) -> int:
    for i in range(len(LAYERS) - 1, -1, -1):
        if any(module == top or module.startswith(top + ".") for top in LAYERS[i]) and \
                (module != "digest" or i == len(LAYERS) - 1):
            if i == len(LAYERS) - 1 and module != "digest":
                continue
            return i
    raise AssertionError(f"{module} is in no layer of docs/architecture.md")


def test_no_import_cycle(graph):
    assert cycles(graph) == []


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_digest_imports_neither_baselines_nor_experiments(graph):
    bad = sorted(f"{m} -> {t}" for m, targets in graph.items() if m.split(".")[0] == "digest"
                 for t in targets if t.split(".")[0] in ("baselines", "experiments"))
    assert bad == []


def test_the_entry_point_parses_and_prints_only():
    """A run's lifecycle is digest/training/run.py's (the command line, ``digest.train`` and the
    harness call it); the entry point keeps arguments and printing."""
    source = (ROOT / "digest" / "cli.py").read_text()
    defined = {n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
    assert len(source.splitlines()) <= CLI_LINES
    assert not defined & {"worker", "run", "holds_this_run", "resume_config", "prepare"}


def test_baselines_never_import_experiments(graph):
    bad = sorted(f"{m} -> {t}" for m, targets in graph.items() if m.startswith("baselines")
                 for t in targets if t.startswith("experiments"))
    assert bad == []


def test_digest_layers_point_down(graph):
    bad = sorted(f"{m} (layer {layer_of(m)}) -> {t} (layer {layer_of(t)})"
                 for m, targets in graph.items() if m.split(".")[0] == "digest"
                 for t in targets if t.split(".")[0] == "digest" and layer_of(t) > layer_of(m))
    assert bad == []


def test_every_digest_module_has_a_layer(graph):
    for m in graph:
        if m.split(".")[0] == "digest":
            layer_of(m)


def harness_layer(module: str) -> int:
    """The layer of an experiments/ module: its subpackage's, or above them all for a command."""
    for i, package in enumerate(HARNESS_LAYERS):
        if module == package or module.startswith(package + "."):
            return i
    return len(HARNESS_LAYERS)


def test_harness_layers_are_in_order_commands_on_top():
    assert [harness_layer(m) for m in ("experiments.suites.suite", "experiments.running.launch",
            "experiments.analysis.tables", "experiments.render.report",
            "experiments.studies.verdict.analysis", "experiments.tables",
            "experiments")] == [0, 1, 2, 3, 4, 5, 5]


def study_of(module: str) -> str | None:
    """The study a module belongs to (``experiments.studies.verdict.render`` -> ``verdict``)."""
    parts = module.split(".")
    return parts[2] if module.startswith(STUDIES + ".") and len(parts) > 2 else None


def test_studies_import_the_core_never_another_study(graph):
    studies = {study_of(m) for m in graph} - {None}
    assert len(studies) >= MIN_STUDIES, sorted(studies)
    across = sorted(f"{m} -> {t}" for m, targets in graph.items() if study_of(m)
                    for t in targets if study_of(t) and study_of(t) != study_of(m))
    assert across == []


def test_the_core_imports_no_study(graph):
    """The core finds a study's shared blocks by name (experiments/pages.py), never by import."""
    bad = sorted(f"{m} -> {t}" for m, targets in graph.items()
                 if m.startswith("experiments") and not m.startswith(STUDIES)
                 for t in targets if t.startswith(STUDIES))
    assert bad == []


def test_harness_layers_point_down(graph):
    bad = sorted(f"{m} -> {t}" for m, targets in graph.items() if m.split(".")[0] == "experiments"
                 for t in targets if t.split(".")[0] == "experiments"
                 and harness_layer(t) > harness_layer(m))
    assert bad == []


def test_top_of_experiments_is_its_commands_the_rest_in_layers(graph):
    top = sorted(p for p in (ROOT / "experiments").glob("*.py"))
    assert len(top) <= HARNESS_TOP, [p.name for p in top]
    not_commands = [p.name for p in top if p.name != "__init__.py" and not (
        "def main(" in (text := p.read_text()) and 'if __name__ == "__main__":' in text)]
    assert not_commands == []
    outside = sorted(m for m in graph if m.count(".") >= 2 and m.startswith("experiments.")
                     and harness_layer(m) == len(HARNESS_LAYERS))
    assert outside == []


def test_experiments_register_methods_without_the_command_line(graph):
    """experiments/ registers through ``digest.methods.load_all`` (suites/registry.py), never
    through digest's entry point, and never asks a ``python -m digest methods`` subprocess."""
    assert sorted(m for m, targets in graph.items()
                  if m.split(".")[0] == "experiments" and ENTRY_POINT in targets) == []
    asking = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "experiments").rglob("*.py")
                    if '"digest", "methods"' in p.read_text())
    assert asking == []


def test_harness_functions_are_short():
    long = sorted(f"{p.relative_to(ROOT)}:{n.lineno} {n.name}: {n.end_lineno - n.lineno + 1}"
                  for p in (ROOT / "experiments").rglob("*.py")
                  for n in ast.walk(ast.parse(p.read_text()))
                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.end_lineno - n.lineno + 1 > LONGEST_FUNCTION)
    assert long == []


def test_no_private_name_crosses_modules():
    """``from x import _private`` across modules hides a dependency the owner cannot see."""
    modules = project_modules()
    bad = []
    for name, path in modules.items():
        for node in _walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0]
                                                    in PACKAGES):
                bad += [f"{name}: {a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert bad == []


def test_top_of_digest_is_small_and_files_are_short():
    top = sorted(p.name for p in (ROOT / "digest").glob("*.py"))
    assert len(top) <= 12, top
    long = sorted(f"{p.relative_to(ROOT)}: {n}" for pkg in (*PACKAGES, "tests", "benchmarks")
                  for p in (ROOT / pkg).rglob("*.py") if (n := len(p.read_text().splitlines())) > 350)
    assert long == []


def test_public_api_names_exist_and_the_guide_uses_only_them():
    import digest
    missing = [n for n in digest.__all__ if not hasattr(digest, n)]
    assert missing == []
    guide = (ROOT / "docs" / "adding-a-method.md").read_text()
    code = re.findall(r"```python\n(.*?)```", guide, re.S)[0]
    project = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.ImportFrom)
               and (n.module or "").split(".")[0] in PACKAGES]
    assert project and all(n.module == "digest" for n in project)
    assert all(a.name in digest.__all__ for n in project for a in n.names)


def test_one_version_string():
    import digest
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'version = {attr = "digest.__version__"}' in pyproject
    project = re.search(r"^\[project\]\n(.*?)(?=^\[)", pyproject, re.M | re.S).group(1)
    assert 'dynamic = ["version"]' in project and not re.search(r"^version\s*=", project, re.M)
    assert re.fullmatch(r"\d+\.\d+\.\d+", digest.__version__)
