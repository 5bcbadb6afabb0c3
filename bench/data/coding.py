"""A coding agent's memory, generated deterministically (no model, no data files).

Agents (planner, coder, reviewer, tester) of one project write decisions, errors with
stack-trace lines, fixes, commands, config notes, handoffs and chat turns with the user,
over ~40 sessions. Every fact has near neighbours that share its identifiers (the same
file with another error, the same area with another decision), so neither exact words nor
topic alone finds it. Each query is asked the way an agent asks: a paraphrase, a pasted
error line, an identifier, "how did we fix …", "where did … stop". Its target is the
memory that answers it; ``relevant`` adds the memories that also help.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

AREAS = ["billing", "auth", "search", "ingest", "notifications", "reports", "storage", "scheduler", "webhooks",
         "exports"]
FILES = ["service", "models", "client", "handlers", "retry", "tasks", "api", "schema", "worker", "views"]
NOUNS = ["invoice", "token", "batch", "cursor", "payload", "session", "report", "upload", "digest", "receipt",
         "ledger", "webhook", "index", "snapshot", "quota"]
VERBS = ["load", "parse", "flush", "render", "retry", "validate", "sync", "encode", "resolve", "merge"]
ERRORS = [  # (exception, message, what an agent calls it)
    ("KeyError", "'customer_id'", "missing customer id key"),
    ("TimeoutError", "read timed out after 30s", "timeout talking to the backend"),
    ("IntegrityError", "duplicate key value violates unique constraint", "duplicate row on insert"),
    ("UnicodeDecodeError", "'utf-8' codec can't decode byte 0xff", "encoding crash on a bad byte"),
    ("ZeroDivisionError", "division by zero", "divide by zero"),
    ("AttributeError", "'NoneType' object has no attribute 'items'", "None where a dict was expected"),
    ("RecursionError", "maximum recursion depth exceeded", "infinite recursion"),
    ("PermissionError", "[Errno 13] Permission denied: '/var/run/app.sock'", "socket permission problem"),
    ("ConnectionResetError", "[Errno 104] Connection reset by peer", "connection dropped by the peer"),
    ("ValueError", "invalid literal for int() with base 10: ''", "empty string parsed as an int"),
]
FIXES = ["guard the lookup with .get() and a default", "raise the client timeout and add a retry with backoff",
         "switch the insert to an upsert", "decode with errors='replace'", "return early when the total is zero",
         "check for None before iterating", "turn the recursion into a loop with an explicit stack",
         "run the worker as the app user", "reconnect once on reset", "treat the empty string as missing"]
DECISIONS = [  # (memory wording, how an agent asks about it later)
    ("use Redis instead of memcached for caching session tokens", "storing login tokens temporarily"),
    ("keep Postgres advisory locks rather than a Zookeeper lease for job leadership", "which worker leads jobs"),
    ("paginate with opaque cursors, not offsets, on list endpoints", "paging through long result lists"),
    ("store money as integer cents instead of floats", "representing prices without rounding errors"),
    ("ship feature flags through LaunchDarkly over env vars", "turning features on per customer"),
    ("run migrations in a separate release step before the deploy", "schema changes during rollout"),
    ("adopt structlog JSON logs in place of plain text logging", "making logs machine readable"),
    ("retry webhooks with exponential backoff capped at one hour", "redelivering failed callbacks"),
    ("vendor the PDF renderer instead of calling the external service", "generating documents offline"),
    ("pin dependencies with a lock file and renovate updates weekly", "keeping third-party packages current"),
    ("shard the search index by tenant rather than by date", "splitting the index for big customers"),
    ("use UUIDv7 primary keys in place of autoincrement ids", "ids that sort by creation time"),
]
COMMANDS = [  # (task in the memory, task as asked, command)
    ("run the refund tests only", "execute just the refund test cases", "pytest tests/test_refunds.py -k refund -x"),
    ("rebuild the search index locally", "regenerate the local search index",
     "python -m app.search.rebuild --tenant dev"),
    ("apply pending migrations", "bring the database schema up to date", "alembic upgrade head"),
    ("tail the worker logs in staging", "watch what the staging workers print",
     "kubectl logs -f deploy/worker -n staging"),
    ("profile the export job", "find where the export spends its time",
     "py-spy record -o export.svg -- python -m app.exports"),
    ("bisect the flaky scheduler test", "find the commit that broke the scheduler test",
     "git bisect run pytest tests/test_scheduler.py"),
    ("seed the dev database", "fill the local database with sample data", "make seed ENV=dev"),
    ("regenerate the API client", "update the generated client code", "make openapi-client"),
]
SETTINGS = [  # (key, what it controls, how it is asked)
    ("WEBHOOK_MAX_ATTEMPTS", "how many times a callback is retried", "the limit on callback retries"),
    ("SEARCH_SHARD_COUNT", "the number of index shards per tenant", "how many pieces the index is split into"),
    ("SESSION_TTL_SECONDS", "how long a login token stays valid", "when logins expire"),
    ("EXPORT_CHUNK_ROWS", "rows written per export chunk", "the batch size of exports"),
    ("SCHEDULER_TICK_MS", "how often the scheduler wakes up", "the scheduler's polling interval"),
    ("INGEST_MAX_PAYLOAD_KB", "the largest upload accepted", "the size cap on uploads"),
]
AGENTS = ["planner", "coder", "reviewer", "tester"]
T0 = datetime(2025, 9, 1, 9, 0, tzinfo=UTC)


@dataclass
class Memory:
    key: str
    content: str
    type: str
    agent: str
    session: str
    timestamp: datetime
    role: str | None = None


@dataclass(frozen=True)
class Query:
    text: str
    target: str
    relevant: tuple[str, ...]
    kind: str


@dataclass
class Workload:
    memories: list[Memory] = field(default_factory=list)
    queries: list[Query] = field(default_factory=list)


def _ident(rng: random.Random) -> tuple[str, str, str]:
    area, file = rng.choice(AREAS), rng.choice(FILES)
    return area, f"src/{area}/{file}.py", f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}"


def generate(seed: int = 12, sessions: int = 40) -> Workload:
    """The workload: ~10 memories per session, one query per fact of interest."""
    rng = random.Random(seed)
    w = Workload()
    clock = [T0]

    def add(content: str, type_: str, agent: str, session: str, role: str | None = None) -> str:
        clock[0] += timedelta(minutes=rng.randint(2, 90))
        key = f"c{len(w.memories)}"
        w.memories.append(Memory(key, content, type_, agent, session, clock[0], role))
        return key

    def ask(text: str, target: str, kind: str, *also: str) -> None:
        w.queries.append(Query(text, target, (target, *also), kind))

    for s in range(sessions):
        session = f"task-{s:02d}"
        agent = AGENTS[s % len(AGENTS)]
        ticket = f"PROJ-{100 + s * 7}"
        for _ in range(2):  # errors and their fixes
            _area, path, func = _ident(rng)
            e = rng.randrange(len(ERRORS))
            exc, msg, said = ERRORS[e]
            line = rng.randint(20, 400)
            err = add(f"{exc} while running {func} ({ticket})\nTraceback (most recent call last):\n"
                      f'  File "{path}", line {line}, in {func}\n    result = {func}(request.{rng.choice(NOUNS)})\n'
                      f"{exc}: {msg}", "error", "tester", session)
            fix = add(f"Fixed the {exc} in {func} ({path}): {FIXES[e]}. Covered by a regression test.", "note",
                      agent, session)
            if rng.random() < 0.5:  # an agent pastes the tail of the traceback it is looking at
                ask(f'File "{path}", line {line}, in {func}\n{exc}: {msg}', err, "pasted error", fix)
            else:
                ask(f"have we seen the {said} in {func} before?", err, "paraphrased error", fix)
            ask(f"how did we fix the {exc} in {path}?", fix, "fix", err)
        # decisions, commands and settings are written once each, so every question has one answer
        if s < len(DECISIONS):
            said, asked = DECISIONS[s]
            dec = add(f"Decision ({rng.choice(AREAS)}): {said}. Reason: "
                      f"{rng.choice(['simpler ops', 'lower latency', 'fewer incidents', 'cost'])}.",
                      "decision", "planner", session)
            ask(f"why did we choose that approach for {asked}?", dec, "decision")
        else:
            _area, rpath, rfunc = _ident(rng)
            add(f"Review of {rfunc} in {rpath}: rename {rng.choice(NOUNS)} to {rng.choice(NOUNS)}_id and add a "
                f"docstring.", "note", "reviewer", session)
        if s < len(COMMANDS):
            task, task_asked, cmd = COMMANDS[s]
            com = add(f"To {task}: `{cmd}`", "note", agent, session)
            ask(f"how do I {task_asked}?", com, "command")
        if s < len(SETTINGS):
            key, what, asked_setting = SETTINGS[s]
            value = rng.choice([3, 5, 8, 16, 30, 60, 250, 1000])
            cfg = add(f"Config: {key}={value} in config/{rng.choice(AREAS)}.toml sets {what}.", "note", agent,
                      session)
            ask(f"which setting controls {asked_setting}?", cfg, "setting")
        _area, path, func = _ident(rng)
        u = add(f"Can you make {func} in {path} skip rows without a {rng.choice(NOUNS)}?", "turn", "user", session,
                "user")
        a = add(f"Done: {func} now skips them and logs a warning; see {ticket}.", "turn", agent, session,
                "assistant")
        if s % 3 == 1:
            ask(f"what did we change in {func} for the user?", a, "dialogue", u)
        _nxt_area, nxt_path, nxt_func = _ident(rng)
        ho = add(f"Handoff {ticket}: finished {func}; next: refactor {nxt_func} in {nxt_path}; blocked on review "
                 f"from {rng.choice(AGENTS)}.", "handoff", agent, session)
        if s % 2 == 1:
            ask(f"where did the work on {ticket} stop?", ho, "handoff")
    return w
