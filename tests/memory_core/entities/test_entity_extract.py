"""The deterministic entity extractor: what it finds in real-looking text, and that hostile input stays linear."""

from __future__ import annotations

import time

import pytest

from memory_core.entities.extract import MAX_MENTIONS, extract_entities, normalise_name


def found(text: str) -> list[tuple[str, str]]:
    return [(e.name, e.kind) for e in extract_entities(text)]


def test_a_dialogue_turn_yields_its_people_and_groups_but_not_its_greeting() -> None:
    text = "Caroline: Hey Mel! I went to the LGBTQ support group yesterday with José García."
    assert found(text) == [("Caroline", "name"), ("Mel", "name"), ("LGBTQ", "name"), ("José García", "name")]


def test_a_coding_note_yields_its_service_error_date_path_url_and_handle() -> None:
    text = ("The payments-api threw ERR_CONN_RESET at 2023-05-08; see src/app/main.py and "
            "https://example.org/runbook?x=1. Ping @bob.")
    assert found(text) == [
        ("payments-api", "identifier"), ("ERR_CONN_RESET", "identifier"), ("2023-05-08", "date"),
        ("src/app/main.py", "path"), ("https://example.org/runbook?x=1", "url"), ("@bob", "handle"),
    ]


def test_spans_point_at_the_mention_in_the_text_as_given() -> None:
    text = "«Zoë» met Jean-Luc Picard in Łódź; check `getUserById` in README.md."
    for e in extract_entities(text):
        assert text[e.span[0]:e.span[1]] == e.name
    assert {e.name for e in extract_entities(text)} == {"Zoë", "Jean-Luc Picard", "Łódź", "getUserById", "README.md"}


def test_multi_word_names_stay_together_up_to_punctuation_and_across_a_title() -> None:
    text = "We flew from San Francisco to New York, then Dr. Crusher joined Starfleet Academy."
    assert [n for n, k in found(text)] == ["San Francisco", "New York", "Dr. Crusher", "Starfleet Academy"]


def test_sentence_initial_stop_words_months_and_weekdays_are_not_names() -> None:
    text = "The concert was great. Yesterday I saw them. On Monday we left in May. Thanks, Anna!"
    assert [n for n, k in found(text) if k == "name"] == ["Anna"]


def test_contractions_and_sentence_initial_gerunds_are_not_names() -> None:
    assert found("They’ve left. It'll rain. Researching it helped. Visited Rome.") == [("Rome", "name")]



def test_sentence_initial_adverbs_and_interjections_are_not_names_and_do_not_join_the_name_after_them() -> None:
    text = ("Honestly, Caroline was right. Aww John, that's sweet! Woahhh Joanna! Hahaha Mel, good one. "
            "Unfortunately it rained. Highly recommend Barcelona. Gonna call Luna.")
    assert [n for n, k in found(text) if k == "name"] == ["Caroline", "John", "Joanna", "Mel", "Barcelona", "Luna"]


def test_names_that_end_like_adverbs_or_sound_like_interjections_stay_names() -> None:
    text = "Emily went home. Kelly too. Sally said hi. Holly left. Omar called. Ahab sailed."
    assert [n for n, k in found(text)] == ["Emily", "Kelly", "Sally", "Holly", "Omar", "Ahab"]

def test_code_literals_are_not_names_even_mid_sentence() -> None:
    assert found("it returned None where True or False was expected, not Null") == []


def test_a_possessive_is_not_part_of_the_name() -> None:
    assert found("Melanie's kids love painting.") == [("Melanie", "name")]


def test_dates_in_several_spellings_share_one_iso_key() -> None:
    keys = [e.key for e in extract_entities("On 8 May 2023, May 8, 2023 and 2023-05-08 (also May 2023).")
            if e.kind == "date"]
    assert keys == ["2023-05-08", "2023-05-08", "2023-05-08", "2023-05"]


def test_english_compounds_fractions_and_and_or_are_not_identifiers_or_paths() -> None:
    assert found("a well-known self-care routine, 3/4 of it and/or w/o sugar") == []


def test_versions_snake_and_camel_case_and_backticks_are_identifiers() -> None:
    text = "Upgrade to v2.3.1, rename user_id, call fetchRows and run `make lint` on py311."
    assert [(n, k) for n, k in found(text)] == [
        ("v2.3.1", "identifier"), ("user_id", "identifier"), ("fetchRows", "identifier"),
        ("make lint", "identifier"), ("py311", "identifier")]


def test_an_email_address_is_not_a_handle() -> None:
    assert found("mail ana@example.org or @ana_b.") == [("ana@example.org", "email"), ("@ana_b", "handle")]


@pytest.mark.parametrize(("a", "b"), [
    ("Payments-API", "payments-api"),
    ("New  York", "new york"),
    ("Jose\u0301", "José"),  # decomposed and composed accents
    ("payments\u2011api", "payments-api"),  # a non-breaking hyphen
    ("STRASSE", "straße"),
])
def test_aliases_that_differ_in_case_space_or_unicode_form_normalise_to_one_key(a: str, b: str) -> None:
    assert normalise_name(a) == normalise_name(b)


def test_non_text_and_empty_input_yield_nothing() -> None:
    assert extract_entities("") == []
    assert extract_entities(None) == []  # type: ignore[arg-type]
    assert extract_entities("這是一個測試 ничего не найдено") == []


@pytest.mark.parametrize("hostile", [
    "A" * 100_000, "A " * 50_000, "Ab " * 33_000, "@" * 100_000, "a/" * 50_000, "1 May " * 20_000,
    "`" * 100_000, "_" * 100_000, "x." * 50_000, "http://" + "a" * 100_000, "a" * 100_000 + "A",
    " " * 100_000, "\n" * 100_000, ".A" * 50_000, "2023-05-08 " * 9_000,
], ids=lambda h: repr(h[:6]))
def test_a_hundred_kilobytes_of_hostile_text_is_read_in_linear_time(hostile: str) -> None:
    # a quadratic pattern takes seconds to minutes on 100 kB; linear work is ~100x under the bound
    started = time.perf_counter()
    out = extract_entities(hostile)
    assert time.perf_counter() - started < 3.0
    assert len(out) <= MAX_MENTIONS


def test_a_long_prose_memory_is_capped_at_max_mentions_in_text_order() -> None:
    out = extract_entities(" and ".join(f"Person{i} Smith" for i in range(1_000)))
    assert len(out) == MAX_MENTIONS
    assert [e.span for e in out] == sorted(e.span for e in out)


@pytest.mark.parametrize("text", ["- Ask the on-call engineer", "[ ] Ask the on-call engineer",
                                  "- [x] Send the summary", "1. Send the summary", "> Ask first", "| Ask | Send |"])
def test_a_verb_after_a_markdown_marker_starts_a_sentence_and_is_no_name(text: str) -> None:
    assert [e.name for e in extract_entities(text)] == []


def test_names_after_markdown_markers_are_still_found() -> None:
    assert [e.name for e in extract_entities("- [ ] Dana Ortiz reviews it\n| Acme Corp | owner |")] == [
        "Dana Ortiz", "Acme Corp"]
