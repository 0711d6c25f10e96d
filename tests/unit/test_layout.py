"""The layout's rules, checked on the import graph (every `import` statement, lazy ones too).

* The client never imports the server (a client shard runs on a user's side of the network).
* Nothing under `server/`, `client/`, `adversary/` or `shared/` imports `sim` (the orchestrator
  and referee hold the truth; everything else must work without it).
* The adversary never imports the population loaders or the data readers that hold truth.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODES = ("shared", "server", "client", "adversary", "sim")


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("privrec", *parts))


def _imports(path: Path) -> set[str]:
    """Every privrec module `path` imports (at any depth of the file)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("privrec")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("privrec"):
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def _graph() -> dict[str, set[str]]:
    files = [p for node in NODES for p in (ROOT / node).rglob("*.py") if "proto" not in p.parts]
    modules = {_module_of(p): p for p in files}
    graph = {}
    for name, path in modules.items():
        # keep only edges to modules (an imported name that is not a module is dropped)
        graph[name] = {m for m in _imports(path) if m in modules}
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        mod = todo.pop()
        for dep in graph.get(mod, set()):
            # importing a.b.c imports a and a.b too
            chain = [".".join(dep.split(".")[:i]) for i in range(2, dep.count(".") + 2)]
            for m in chain:
                if m in graph and m not in seen:
                    seen.add(m)
                    todo.append(m)
    return seen


def test_client_never_imports_server() -> None:
    """No module reachable from any client module is part of the server."""
    graph = _graph()
    for mod in (m for m in graph if m.startswith("privrec.client")):
        reached = sorted(m for m in _reachable(graph, mod) if m.startswith("privrec.server"))
        assert not reached, f"{mod} imports the server through {reached}"


def test_nothing_below_sim_imports_sim() -> None:
    """shared, server, client and adversary modules never import privrec.sim."""
    graph = _graph()
    for mod, deps in graph.items():
        if not mod.startswith("privrec.sim"):
            bad = sorted(d for d in deps if d.startswith("privrec.sim"))
            assert not bad, f"{mod} imports {bad}"


def test_adversary_never_loads_truth() -> None:
    """No adversary module imports the population loaders or a dataset reader (only the
    `RatingData` type, for the declared auxiliary set, from `shared.data.dataset`)."""
    files = (ROOT / "adversary").rglob("*.py")
    truth = ("privrec.shared.population", "privrec.shared.data")
    for path in files:
        bad = sorted(
            m
            for m in _imports(path)
            if m.startswith(truth) and not m.startswith("privrec.shared.data.dataset")
        )
        assert not bad, f"{_module_of(path)} imports {bad}"


def test_the_rules_are_checkable() -> None:
    """The graph sees the edges it should (a broken walker would pass everything)."""
    graph = _graph()
    assert "privrec.server.models.base" in _reachable(graph, "privrec.server.aggregator")
    assert "privrec.shared.capabilities" in _reachable(graph, "privrec.client.shard")
    assert any(d.startswith("privrec.server") for d in _reachable(graph, "privrec.sim.run"))
