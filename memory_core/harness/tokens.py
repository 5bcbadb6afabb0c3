"""A token count for the injected block that does not fall short of cl100k's, without loading it.

Loading tiktoken's cl100k tables costs ~1.4 s per process here, more than the whole hook may
take, so the hook estimates. cl100k first splits text into pieces (words with their leading
space, runs of 1-3 digits, punctuation runs, whitespace) and encodes each piece on its own;
:func:`estimate` splits the same way (stdlib ``re``: letters are ``[^\\W\\d_]``) and counts each
piece from above: non-ASCII pieces by their UTF-8 bytes (a token is never shorter than a byte; a few
common marks such as ``→`` and ``…`` are one token),
punctuation by its characters, common-shaped words by their length, vowel-less and mixed-case
runs (hex, ids, base64) at two or more characters a token.

It is checked, not proved: ``python -m bench.quality.recovery`` reports cl100k's count over the
estimate for every block it injects (at most 0.92 there), and ``tests/memory_core/harness/test_tokens.py``
holds it at or below 1 on hashes, ids, paths, code and non-Latin text. Text made of rare or
misspelled words can still exceed it (up to twice, on a page of them).
"""

from __future__ import annotations

import math
import re

# cl100k's pre-tokenizer, with \p{L} as [^\W\d_] and \p{N} as \d
_PIECES = re.compile(r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\w]?[^\W\d_]+|\d{1,3}| ?[^\s\w]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+")
_WORD = re.compile(r"([^\r\n\w]?)([A-Za-z]+)")
_VOWEL = re.compile(r"[aeiouyAEIOUY]")
_HUMPS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")  # ValueError -> Value, Error; HTTPServer -> HTTP, Server
ONE_TOKEN = frozenset("→…—–“”‘’•·é×°€£±")  # one cl100k token alone and after a space (tests check it)
_JOINED = frozenset("'(.\"[_/")  # punctuation cl100k usually merges with the short word after it
WORD_FREE_CHARS = 5  # a common-shaped word of this many letters (and its space) is one token ...
WORD_CHARS_PER_TOKEN = 4  # ... and one more for every four letters past that
MIXED_TOKENS_PER_CHAR = 0.8  # upper- or mixed-case runs: identifiers, acronyms, base64


def estimate(text: str) -> int:
    """Tokens ``text`` takes in cl100k, counted from above (see the module docstring)."""
    return sum(_piece(piece) for piece in _PIECES.findall(text))


def _piece(piece: str) -> int:
    if not piece.isascii():
        return 1 if piece.lstrip(" ") in ONE_TOKEN else len(piece.encode("utf-8"))
    word = _WORD.fullmatch(piece)
    if word is not None:
        lead, letters = word.groups()
        # a leading mark is a token of its own, but for those cl100k joins to a short common word
        extra = 1 if lead and lead != " " and not (lead in _JOINED and letters.islower() and len(letters) <= 6) else 0
        if not _VOWEL.search(letters):  # ids, hex, abbreviations: two letters a token
            return extra + math.ceil(len(letters) / 2)
        if letters.islower() or (letters[0].isupper() and letters[1:].islower()):
            return extra + _word(len(letters))
        humps = _HUMPS.findall(letters)
        if len(humps) > 1 and all(len(h) >= 3 and _VOWEL.search(h) for h in humps):  # CamelCase words
            return extra + sum(_word(len(h)) for h in humps)
        return extra + math.ceil(len(letters) * MIXED_TOKENS_PER_CHAR)
    if piece.isdigit():
        return 1
    if piece.isspace():
        return max(1, len(piece) // 4)
    return max(1, len(piece.lstrip(" ")))  # punctuation: a mark a token at most; a leading space rides along


def _word(letters: int) -> int:
    return 1 + max(0, letters - WORD_FREE_CHARS) // WORD_CHARS_PER_TOKEN


def fit(text: str, budget: int) -> str:
    """The longest prefix of ``text`` (cut at a word end when it can be) that :func:`estimate` puts
    within ``budget`` tokens; empty when not even a word fits."""
    if estimate(text) <= budget:
        return text
    low, high = 0, len(text)
    while low < high:  # the longest prefix within budget (estimate grows with the prefix)
        middle = (low + high + 1) // 2
        if estimate(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    cut = text[:low]
    space = cut.rfind(" ")
    return cut[:space].rstrip() if space > len(cut) // 2 else cut.rstrip()
