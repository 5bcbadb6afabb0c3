"""GraphStore.entity_ids on SQLite and PostgreSQL: names and aliases resolve to ids in one read, alike."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graph.api import EntitySpec, GraphStore
from graph.sqlite.db import GraphDB
from graph.sqlite.store import SqliteGraphStore
from tests.support.backends import graph_backends
from tests.support.pg_graph import row


@pytest.fixture(params=graph_backends())
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphStore]:
    if request.param == "sqlite":
        s: Any = SqliteGraphStore(GraphDB(tmp_path / "graph.sqlite3"))
    else:
        from graph.pg import PostgresGraphStore
        from testbed.postgres import fresh_database

        s = PostgresGraphStore(fresh_database(request.getfixturevalue("postgres_dsn")), owner="ids", retry_s=2.0)
    yield s
    s.close()


def _add(store: GraphStore, tenant: str, entities: list[EntitySpec], **kw: Any) -> list[int]:
    with store.transaction() as tx:
        mem_id = tx.allocate_ids(1)[0]
        tx.write_memory(row(mem_id, "text", tenant=tenant, **kw))
        return tx.link_entities(tenant, mem_id, entities, [], 7)


def test_names_and_aliases_resolve_to_ids_keyed_by_the_name_as_given(store: GraphStore) -> None:
    api, alice = _add(store, "acme", [EntitySpec("Payments API", "service", ("payments-api",)), EntitySpec("Alice")])
    found = store.entity_ids("acme", ["payments  API", "PAYMENTS-API", "alice", "nobody"])
    assert found == {"payments  API": api, "PAYMENTS-API": api, "alice": alice}
    assert store.entity_ids("acme", []) == {}


def test_another_tenants_names_resolve_to_nothing(store: GraphStore) -> None:
    _add(store, "globex", [EntitySpec("Falcon")])
    assert store.entity_ids("acme", ["Falcon"]) == {}


def test_a_private_only_entity_resolves_only_for_its_author_and_its_mentions_stay_private(store: GraphStore) -> None:
    (falcon,) = _add(store, "acme", [EntitySpec("Falcon")], visibility="agent", agent="bob")
    assert store.entity_ids("acme", ["falcon"], "bob") == {"falcon": falcon}
    assert store.entity_ids("acme", ["falcon"]) == store.entity_ids("acme", ["falcon"], "ann") == {}
    assert store.entity_mentions("acme", [falcon], "ann") == {}
    assert list(store.entity_mentions("acme", [falcon], "bob")) == [falcon]
