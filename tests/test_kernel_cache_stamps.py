"""Every compiled-kernel module names the kernel sources its cached machine code includes.

Numba caches a ``cache=True`` function's machine code under a stamp of the one file that defines it, but that code
also contains every compiled function it calls from other modules (and their module constants). Edit
``flow/_kernels.py`` and ``flow/_graph_kernels.py`` would keep running the old arc edits from its cache, silently.
So a kernel module that imports another one ends with one line per such source, naming its digest::

    # numba cache stamp: megha.schedulers.flow._kernels=0123456789ab

A changed dependency then changes this module's text too, and numba recompiles it. The digest covers the whole
file, stamp line included, so a change propagates along chains (``model._kernels`` -> ``megha._kernels`` ->
``megha._lean_kernel``). This test fails when a stamp is missing or stale; ``python
tests/test_kernel_cache_stamps.py --write`` rewrites them all (dependencies first).
"""

from __future__ import annotations

import ast
import hashlib
import sys
from graphlib import TopologicalSorter
from pathlib import Path

import megha

PACKAGE = Path(megha.__file__).resolve().parent
PREFIX = "# numba cache stamp:"


def _module_name(path: Path) -> str:
    return ".".join(("megha", *path.relative_to(PACKAGE).with_suffix("").parts))


def _imports(path: Path) -> tuple[bool, set[str]]:
    """Whether ``path`` imports numba, and the megha modules it imports (any form, any depth)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path).split(".")[:-1]
    uses_numba = False
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            uses_numba |= name.split(".")[0] == "numba"
            if name.startswith("megha."):
                found.add(name)
    return uses_numba, found


def kernel_dependencies() -> dict[Path, list[Path]]:
    """Each module that compiles with numba, mapped to the other numba modules it imports."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    kernels = {}
    for name, path in modules.items():
        uses_numba, found = _imports(path)
        if uses_numba and "njit" in path.read_text(encoding="utf-8"):
            kernels[name] = (path, found)
    return {
        path: sorted(kernels[dep][0] for dep in found if dep in kernels and dep != name)
        for name, (path, found) in kernels.items()
    }


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def expected_stamp(deps: list[Path]) -> str | None:
    """The stamp lines a module with these kernel dependencies must end with (None: no dependency, no stamp)."""
    return "\n".join(f"{PREFIX} {_module_name(d)}={_digest(d)}" for d in deps) or None


def _body_and_stamp(path: Path) -> tuple[str, str | None]:
    text = path.read_text(encoding="utf-8")
    lines = text.rstrip("\n").split("\n")
    cut = len(lines)
    while cut and lines[cut - 1].startswith(PREFIX):
        cut -= 1
    if cut == len(lines):
        return text, None
    return "\n".join(lines[:cut]).rstrip("\n") + "\n", "\n".join(lines[cut:])


def write_stamps() -> list[Path]:
    """Rewrite every stale or missing stamp, dependencies first; returns the files changed."""
    graph = kernel_dependencies()
    changed = []
    for path in TopologicalSorter({p: set(d) for p, d in graph.items()}).static_order():
        body, stamp = _body_and_stamp(path)
        want = expected_stamp(graph[path])
        if stamp != want:
            path.write_text(body + ("\n\n" + want + "\n" if want else ""), encoding="utf-8")
            changed.append(path)
    return changed


def test_kernel_modules_are_found() -> None:
    graph = kernel_dependencies()
    names = {_module_name(p) for p in graph}
    assert "megha.schedulers.flow._kernels" in names
    assert "megha.schedulers.megha._lean_kernel" in names
    lean = next(p for p in graph if _module_name(p) == "megha.schedulers.megha._lean_kernel")
    assert {_module_name(d) for d in graph[lean]} >= {"megha.schedulers.megha._kernels"}


def test_every_kernel_stamp_is_current() -> None:
    stale = []
    for path, deps in kernel_dependencies().items():
        _, stamp = _body_and_stamp(path)
        want = expected_stamp(deps)
        if stamp != want:
            stale.append(f"{path.relative_to(PACKAGE.parent)}: has {stamp!r}, needs {want!r}")
    assert not stale, "stale numba cache stamps (run `python tests/test_kernel_cache_stamps.py --write`):\n" + (
        "\n".join(stale)
    )


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_kernel_cache_stamps.py --write")
    for changed in write_stamps():
        print(f"stamped {changed.relative_to(PACKAGE.parent)}")
