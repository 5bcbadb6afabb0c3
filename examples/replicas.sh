#!/usr/bin/env bash
# Two memory-core replicas over one PostgreSQL and one `chroma run`, on this machine, then gone.
#
#   examples/replicas.sh            (from a checkout after `make test`, or with memory-core[postgres] installed)
#
# 1. starts a throwaway PostgreSQL (initdb + pg_ctl in a temporary directory; as root, the cluster
#    belongs to the unprivileged user `nobody`, since initdb refuses root) and creates the role and
#    database memory-core uses;
# 2. starts `chroma run` on a temporary path;
# 3. writes a tokens file (one agent token, made by `memory-core token`);
# 4. starts two replicas, `memory-core serve --http`, on two ports, with the same settings;
# 5. adds a memory through replica 1 and recalls it through replica 2, over MCP with the token;
# 6. stops everything and deletes the temporary directory (also on failure or Ctrl-C).
#
# Settings it reads: MEMCORE_BIN (default: .venv/bin/memory-core, else `memory-core` on PATH),
# KEEP=1 to leave the temporary directory (logs) behind. Any MEMORY_CORE_* variable reaches the replicas.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
mc="${MEMCORE_BIN:-}"
if [ -z "$mc" ]; then
    if [ -x "$here/.venv/bin/memory-core" ]; then mc="$here/.venv/bin/memory-core"; else mc="$(command -v memory-core)"; fi
fi
bin="$(dirname "$(readlink -f "$mc")")"
py="$bin/python"     # the interpreter memory-core runs on: for the MCP client below and free ports
chroma="$bin/chroma"  # installed with chromadb, a dependency of memory-core
pg_bin="$(dirname "$(readlink -f "$(command -v initdb 2>/dev/null || ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")")"  # Debian: off PATH

work="$(mktemp -d -t memory-core-replicas-XXXXXX)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ -f "$work/pg/data/postmaster.pid" ]; then as_pg "$pg_bin/pg_ctl" -D "$work/pg/data" -m fast -w stop >/dev/null || true; fi
    if [ "${KEEP:-0}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

as_pg() {  # initdb and the server refuse root: run them as an unprivileged user
    if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
}
free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() {  # wait_for SECONDS DESCRIPTION PID LOG COMMAND...: until COMMAND succeeds, while process PID lives
    local deadline=$((SECONDS + $1)) what="$2" pid="$3" log="$4"; shift 4
    until "$@" >/dev/null 2>&1; do
        if ! kill -0 "$pid" 2>/dev/null; then  # it died: say why at once rather than wait out the deadline
            echo "replicas.sh: $what exited before it started; the end of $log:" >&2
            tail -n 20 "$log" >&2
            KEEP=1; exit 1
        fi
        if [ $SECONDS -ge $deadline ]; then echo "replicas.sh: $what did not start; logs in $work" >&2; KEEP=1; exit 1; fi
        sleep 0.5
    done
}

# --- 1. PostgreSQL: a cluster, then the role and database of memory-core ---------------------------
mkdir -p "$work/pg"
if [ "$(id -u)" = 0 ]; then chmod 711 "$work"; chown nobody "$work/pg"; fi  # nobody may traverse, not list
pg_port="$(free_port)"
password="$("$py" -c 'import secrets; print(secrets.token_urlsafe(18))')"
as_pg "$pg_bin/initdb" -D "$work/pg/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C.UTF-8 >"$work/pg/initdb.log"
as_pg "$pg_bin/pg_ctl" -D "$work/pg/data" -l "$work/pg/server.log" -w \
    -o "-p $pg_port -k $work/pg -c listen_addresses=127.0.0.1" start >/dev/null
# what an operator runs once (psql as the cluster's superuser): a login role and a database it owns
as_pg "$pg_bin/psql" -h "$work/pg" -p "$pg_port" -U postgres -v ON_ERROR_STOP=1 -q \
    -c "CREATE ROLE memcore LOGIN PASSWORD '$password'" -c "CREATE DATABASE memcore OWNER memcore"
echo "PostgreSQL on 127.0.0.1:$pg_port, database memcore owned by role memcore"

# --- 2. Chroma in client/server mode ----------------------------------------------------------------
chroma_port="$(free_port)"
"$chroma" run --path "$work/chroma" --host 127.0.0.1 --port "$chroma_port" >"$work/chroma.log" 2>&1 &
pids+=($!)
wait_for 120 "chroma run" "$!" "$work/chroma.log" "$py" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$chroma_port/api/v2/heartbeat', timeout=2)"
echo "Chroma on 127.0.0.1:$chroma_port"

# --- 3. the tokens file: the sha256 of each token and what it binds; the token itself goes to the agent -
"$mc" token acme --agent alice --json >"$work/token.json"
token="$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["token"])' "$work/token.json")"
{ echo "[server.tokens]"; "$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["config_line"])' "$work/token.json"; } \
    >"$work/tokens.toml"
rm "$work/token.json"
echo "tokens file: $work/tokens.toml (one agent token: tenant acme, agent alice)"

# --- 4. two replicas, the same settings, two ports ------------------------------------------------------
export MEMORY_CORE_STORAGE_GRAPH=postgres
export MEMORY_CORE_STORAGE_POSTGRES_DSN="postgresql://memcore:$password@127.0.0.1:$pg_port/memcore"
export MEMORY_CORE_STORAGE_CHROMA=http MEMORY_CORE_STORAGE_CHROMA_HOST=127.0.0.1 MEMORY_CORE_STORAGE_CHROMA_PORT="$chroma_port"
urls=()
for n in 1 2; do
    port="$(free_port)"
    "$mc" serve --http --announce --host 127.0.0.1 --port "$port" --config "$work/tokens.toml" --data-dir "$work/replica-$n" \
        >"$work/replica-$n.log" 2>&1 &
    pids+=($!)
    urls+=("http://127.0.0.1:$port/mcp")
done
for n in 1 2; do
    wait_for 300 "replica $n" "${pids[$n]}" "$work/replica-$n.log" grep -q "listening on" "$work/replica-$n.log"
    echo "replica $n: ${urls[$((n - 1))]}"
done

# --- 5. add through replica 1, recall through replica 2 ------------------------------------------------
"$py" - "${urls[0]}" "${urls[1]}" "$token" <<'PY'
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

first, second, token = sys.argv[1:4]
CONTENT = "The release moved to Friday; Dana signs off on the changelog."


async def connect(url: str, call):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        return await call(client)


async def main() -> None:
    async def add(client):  # the token binds tenant and agent: the call names neither
        result = await client.call_tool("add_memory", {"session": "release", "content": CONTENT})
        assert not result.is_error, result.content
        return result.structured_content["ref"]

    async def recall(client):
        result = await client.call_tool("recall", {"query": "when is the release?"})
        assert not result.is_error, result.content
        return result.structured_content["messages"]

    ref = await connect(first, add)
    print(f"added through replica 1: {ref}")
    found = await connect(second, recall)
    assert found and found[0]["ref"] == ref, found
    print(f"recalled through replica 2: {found[0]['ref']} {found[0]['content']!r}")


anyio.run(main)
PY
echo "ok: both replicas serve one store; stopping everything"
