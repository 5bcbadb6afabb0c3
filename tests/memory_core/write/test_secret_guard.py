"""The secrets guard's detector and policy, as functions: every secret of the corpus is found with
its kind and span, no look-alike is touched, redacted text scans clean, and a refusal names
fields, kinds and spans but never a secret."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.quality.secrets import score
from memory_core.errors import SecretRejectedError
from memory_core.secret_guard import Scan, SecretGuard, detect, redact
from memory_core.secret_guard.detect import keyed
from memory_core.settings.schema import LimitSettings
from memory_core.write.add_rows import prepare_add
from testbed.secrets_corpus import HELD_OUT, SAMPLES, Fake

LIMITS = LimitSettings()
POSITIVES = [s for s in SAMPLES if s.secrets]
LOOKALIKES = [s for s in SAMPLES if not s.secrets]


@pytest.mark.parametrize("sample", POSITIVES, ids=lambda s: s.name)
def test_every_secret_of_the_corpus_is_gone_from_the_redacted_text_and_named_by_kind(sample: object) -> None:
    text, secrets = sample.text, sample.secrets  # type: ignore[attr-defined]
    findings = detect(text)
    redacted = redact(text, findings)
    for kind, value in secrets:
        assert value not in redacted, f"{kind} left in clear"
        assert f"[REDACTED:{kind}]" in redacted, f"{kind} not named: {redacted}"


@pytest.mark.parametrize("sample", LOOKALIKES, ids=lambda s: s.name)
def test_look_alikes_are_left_exactly_as_they_were(sample: object) -> None:
    text = sample.text  # type: ignore[attr-defined]
    assert detect(text) == [], [text[f.start:f.end] for f in detect(text)]


def test_the_corpus_scores_full_precision_and_recall() -> None:
    s = score(SAMPLES)
    assert (s.recall, s.precision, s.kind_right) == (1.0, 1.0, s.secrets), (s.missed, s.false_positives,
                                                                            s.wrong_kind)


def test_on_the_held_out_corpus_no_look_alike_is_touched_and_nine_secrets_in_ten_are_caught() -> None:
    s = score(HELD_OUT)
    assert s.precision == 1.0, s.false_positives
    assert s.recall >= 0.9, s.missed


def test_redaction_keeps_the_text_around_a_secret() -> None:
    key = Fake(7).aws_access_key()
    text = f"rotate {key} today; the old one leaked in CI"
    assert redact(text, detect(text)) == "rotate [REDACTED:aws-access-key] today; the old one leaked in CI"
    url = "postgres://ledger:Pa55-word!x@db.internal:5432/ledger"
    assert redact(url, detect(url)) == "postgres://ledger:[REDACTED:url-credentials]@db.internal:5432/ledger"


@pytest.mark.parametrize("sample", POSITIVES, ids=lambda s: s.name)
def test_redacted_text_scans_clean_and_redacts_to_itself(sample: object) -> None:
    once = redact(sample.text, detect(sample.text))  # type: ignore[attr-defined]
    assert detect(once) == []
    assert redact(once, detect(once)) == once


@settings(max_examples=150, deadline=None)
@given(prefix=st.text(max_size=80), suffix=st.text(max_size=80), seed=st.integers(0, 10_000),
       which=st.sampled_from(["github_classic", "aws_access_key", "stripe_live", "openai_project", "anthropic",
                              "slack_bot", "gitlab", "google", "npm", "sendgrid"]))
def test_a_vendor_token_inside_any_text_is_never_left_in_clear(prefix: str, suffix: str, seed: int, which: str) -> None:
    token = getattr(Fake(seed), which)()
    text = f"{prefix} {token} {suffix}"
    assert token not in redact(text, detect(text))


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_detection_never_fails_and_its_spans_are_ordered_and_disjoint(text: str) -> None:
    found = detect(text)
    for a, b in itertools.pairwise(found):
        assert a.end <= b.start
    assert all(0 <= f.start < f.end <= len(text) for f in found)


def test_a_json_value_under_a_secret_named_key_is_a_secret_and_a_reference_is_not() -> None:
    assert [f.kind for f in keyed("db_password", "hunter2!x")] == ["password"]
    assert [f.kind for f in keyed("client_secret", "a81bf1c8e3")] == ["secret"]
    assert keyed("password_env", "DB_PASSWORD") == []
    assert keyed("token_count", "1532") == []
    assert keyed("api_key", "${API_KEY}") == []
    assert keyed("note", "the password is in the vault") == []


def item(content: str, **more: object) -> dict[str, object]:
    return {"tenant": "acme", "session": "s1", "agent": "alice", "content": content, **more}


def test_prepare_redacts_content_metadata_source_and_entities_and_counts_the_kinds() -> None:
    f = Fake(3)
    gh, ak = f.github_classic(), f.aws_access_key()
    metadata = {"env": {"AWS_ACCESS_KEY_ID": ak, "db_password": "s3cr3t!!"}}
    prepared = prepare_add(item(f"push with {gh}", metadata=metadata,
                                source={"id": "tool:curl", "url": f"https://ci:{f.password()}@ci.acme.dev/job"},
                                entities=[{"name": "deploy key", "aliases": [gh]}]), LIMITS)
    row = prepared.row.as_row()
    assert row["content"] == "push with [REDACTED:github-token]"
    assert row["metadata"] == {"env": {"AWS_ACCESS_KEY_ID": "[REDACTED:aws-access-key]",
                                       "db_password": "[REDACTED:password]"}}
    assert row["source"]["url"] == "https://ci:[REDACTED:url-credentials]@ci.acme.dev/job"
    assert prepared.entities[0].aliases == ("[REDACTED:github-token]",)
    assert prepared.redacted == {"aws-access-key": 1, "github-token": 2, "password": 1, "url-credentials": 1}
    assert gh not in json.dumps(row) and ak not in json.dumps(row)


def test_the_content_hash_is_the_hash_of_what_is_stored() -> None:
    from memory_core.write.rows import content_hash

    prepared = prepare_add(item(f"token {Fake(4).github_classic()}"), LIMITS)
    assert prepared.row.node.content_hash == content_hash(prepared.row.content)
    assert prepared.row.node.content_len == len(prepared.row.content)


def test_reject_names_fields_kinds_and_spans_but_never_the_secret() -> None:
    f = Fake(5)
    gh, pw = f.github_classic(), f.password()
    text = f"GITHUB_TOKEN={gh}"
    with pytest.raises(SecretRejectedError) as caught:
        prepare_add(item(text, metadata={"db": {"password": pw}}), LIMITS, guard=SecretGuard("reject"))
    err = caught.value
    assert err.code == "SECRET_REJECTED"
    dumped = json.dumps(err.to_dict()) + str(err)
    assert gh not in dumped and pw not in dumped
    assert err.fields["kinds"] == {"github-token": 1, "password": 1}
    assert {"field": "content", "kind": "github-token", "start": 13, "end": 13 + len(gh)} in err.fields["secrets"]
    assert {"field": "metadata.db.password", "kind": "password", "start": 0, "end": len(pw)} in err.fields["secrets"]


def test_a_secret_used_as_a_metadata_key_is_redacted_and_never_named_in_a_path() -> None:
    gh = Fake(6).github_classic()
    with pytest.raises(SecretRejectedError) as caught:
        prepare_add(item("fine", metadata={gh: 1}), LIMITS, guard=SecretGuard("reject"))
    assert gh not in json.dumps(caught.value.to_dict())
    assert prepare_add(item("fine", metadata={gh: 1}), LIMITS).row.node.metadata == {"[REDACTED:github-token]": 1}


def test_reject_refuses_before_a_later_validation_error_could_quote_a_value() -> None:
    gh = Fake(8).github_classic()
    relations = [{"from": gh, "to": "nowhere", "label": "x"}]  # would be INVALID_INPUT quoting the name
    with pytest.raises(SecretRejectedError):
        prepare_add(item("fine", relations=relations), LIMITS, guard=SecretGuard("reject"))


def test_allow_stores_the_text_as_given() -> None:
    gh = Fake(9).github_classic()
    prepared = prepare_add(item(f"token {gh}", metadata={"password": "hunter2!x"}), LIMITS, guard=SecretGuard("allow"))
    assert gh in prepared.row.content and prepared.row.node.metadata == {"password": "hunter2!x"}
    assert prepared.redacted == {}


def test_a_summary_is_redacted_under_reject_too_since_nobody_asked_for_it() -> None:
    ak = Fake(10).aws_access_key()
    assert SecretGuard("reject").summary(f"rotated {ak}") == "rotated [REDACTED:aws-access-key]"
    assert SecretGuard("allow").summary(f"rotated {ak}") == f"rotated {ak}"


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="redact, reject, allow"):
        SecretGuard("maybe")  # type: ignore[arg-type]


def test_scan_reports_nothing_for_clean_text() -> None:
    scan = Scan()
    assert SecretGuard().text("a plain note about the deploy", "content", scan) == "a plain note about the deploy"
    assert scan.found == [] and SecretGuard().finish(scan) == {}


def test_the_keyword_list_is_detect_secrets_own() -> None:
    from detect_secrets.plugins.keyword import DENYLIST

    from memory_core.secret_guard.values import KEYWORD_DENYLIST

    assert tuple(KEYWORD_DENYLIST) == tuple(DENYLIST)


def test_importing_the_guard_loads_no_detect_secrets_until_the_first_scan() -> None:
    import subprocess
    import sys

    code = ("import sys, memory_core.secret_guard as g; a = 'detect_secrets' in sys.modules; "
            "g.detect('a note on the deploy'); print(a, 'detect_secrets' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["False", "True"]
