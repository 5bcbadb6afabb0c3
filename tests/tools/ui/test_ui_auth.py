"""Who may open the inspector: the operator token (bearer or login cookie) only; agent
tokens get 403; foreign Host and Origin headers are refused; no token configured = disabled."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings
from tests.support.ui_store import ADMIN_TOKEN, AGENT_TOKEN, OPERATOR_TOKEN, populate, ui_settings
from tools.ui import standalone_app
from tools.ui.auth import COOKIE, safe_next

BASE = "http://127.0.0.1:8766"
PAGES = ["/ui/", "/ui/tenant?t=acme", "/ui/session?t=acme&s=s1", "/ui/memory?t=acme&ref=mem:1",
         "/ui/search?t=acme&q=deploy", "/ui/health", "/ui/api/graph?t=acme&ref=mem:1"]


def _core(tmp_path, **server: object) -> MemoryCore:  # type: ignore[no-untyped-def]
    overrides = {"embedding": {"provider": "hash"}, **ui_settings()}
    overrides["server"] = {**overrides["server"], **server}  # type: ignore[dict-item]
    settings = load_settings(environ={}, overrides=overrides)
    return MemoryCore.open(tmp_path / "data", settings=settings, embedder=HashEmbedder(), in_memory_vectors=True)


@pytest.fixture
def app_client(tmp_path) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    core = _core(tmp_path)
    populate(core)
    yield TestClient(standalone_app(core), base_url=BASE, follow_redirects=False)
    core.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_without_a_token_html_pages_redirect_to_the_login_form_and_the_rest_get_401(app_client: TestClient) -> None:
    for path in PAGES:
        r = app_client.get(path, headers={"Accept": "text/html"})
        assert r.status_code == 303 and r.headers["location"].startswith("/ui/login?next=%2Fui%2F"), path
        r = app_client.get(path)
        assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHORIZED", path
        assert "Turn" not in r.text


def test_a_wrong_bearer_token_gets_401(app_client: TestClient) -> None:
    for path in PAGES:
        assert app_client.get(path, headers={**bearer("nope"), "Accept": "text/html"}).status_code == 401


@pytest.mark.parametrize("token", [AGENT_TOKEN, ADMIN_TOKEN])
def test_a_tenant_bound_agent_token_gets_403_on_every_page_whatever_its_scope(
    app_client: TestClient, token: str,
) -> None:
    """An admin scope is one tenant's: the inspector, which shows every tenant, stays the operator's."""
    for path in PAGES:
        r = app_client.get(path, headers=bearer(token))
        assert r.status_code == 403 and "Agent tokens cannot open the inspector" in r.text, path
        assert "Turn 1" not in r.text


def test_the_operator_token_opens_every_page(app_client: TestClient) -> None:
    for path in PAGES:
        assert app_client.get(path, headers=bearer(OPERATOR_TOKEN)).status_code == 200, path


def test_login_sets_an_httponly_samesite_strict_session_cookie_that_logout_revokes(app_client: TestClient) -> None:
    r = app_client.post("/ui/login", data={"token": OPERATOR_TOKEN, "next": "/ui/tenant?t=acme"})
    assert r.status_code == 303 and r.headers["location"] == "/ui/tenant?t=acme"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "Path=/ui" in cookie and OPERATOR_TOKEN not in cookie
    sid = r.cookies[COOKIE]
    app_client.cookies.clear()
    session = {"Cookie": f"{COOKIE}={sid}"}
    assert app_client.get("/ui/", headers=session).status_code == 200
    assert app_client.post("/ui/logout", headers=session).status_code == 303
    assert app_client.get("/ui/", headers=session).status_code == 401  # the server forgot the session
    assert app_client.get("/ui/", headers={"Cookie": f"{COOKIE}=forged"}).status_code == 401


def test_login_with_an_agent_token_is_refused_with_403_and_no_cookie(app_client: TestClient) -> None:
    r = app_client.post("/ui/login", data={"token": AGENT_TOKEN})
    assert r.status_code == 403 and "set-cookie" not in r.headers and "agent token" in r.text
    r = app_client.post("/ui/login", data={"token": "wrong"})
    assert r.status_code == 401 and "set-cookie" not in r.headers and "Wrong token" in r.text


def test_login_never_redirects_off_the_inspector() -> None:
    for target in ("https://evil.example/", "//evil.example/ui/", "/ui\\..\\x", "/other", None, ""):
        assert safe_next(target, "/ui") == "/ui/"
    assert safe_next("/ui/health", "/ui") == "/ui/health"


def test_a_foreign_origin_is_refused_even_with_the_operator_token(app_client: TestClient) -> None:
    for origin in ("https://evil.example", "null", "http://127.0.0.1.evil.example:8766"):
        r = app_client.get("/ui/", headers={**bearer(OPERATOR_TOKEN), "Origin": origin})
        assert r.status_code == 403 and "cross-origin" in r.text
        r = app_client.post("/ui/login", data={"token": OPERATOR_TOKEN}, headers={"Origin": origin})
        assert r.status_code == 403 and "set-cookie" not in r.headers
    same = app_client.get("/ui/", headers={**bearer(OPERATOR_TOKEN), "Origin": "http://localhost:8766"})
    assert same.status_code == 200


def test_a_foreign_host_header_is_refused_even_with_the_operator_token(app_client: TestClient) -> None:
    for host in ("evil.example", "evil.example:8766", "127.0.0.1.nip.io:8766", ""):
        r = app_client.get("/ui/", headers={**bearer(OPERATOR_TOKEN), "Host": host})
        assert r.status_code == 403, host
    for host in ("localhost:8766", "127.0.0.1", "[::1]:8766"):
        assert app_client.get("/ui/", headers={**bearer(OPERATOR_TOKEN), "Host": host}).status_code == 200, host


def test_without_an_operator_token_configured_the_inspector_is_disabled(tmp_path) -> None:  # type: ignore[no-untyped-def]
    core = _core(tmp_path, operator_token_sha256=None)
    try:
        client = TestClient(standalone_app(core), base_url=BASE, follow_redirects=False)
        for path in PAGES:
            r = client.get(path, headers=bearer(OPERATOR_TOKEN))
            assert r.status_code == 403 and "UI_DISABLED" in r.text and "memory-core token --operator" in r.text
        assert client.post("/ui/login", data={"token": OPERATOR_TOKEN}).status_code == 403
    finally:
        core.close()


def test_a_malformed_operator_token_hash_fails_at_start_with_its_key() -> None:
    from memory_core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"server\.operator_token_sha256"):
        load_settings(environ={}, overrides={"server": {"operator_token_sha256": "not-a-digest"}})


def test_static_assets_and_the_login_form_need_no_token(app_client: TestClient) -> None:
    assert app_client.get("/ui/static/ui.css").status_code == 200
    assert app_client.get("/ui/static/graph.js").status_code == 200
    r = app_client.get("/ui/login")
    assert r.status_code == 200 and 'type="password"' in r.text
