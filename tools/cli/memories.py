"""Memory commands: add, recall, show, recent, delete — each one call of the service."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from memory_core import AddFields, MemoryRow, NotFoundError
from tools.cli import render
from tools.cli.common import (
    AsOfOpt,
    Common,
    ConfigOpt,
    DataDirOpt,
    JsonOpt,
    TenantOpt,
    ViewerOpt,
    parse_json_object,
    read_text_argument,
    required,
    tenant_of,
)

SessionOpt = Annotated[str | None, typer.Option("--session", "-s", help="Session id.")]
AgentOpt = Annotated[str | None, typer.Option("--agent", "-a", help="Agent id.")]


def add(
    ctx: typer.Context,
    content: Annotated[str, typer.Argument(help="The memory's text; '-' reads it from standard input.")],
    tenant: TenantOpt = None,
    session: SessionOpt = None,
    agent: AgentOpt = None,
    type_: Annotated[str, typer.Option("--type", help="turn, note, handoff, decision, error, …")] = "turn",
    role: Annotated[str | None, typer.Option(help="Role of a turn (user, assistant, …).")] = None,
    channel: Annotated[str | None, typer.Option(help="Channel the memory came from.")] = None,
    source_id: Annotated[str | None, typer.Option(help="source.id, e.g. discord:123.")] = None,
    project_id: Annotated[str | None, typer.Option(help="Project; omit for the global pool.")] = None,
    salience: Annotated[float | None, typer.Option(help="0..1 (default 0.5; handoffs 0.95).")] = None,
    visibility: Annotated[str, typer.Option(help="tenant (shared) or agent (private).")] = "tenant",
    timestamp: Annotated[str | None, typer.Option(help="ISO-8601 with timezone (default: now).")] = None,
    valid_from: Annotated[str | None, typer.Option(
        help="ISO-8601: when the fact became true, if not at its timestamp (--as-of reads it).")] = None,
    review_after: Annotated[str | None, typer.Option(
        help="ISO-8601: when it should be checked again; recall marks it review_due after.")] = None,
    idempotency_key: Annotated[str | None, typer.Option(help="Retrying with the same key writes once.")] = None,
    metadata: Annotated[str | None, typer.Option(help="A JSON object stored with the memory.")] = None,
    provenance: Annotated[str | None, typer.Option(
        help="Where the content came from: user, agent, tool, web, import, hook (default: user for --role user, "
             "else agent).")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Store one memory in both stores and print its ref (--type handoff supersedes the previous handoff).

    Example: memory-core add --tenant acme --session s1 --agent planner --type note "Ship on Friday"

    Secrets in the text (keys, tokens, passwords, …) are stored as [REDACTED:<kind>] under the default
    security.secrets = "redact"; the output names their kinds and counts.

    Rows that carry no information ("ok", "thanks", NO_REPLY, heartbeats, a harness's bookkeeping, the agent's
    exact repeat) are not stored under the default hygiene.enabled = true: the output says why.

    JSON: {"ref", "timestamp", "created", "stored", "reason"?, "duplicate_of"?, "redacted"?: {kind: count}}
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    fields: AddFields = {  # every add field but entities and relations (a test holds them to AddFields)
        "type": type_,
        "role": role,
        "channel": channel,
        "project_id": project_id,
        "salience": salience,
        "visibility": visibility,
        "timestamp": timestamp,
        "valid_from": valid_from,
        "review_after": review_after,
        "idempotency_key": idempotency_key,
        "metadata": parse_json_object(metadata, "metadata"),
        "source": {"id": source_id} if source_id else None,
        "provenance": provenance,
    }
    text = read_text_argument(content)
    with opts.core() as core:  # the service routes type=handoff through create_handoff (SUPERSEDES)
        who = (tenant_of(tenant), required(session, "session"), required(agent, "agent"))
        result = core.add_memory(*who, text, **fields)
    if opts.json:
        render.emit_json(result.to_dict())
        return
    if not result.stored:  # write-time hygiene: nothing worth keeping (a success)
        earlier = f"; the agent's row {result.ref} holds the same words" if result.ref else ""
        typer.echo(f"Not stored ({result.reason}){earlier}.")
        return
    note = f" (duplicate of {result.duplicate_of})" if result.duplicate_of else ""
    verb = "Stored" if result.created else "Already stored (same idempotency key):"
    typer.echo(f"{verb} {result.ref} at {result.to_dict()['timestamp']}{note}{render.redacted_note(result.redacted)}")


def recall(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to recall; empty returns the most recent memories.")] = "",
    tenant: TenantOpt = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="Rows to return (default 10).")] = None,
    type_: Annotated[str | None, typer.Option("--type", help="Only this type (stronger recency).")] = None,
    session: SessionOpt = None,
    agent: AgentOpt = None,
    channel: Annotated[str | None, typer.Option(help="Only this channel.")] = None,
    source_id: Annotated[str | None, typer.Option(help="Prefix of source.id.")] = None,
    project_id: Annotated[
        str | None, typer.Option(help="Omit: all projects; '': global pool only; X: X and the global pool; @auto.")
    ] = None,
    exclude: Annotated[list[str] | None, typer.Option(help="Content you already hold (repeatable).")] = None,
    deep: Annotated[bool, typer.Option(help="No time decay (and every copy of a repeated fact).")] = False,
    as_of: AsOfOpt = None,
    include_stale: Annotated[bool, typer.Option(
        help="Rows a newer memory contradicts rank as they would, unmarked.")] = False,
    collapse: Annotated[bool, typer.Option(
        "--collapse/--no-collapse", help="One row per fact: its newest copy, with its repeats.")] = True,
    preset: Annotated[str | None, typer.Option(help="Retrieval preset (default: recall.preset).")] = None,
    include_quarantined: Annotated[bool, typer.Option(
        help="Also rows the poisoning policy quarantined (instructions aimed at a model).")] = False,
    viewer: ViewerOpt = None,
    explain: Annotated[bool, typer.Option(
        "--explain", help="Also print how the recall ran: time per stage, candidates, vector path.")] = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Hybrid recall (vector + lexical + graph) with every recall filter.

    Example: memory-core recall --tenant acme "release date" --type decision --limit 5

    A fact stored several times is one row, its newest copy, with "repeats" (copies) and "also"
    (the other refs, newest first); --no-collapse (or --deep) lists every copy.

    Rows come by confidence, best first; under --type handoff newest first (time orders the
    handoffs that pass the quality gate; --deep ranks them by relevance); an empty query lists
    the most recent. The table's title says which.

    JSON: {"messages": [row, …], "gate_fallback"?, "order"?: "newest_first", "resolved_project_id"?,
    "warning"?}; each row has ref, session, agent, type, timestamp, content (full), confidence,
    match_reason, and repeats/also when it stands for copies. With
    --explain, also "diagnostics": {"stages_ms": {read, embed, vector, lexical, entities, wait,
    rank, rerank?}, "elapsed_ms", "candidates", "vector_path", "lexical_share", "quality", …}.
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.core() as core:
        result = core.recall(
            tenant_of(tenant), query, viewer=viewer, limit=limit, type=type_, session=session, agent=agent,
            channel=channel, source_id=source_id, project_id=project_id, exclude_contents=exclude or None,
            deep=deep, preset=preset, collapse=collapse, as_of=as_of, include_stale=include_stale,
            include_quarantined=include_quarantined,
        )
    if opts.json:
        from tools.mcp.preview import recall_response  # the one recall envelope; loads with the command

        out = recall_response(result, [m.to_dict() for m in result.messages])
        render.emit_json({**out, "diagnostics": result.diagnostics} if explain else out)
        return
    render.memory_table(render.recall_title(result, query), result.messages, scored=True)
    if result.order == "newest_first":
        typer.echo(render.NEWEST_FIRST_NOTE)
    if result.gate_fallback:
        typer.echo("Below the quality gate: showing the best lexical matches instead.")
    if result.operating_context_warning:
        typer.echo(f"warning: {result.operating_context_warning}")
    if explain:
        render.recall_diagnostics(result.diagnostics)


def show(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="A memory ref, e.g. mem:42.")],
    tenant: TenantOpt = None,
    viewer: ViewerOpt = None,
    as_of: AsOfOpt = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show one memory in full with its graph neighbours (author, session, previous/next, edges).

    Example: memory-core show mem:42 --tenant acme

    JSON: {"memory": row, "neighbours": {author, session, previous, next, edges, entities}} (entities:
    [{ref, name, kind, aliases}] as the viewer sees them)
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.core() as core:
        result = core.check_memory(tenant_of(tenant), ref, viewer=viewer, as_of=as_of)
    neighbours: dict[str, Any] = {
        k: v.to_dict() if isinstance(v, MemoryRow) else v for k, v in result.neighbours.items()
    }
    if opts.json:
        render.emit_json({"memory": result.memory.to_dict(), "neighbours": neighbours})
        return
    row = result.memory.to_dict()
    content = row.pop("content")
    render.fields(result.memory.ref, row)
    typer.echo(content)
    links = [["author", neighbours["author"]["node"]], ["session", neighbours["session"]["node"]]]
    links += [[k, neighbours[k]["ref"]] for k in ("previous", "next") if neighbours.get(k)]
    links += [[f"{e['direction']} {e['kind']}", e["node"]] for e in neighbours.get("edges", [])]
    links += [["mentions", f"{e['ref']} {e['name']}"] for e in neighbours.get("entities", [])]
    render.table("neighbours", ["link", "node"], links)
    if neighbours.get("versions"):  # a corrected memory: its chain, oldest first
        render.table("versions", ["ref", "timestamp", "valid to"],
                     [[e["ref"], e["timestamp"], e.get("valid_to", "current")] for e in neighbours["versions"]])


def recent(
    ctx: typer.Context,
    tenant: TenantOpt = None,
    session: SessionOpt = None,
    cursor: Annotated[str | None, typer.Option(help="next_cursor of the previous page.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Turns per page (1-100).")] = 20,
    viewer: ViewerOpt = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Page a session's turns, newest first; prints the cursor of the next page.

    Example: memory-core recent --tenant acme --session s1 --limit 20 --cursor <next_cursor>

    JSON: {"turns": [row, …], "next_cursor": str | null}
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.core() as core:
        page = core.query_recent_turns(tenant_of(tenant), required(session, "session"), limit, cursor, viewer=viewer)
    if opts.json:
        render.emit_json({"turns": [t.to_dict() for t in page.turns], "next_cursor": page.next_cursor})
        return
    render.memory_table(f"{session}: {len(page.turns)} turns", page.turns)
    typer.echo(f"next cursor: {page.next_cursor}" if page.next_cursor else "no more turns")


def delete(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(help="A memory ref, e.g. mem:42.")],
    tenant: TenantOpt = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Delete one memory from both stores, private ones too (exit 3 when the tenant has no such memory).

    Example: memory-core delete mem:42 --tenant acme

    JSON: {"ref", "deleted": true}
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.core() as core:
        deleted = core.delete_memory_as_operator(tenant_of(tenant), ref)
    if not deleted:
        raise NotFoundError(f"No memory {ref} in this tenant.", ref=ref)
    if opts.json:
        render.emit_json({"ref": ref, "deleted": True})
    else:
        typer.echo(f"Deleted {ref}.")


def register(app: typer.Typer) -> None:
    for fn in (add, recall, show, recent, delete):
        app.command()(fn)
