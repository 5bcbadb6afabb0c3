"""Version chains as doctor sees them: each kind of damage with the fix
:func:`memory_core.operator.doctor.run.repair_stores` applies (in one graph transaction per tenant, so a
repair killed at any instant leaves a chain either as it was or mended).

A chain is the rows linked by ``supersedes_id`` (each names the version it corrects); a sound one
is a line, oldest first, every version but the newest ended at its successor's time, each newer
one holding a SUPERSEDES edge to the one it corrects. Kinds::

    version_open      a version a newer one corrects is still current       -> end it at the newer one's time
    version_unlinked  a newer version lacks its SUPERSEDES edge              -> write the edge
    version_self      a row names itself as the version it corrects
    version_cycle     following the links comes back to where it started
    version_fork      two or more rows correct the same version
                      -> all three: the rows linked together become ONE chain by time, the newest
                         current (newest wins), their SUPERSEDES edges rewritten to match

Only damage or a crafted import makes the last three (update_memory and imports refuse them), and
they hide rows: a cycle's rows are all ended, so recall never shows them again.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graph.api import SUPERSEDES
from memory_core.refs import memory_ref

if TYPE_CHECKING:
    from memory_core.operator.parts import OperatorParts

Row = dict[str, Any]


@dataclass(frozen=True)
class Finding:
    """One broken chain: its kind, the memory it is about and a sentence (see :class:`doctor_scan.Finding`)."""

    kind: str
    tenant: str
    ref: str
    detail: str


@dataclass
class VersionFix:
    """What mends one finding: the state to set per memory id, the SUPERSEDES edges (newer id,
    older id) to remove and to write."""

    states: dict[int, dict[str, Any]] = field(default_factory=dict)
    unlink: list[tuple[int, int]] = field(default_factory=list)
    link: list[tuple[int, int]] = field(default_factory=list)

    def describe(self) -> str:
        ended = sorted(i for i, s in self.states.items() if s.get("valid_to_us") is not None)
        current = sorted(i for i, s in self.states.items() if "valid_to_us" in s and s["valid_to_us"] is None)
        parts = []
        if ended:
            parts.append("ended " + ", ".join(memory_ref(i) for i in ended))
        if current:
            parts.append("made " + ", ".join(memory_ref(i) for i in current) + " current")
        if self.link:
            parts.append("linked " + ", ".join(f"{memory_ref(n)} -> {memory_ref(o)}" for n, o in self.link))
        if self.unlink:
            parts.append("unlinked " + ", ".join(f"{memory_ref(n)} -> {memory_ref(o)}" for n, o in self.unlink))
        return "; ".join(parts)


def version_findings(parts: OperatorParts, tenant: str, rows: dict[int, Row]) -> list[tuple[Finding, VersionFix]]:
    """Every broken version chain of the tenant's ``rows`` (id -> row), each with its fix."""
    links = {r["id"]: r["supersedes_id"] for r in rows.values()
             if r.get("supersedes_id") is not None and r["supersedes_id"] in rows}
    if not links:
        return []
    edges = _supersedes_edges(parts, tenant, links)
    out: list[tuple[Finding, VersionFix]] = []
    for members in _components(links):
        damaged = _damage(tenant, members, links, rows)
        if damaged:
            fix = _one_chain(members, rows, links, edges)
            out += [(finding, fix) for finding in damaged[:1]]
            out += [(finding, VersionFix()) for finding in damaged[1:]]  # one fix mends the whole component
            continue
        for new in sorted(m for m in members if m in links):
            old = rows[links[new]]
            linked = (new, old["id"]) in edges
            if old["valid_to_us"] is None:
                fix = VersionFix({old["id"]: {"valid_to_us": rows[new]["ts_us"]}}, link=[] if linked else [
                    (new, old["id"])])
                out.append((Finding("version_open", tenant, memory_ref(old["id"]),
                                    f"{memory_ref(new)} corrects it, yet it is still current"), fix))
            elif not linked:
                out.append((Finding("version_unlinked", tenant, memory_ref(new),
                                    f"its SUPERSEDES edge to {memory_ref(old['id'])} is missing"),
                            VersionFix(link=[(new, old["id"])])))
    return out


def _supersedes_edges(parts: OperatorParts, tenant: str, links: dict[int, int]) -> set[tuple[int, int]]:
    """The SUPERSEDES edges (src id, dst id) between memories that take part in version links."""
    ids = set(links) | set(links.values())
    found = set()
    for mem_id in sorted(ids):
        for e in parts.graph.edges_of(tenant, memory_ref(mem_id)):
            if e.direction == "out" and e.kind == SUPERSEDES and e.other.startswith("mem:"):
                other = int(e.other.split(":", 1)[1])
                if other in ids:
                    found.add((mem_id, other))
    return found


def _components(links: dict[int, int]) -> list[set[int]]:
    """Rows linked by supersedes_id, grouped (weakly connected), in a stable order."""
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for new, old in links.items():
        parent[root(new)] = root(old)
    groups: dict[int, set[int]] = {}
    for x in list(parent):
        groups.setdefault(root(x), set()).add(x)
    return sorted(groups.values(), key=min)


def _damage(tenant: str, members: set[int], links: dict[int, int], rows: dict[int, Row]) -> list[Finding]:
    """The self-loops, cycle and forks of one component (a component has at most one cycle)."""
    out = [Finding("version_self", tenant, memory_ref(m), "it names itself as the version it corrects")
           for m in sorted(members) if links.get(m) == m]
    cycle = _cycle(members, links)
    if cycle:
        first = min(cycle, key=lambda i: (rows[i]["ts_us"], i))
        out.append(Finding("version_cycle", tenant, memory_ref(first), "its versions correct each other in a "
                           "cycle (" + " -> ".join(memory_ref(i) for i in cycle) + "), so none of them is current"))
    successors = Counter(links[m] for m in members if m in links and links[m] != m)
    for old, n in sorted(successors.items()):
        if n > 1:
            newer = sorted(m for m in members if links.get(m) == old)
            out.append(Finding("version_fork", tenant, memory_ref(old), f"{n} versions correct it ("
                               + ", ".join(memory_ref(i) for i in newer) + "); a version has one successor"))
    return out


def _cycle(members: set[int], links: dict[int, int]) -> list[int]:
    """The cycle (two rows or more) among ``members``, in link order, or []."""
    for start in sorted(members):
        path: list[int] = []
        seen: dict[int, int] = {}
        node: int | None = start
        while node is not None and node not in seen:
            seen[node] = len(path)
            path.append(node)
            node = links.get(node)
        if node is not None and len(path) - seen[node] > 1:
            return path[seen[node]:]
    return []


def _one_chain(members: set[int], rows: dict[int, Row], links: dict[int, int],
               edges: set[tuple[int, int]]) -> VersionFix:
    """The component as one chain by time (timestamp, then id): each version corrects the one before
    it and ends at the next one's time; the newest is current."""
    order = sorted(members, key=lambda i: (rows[i]["ts_us"], i))
    fix = VersionFix()
    wanted = {(order[k], order[k - 1]) for k in range(1, len(order))}
    for k, mem_id in enumerate(order):
        state = {"supersedes_id": order[k - 1] if k else None,
                 "valid_to_us": rows[order[k + 1]]["ts_us"] if k + 1 < len(order) else None}
        row = rows[mem_id]
        if state != {"supersedes_id": row.get("supersedes_id"), "valid_to_us": row["valid_to_us"]}:
            fix.states[mem_id] = state
    fix.unlink = sorted(e for e in edges if e[0] in members and e[1] in members and e not in wanted)
    fix.link = sorted(wanted - edges)
    return fix
