"""A bug inside a tool answers INTERNAL_ERROR to the caller and leaves its traceback in the
server log, as the error message promises (a replica's recall once failed with nothing logged)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mcp import Client

from memory_core.service import MemoryCore
from memory_core.settings import load_settings
from testbed.mcp_in_process import served

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_an_unexpected_failure_is_logged_with_its_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("injected recall bug")

    monkeypatch.setattr(MemoryCore, "recall", broken)
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    with caplog.at_level(logging.ERROR):
        async with Client(served(settings, str(tmp_path))) as client:
            result = await client.call_tool("recall", {"tenant": "acme", "query": "anything"})
    assert result.is_error and result.content[0].text.startswith("INTERNAL_ERROR")  # type: ignore[union-attr]
    assert "injected recall bug" not in result.content[0].text  # type: ignore[union-attr]
    logged = [r for r in caplog.records if r.exc_info and "injected recall bug" in str(r.exc_info[1])]
    assert logged and "recall" in logged[0].getMessage()
