"""Inspection commands: tenants (operator-wide), sessions, stats, graph — over :mod:`memory_core.operator`."""

from __future__ import annotations

from typing import Annotated

import typer

from tools.cli import render
from tools.cli.common import Common, ConfigOpt, DataDirOpt, JsonOpt, TenantOpt, tenant_of


def tenants(
    ctx: typer.Context, config: ConfigOpt = None, data_dir: DataDirOpt = None, json_out: JsonOpt = False
) -> None:
    """List every tenant with its counts. Operator-wide by design: takes no --tenant.

    Example: memory-core tenants --data-dir /var/lib/memory-core

    ``vectors`` counts memory vectors (as many as ``memories`` when the stores agree), apart from
    the session summaries' ``episode_vectors`` (as many as ``episodes``).

    JSON: {"tenants": [{tenant, memories, vectors, episodes, episode_vectors, sessions, agents, last_activity}, …]}
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    from memory_core.operator import list_tenants  # loads the graph store only when the command runs

    with opts.parts(graph_only=True) as parts:  # counts only: lists a directory of another embedding model too
        rows = list_tenants(parts)
    if opts.json:
        render.emit_json({"tenants": [t.to_dict() for t in rows]})
        return
    render.table(
        "tenants (all)",
        ["tenant", "memories", "vectors", "episodes", "episode vectors", "sessions", "agents", "last activity"],
        ([t.tenant, t.memories, t.vectors, t.episodes, t.episode_vectors, t.sessions, t.agents, t.last_activity]
         for t in rows),
    )


def sessions(
    ctx: typer.Context,
    tenant: TenantOpt = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List a tenant's sessions, most recent first: counts, first/last activity, latest handoff.

    Example: memory-core sessions --tenant acme

    JSON: {"sessions": [{session, memories, turns, first_activity, last_activity, latest_handoff, episode}, …]}
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    from memory_core.operator import list_sessions  # loads the graph store only when the command runs

    with opts.parts() as parts:
        rows = list_sessions(parts, tenant_of(tenant))
    if opts.json:
        render.emit_json({"sessions": [s.to_dict() for s in rows]})
        return
    render.table(
        f"sessions of {tenant}",
        ["session", "memories", "turns", "first activity", "last activity", "latest handoff", "episode"],
        (
            [s.session, s.memories, s.turns, s.first_activity, s.last_activity, s.latest_handoff, s.episode]
            for s in rows
        ),
    )


def stats(
    ctx: typer.Context,
    tenant: TenantOpt = None,
    vectors: Annotated[
        bool, typer.Option("--vectors", help="Also count the tenant's Chroma records (opens Chroma: slower).")
    ] = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """A tenant's memories by type, sessions, agents, episodes, and the disk use of each store.

    Disk use is store-wide (all tenants share the Chroma directory and the graph database).
    The graph answers alone (fast); --vectors also counts Chroma's records, memories' and episodes'
    apart (`doctor` compares them).

    Example: memory-core stats --tenant acme --vectors

    JSON: {tenant, memories, by_type, private, sessions, agents, episodes, vectors, episode_vectors (both null
    without --vectors), disk_bytes}
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    from memory_core.operator import tenant_stats  # loads the graph store only when the command runs

    with opts.parts() as parts:
        result = tenant_stats(parts, tenant_of(tenant), count_vectors=vectors)
    if opts.json:
        render.emit_json(result.to_dict())
        return
    render.fields(
        f"stats of {tenant}",
        {
            "memories": str(result.memories),
            "private": str(result.private),
            "sessions": str(result.sessions),
            "agents": ", ".join(result.agents),
            "episodes": str(result.episodes),
            "vector records": "not counted (--vectors)" if result.vectors is None else str(result.vectors),
            "episode vector records": "not counted (--vectors)" if result.episode_vectors is None
            else str(result.episode_vectors),
        },
    )
    render.table("memories by type", ["type", "count"], sorted(result.by_type.items()))
    render.table(
        "disk use (all tenants)",
        ["store", "bytes"],
        ([k, "n/a" if v is None else f"{v:,}"] for k, v in result.disk_bytes.items()),
    )


def graph(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="A memory or episode ref, e.g. mem:42.")],
    tenant: TenantOpt = None,
    depth: Annotated[int, typer.Option(help="Hops to expand (0-4).")] = 1,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show a node's graph neighbourhood inside the tenant as a tree.

    Example: memory-core graph mem:42 --tenant acme --depth 2

    JSON: {node, kind, label, edges: [{direction, kind, node: {…}}], more}
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    from memory_core.operator import graph_neighbourhood  # loads the graph store only when the command runs

    with opts.parts() as parts:
        result = graph_neighbourhood(parts, tenant_of(tenant), ref, depth)
    if opts.json:
        render.emit_json(result)
    else:
        render.tree(result)


def register(app: typer.Typer) -> None:
    for fn in (tenants, sessions, stats, graph):
        app.command()(fn)
