"""The IR as a networkx dependency graph: one node per tile op (or sync instruction), edges for
RAW/WAR/WAW dependencies through a buffer, in program order of a single block."""
from __future__ import annotations

import networkx as nx

from .analysis import accesses, core_instructions
from .nodes import Kernel
from .printer import print_ir_line  # noqa: F401 (re-exported: the graph's node text)

def ir_graph(kernel: Kernel) -> nx.DiGraph:
    """Nodes are numbered in program order with attributes `op` (text), `kind`, `loc`, `core`
    and, for lowered IR, `pipe`; edges carry `kind` (RAW/WAR/WAW) and `buffer`."""
    from .pipes import pipe_of
    g = nx.DiGraph(name=kernel.name)
    last_write: dict[str, int] = {}
    reads_since: dict[str, list[int]] = {}
    for idx, (stmt, core) in enumerate(core_instructions(kernel.body)):
        text = print_ir_line(stmt)
        g.add_node(idx, op=text, kind=type(stmt).__name__, loc=str(stmt.loc), core=core,
                   pipe=pipe_of(stmt, core))
        reads, writes = accesses(stmt)
        for b in reads:
            if b in last_write:
                _edge(g, last_write[b], idx, "RAW", b)
        for b in writes:
            for r in reads_since.get(b, []):
                if r != idx:
                    _edge(g, r, idx, "WAR", b)
            if b in last_write:
                _edge(g, last_write[b], idx, "WAW", b)
        for b in reads:
            reads_since.setdefault(b, []).append(idx)
        for b in writes:
            last_write[b] = idx
            reads_since[b] = []
    return g


def _edge(g, a, b, kind, buf):
    if a == b:
        return
    if g.has_edge(a, b):
        g[a][b]["kind"] += "," + kind if kind not in g[a][b]["kind"] else ""
        return
    g.add_edge(a, b, kind=kind, buffer=buf)


def to_dot(g: nx.DiGraph) -> str:
    """Graphviz DOT text of an IR graph (no pydot needed)."""
    lines = [f'digraph "{g.name or "kernel"}" {{', "  node [shape=box, fontname=monospace];"]
    for n, d in g.nodes(data=True):
        tag = ".".join(x for x in (d.get("core"), d.get("pipe")) if x)
        label = (f"[{tag}] " if tag else "") + d["op"]
        label = label.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'  n{n} [label="{label}"];')
    for a, b, d in g.edges(data=True):
        lines.append(f'  n{a} -> n{b} [label="{d["kind"]} {d["buffer"]}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
