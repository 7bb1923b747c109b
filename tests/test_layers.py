"""The package's import structure (docs/layout.md): every module of workflow/klrl sits in one
layer, imports only from its own layer or those below (imports inside functions included), and
no modules import each other in a circle. The objective imports nothing but the base."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "workflow" / "klrl"

# Bottom to top: a module is in the layer of its longest listed prefix.
LAYERS = {
    "core": ("klrl", "klrl.core"),
    "grading": ("klrl.grading",),
    "objective": ("klrl.objective",),
    "toy": ("klrl.toy",),
    "tasks": ("klrl.tasks",),
    "training": ("klrl.training",),
    "models and evaluation": ("klrl.models", "klrl.evaluation"),
    "grid": ("klrl.grid",),
    "tracking": ("klrl.tracking",),
    "analysis": ("klrl.analysis",),
    "audit": ("klrl.audit",),
    "reports": ("klrl.reports",),
    "verbs": ("klrl.verbs", "klrl.cli", "klrl.__main__"),
}
RANK = {prefix: rank for rank, prefixes in enumerate(LAYERS.values()) for prefix in prefixes}


def _modules() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


MODULES = _modules()


def _layer(module: str) -> int:
    prefixes = [prefix for prefix in RANK if module == prefix or module.startswith(prefix + ".")]
    if not prefixes:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS here and to docs/layout.md")
    return RANK[max(prefixes, key=len)]


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    """The klrl modules `module` imports, anywhere in it (`from a import b` counts a.b when b is a
    module, else a)."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}".rstrip(".")
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {_resolve(name) for name in names if name.split(".")[0] == "klrl"}
    return found - {None, module}


GRAPH = {module: _imports(module) for module in MODULES}


def _upward(graph: dict[str, set[str]], module: str) -> list[str]:
    return sorted(name for name in graph[module] if _layer(name) > _layer(module))


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """For each module on a circle of imports, one path from it back to itself."""

    def path_back(start):  # depth first
        stack, seen = [(start, [start])], set()
        while stack:
            module, path = stack.pop()
            for name in sorted(graph[module]):
                if name == start:
                    return path + [start]
                if name not in seen:
                    seen.add(name)
                    stack.append((name, path + [name]))
        return None

    return [circle for circle in map(path_back, sorted(graph)) if circle]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_its_own_layer_and_those_below(module):
    assert not _upward(GRAPH, module), f"{module} (layer {_layer(module)}) imports upward: {_upward(GRAPH, module)}"


def test_no_modules_import_each_other_in_a_circle():
    circles = _circles(GRAPH)
    assert not circles, " ; ".join(" → ".join(circle) for circle in circles)


def test_the_objective_imports_nothing_but_itself_and_the_base():
    objective = [module for module in MODULES if module.startswith("klrl.objective")]
    outside = {name for module in objective for name in GRAPH[module] if not name.startswith("klrl.objective")}
    assert {_layer(name) for name in outside} <= {RANK["klrl"]}, outside


def test_the_checks_catch_a_planted_upward_import_and_a_planted_circle():
    planted = {module: set(names) for module, names in GRAPH.items()}
    planted["klrl.training.trainer"].add("klrl.tracking.runs")  # the trainer importing its tracker
    planted["klrl.tracking.runs"].add("klrl.tracking.attempt_runs")  # attempts already imports runs
    assert _upward(planted, "klrl.training.trainer") == ["klrl.tracking.runs"]
    assert _circles(planted)[0] == ["klrl.tracking.attempt_runs", "klrl.tracking.runs", "klrl.tracking.attempt_runs"]
    assert _layer("klrl.verbs.train") == _layer("klrl.cli")  # a subpackage's verb is at the top


def test_no_two_modules_share_a_name_and_the_root_holds_only_the_command_line():
    names = [module.rpartition(".")[2] for module, path in MODULES.items() if path.name != "__init__.py"]
    assert sorted({name for name in names if names.count(name) > 1}) == []
    root = {module for module, path in MODULES.items() if module.count(".") == 1 and path.name != "__init__.py"}
    assert root == {"klrl.cli", "klrl.__main__"}, "a module of the root belongs in the subpackage of its concern"
