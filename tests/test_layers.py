"""The package layers have no upward edge: a module imports only from its own package or from lower layers.

Layers, lowest first (a package may import any package of a lower layer or of its own layer, except that
scheduler families never import each other):

0. ``megha`` (the package root: version only), ``megha.errors``, ``megha.config``, ``megha.samples``
1. ``megha.model`` — constraints, bitsets, topology, workload tables
2. ``megha.workload`` — trace formats and converters
3. ``megha.sim`` — the engine and the sans-I/O component contract, nothing else
4. ``megha.metrics`` — recorder, summaries, reports
5. ``megha.schedulers.common`` — vocabulary shared by scheduler families
6. ``megha.schedulers`` (package) and ``megha.schedulers.registry`` — the extension contract
7. ``megha.schedulers.<family>`` — one family each; families never import each other
8. ``megha.runner`` — run wiring
9. ``megha.cli_common``, ``megha.live``
10. ``megha.sweep``
11. ``megha.experiments``
12. ``megha.cli``, ``megha.api`` — front ends

Imports inside functions count too (they are still dependencies).
"""

from __future__ import annotations

import ast
from pathlib import Path

import megha

SRC = Path(megha.__file__).parent

LAYERS: list[list[str]] = [
    ["megha", "megha.errors", "megha.config", "megha.samples", "megha.version"],
    ["megha.model"],
    ["megha.workload"],
    ["megha.sim"],
    ["megha.metrics"],
    ["megha.schedulers.common"],
    ["megha.schedulers", "megha.schedulers.registry"],
    ["megha.schedulers.*"],
    ["megha.runner"],
    ["megha.cli_common", "megha.live"],
    ["megha.sweep"],
    ["megha.experiments"],
    ["megha.cli", "megha.api"],
]


_FAMILIES = LAYERS.index(["megha.schedulers.*"])


def _unit(module: str) -> str:
    """The layer unit a module belongs to (its package, or a scheduler family)."""
    parts = module.split(".")
    if parts[:2] == ["megha", "schedulers"] and len(parts) >= 3:
        return f"megha.schedulers.{parts[2]}"
    if module == "megha.schedulers":
        return module
    return ".".join(parts[:2])


def _rank(unit: str) -> int:
    for i, layer in enumerate(LAYERS):
        if unit in layer:
            return i
    if unit.startswith("megha.schedulers."):
        return _FAMILIES
    raise AssertionError(f"{unit} is in no layer: add it to LAYERS in {__file__}")


def _modules() -> dict[str, Path]:
    out = {}
    for f in SRC.rglob("*.py"):
        rel = f.relative_to(SRC.parent).with_suffix("")
        out[".".join(rel.parts).removesuffix(".__init__")] = f
    return out


def _imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    pkg = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "megha")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name.split(".")[0] == "megha":
                found.add(name)
    return found


def test_no_upward_imports() -> None:
    bad = []
    for module, path in sorted(_modules().items()):
        src_unit = _unit(module)
        src_rank = _rank(src_unit)
        for imp in sorted(_imports(path, module)):
            dst_unit = _unit(imp)
            if dst_unit == src_unit:
                continue
            dst_rank = _rank(dst_unit)
            families = dst_rank == src_rank == _FAMILIES  # scheduler families never import each other
            if dst_rank > src_rank or families:
                bad.append(f"{module} imports {imp} ({src_unit} -> {dst_unit})")
    assert not bad, "upward or sideways imports:\n" + "\n".join(bad)


def test_sim_is_engine_only() -> None:
    forbidden = ("megha.schedulers", "megha.metrics", "megha.live", "megha.sweep", "megha.experiments", "megha.cli")
    for module, path in _modules().items():
        if module.startswith("megha.sim"):
            for imp in _imports(path, module):
                assert not imp.startswith(forbidden), f"{module} imports {imp}"


def test_scheduler_families_never_import_the_engine() -> None:
    """Families build through ``BuildContext`` (``add``, ``delay``, ``processing``) and give their fault models the
    ``Host`` protocol: none imports the engine module or reaches for ``ctx.engine``."""
    bad = []
    for module, path in sorted(_modules().items()):
        if not module.startswith("megha.schedulers.") or module == "megha.schedulers.registry":
            continue
        if "megha.sim.engine" in _imports(path, module):
            bad.append(f"{module} imports megha.sim.engine")
        if "ctx.engine" in path.read_text():
            bad.append(f"{module} uses ctx.engine (use ctx.add / ctx.delay / ctx.processing / ctx.host)")
    assert not bad, "\n".join(bad)


def test_registry_home_map_names_the_family_of_each_builtin() -> None:
    """``registry._HOME`` (the shortcut that imports one family for one name) matches what the families register."""
    from megha.schedulers import registry

    for name in registry.names():
        spec = registry.get(name)
        if spec.plugin is None and name in registry._HOME:
            assert spec.build.__module__.split(".")[2] == registry._HOME[name], name
    builtin = {n for n in registry.names() if registry.get(n).plugin is None}
    assert set(registry._HOME) <= builtin


_PORT_PRIVATE = {"_heap", "_next", "_lane", "_lane_append", "_types", "_delays", "_on_timer", "engine"}


def _is_port(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "port") or (
        isinstance(node, ast.Attribute) and node.attr == "port"
    )


def test_scheduler_components_use_only_the_port_hooks() -> None:
    """Components reach the simulator only through their port's contract (``megha.sim.component.Port`` and the
    documented ``SimHooks``: ``set_timer_at``, ``count_message``, ``message_counter``, ``timer_queue``): none reads
    the simulator port's engine or event queues (``port._heap``, ``port._next``, ``port.engine`` ...)."""
    bad = []
    for module, path in sorted(_modules().items()):
        if not module.startswith("megha.schedulers."):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in _PORT_PRIVATE and _is_port(node.value):
                bad.append(f"{module}:{node.lineno} reads port.{node.attr}")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2
                and _is_port(node.args[0])
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in _PORT_PRIVATE
            ):
                bad.append(f"{module}:{node.lineno} reads port.{node.args[1].value}")
    assert not bad, "use the port's documented hooks (megha.sim.component.SimHooks):\n" + "\n".join(bad)
