"""Settings layered through pydantic-settings: what fails at start, what it suggests, what it costs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memory_core.errors import ConfigError
from memory_core.settings import load_settings
from memory_core.settings.schema import ModelProviderSettings, Settings
from testbed.paths import ROOT


@pytest.mark.parametrize(("name", "meant"), [
    ("MEMORY_CORE_DATA_DIR", "MEMORY_CORE_STORAGE_DATA_DIR"),
    ("MEMORY_CORE_PREVIEW_CHARS", "MEMORY_CORE_RECALL_PREVIEW_CHARS"),
    ("MEMORY_CORE_RECALL_PREVIEW_CHAR", "MEMORY_CORE_RECALL_PREVIEW_CHARS"),
    ("MEMORY_CORE_TENNANT", "MEMORY_CORE_TENANT"),
])  # fmt: skip
def test_a_near_miss_names_the_variable_it_probably_meant(name: str, meant: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(environ={name: "1"})
    assert err.value.code == "CONFIG_INVALID" and err.value.fields["key"] == name
    assert err.value.message.endswith(f"did you mean {meant}?")


def test_a_far_miss_only_says_there_is_no_such_setting() -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(environ={"MEMORY_CORE_ZZZZ": "1"})
    assert "no such setting" in err.value.message and "did you mean" not in err.value.message


@pytest.mark.parametrize("tenant", ["has space", "-leading", "x" * 129, "a/b"])
def test_an_invalid_memory_core_tenant_fails_at_start(tenant: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(environ={"MEMORY_CORE_TENANT": tenant})
    assert err.value.code == "CONFIG_INVALID" and err.value.fields["key"] == "MEMORY_CORE_TENANT"


def test_an_invalid_tenant_in_the_file_fails_naming_its_key(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[server]\ntenant = "two words"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, environ={})
    assert err.value.fields["key"] == "server.tenant"


def test_layers_apply_in_order_file_then_environment_then_overrides(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[recall]\npreview_chars = 300\nscan_window = 800\n[server]\ntenant = "filed"\n')
    env = {"MEMORY_CORE_CONFIG": str(cfg), "MEMORY_CORE_RECALL_PREVIEW_CHARS": "200", "MEMORY_CORE_TENANT": "envd"}
    s = load_settings(environ=env, overrides={"recall": {"preview_chars": 100}})
    assert (s.recall.preview_chars, s.recall.scan_window, s.server.tenant) == (100, 800, "envd")
    assert type(s) is Settings  # the library sees the plain model, whatever loaded it


def test_sections_with_underscores_and_keys_with_underscores_map_from_one_variable() -> None:
    s = load_settings(environ={"MEMORY_CORE_MODEL_PROVIDER_TOTAL_TIMEOUT_S": "12.5",
                               "MEMORY_CORE_OPERATING_CONTEXT_AGENTS": '{"alice": "alpha"}'})  # fmt: skip
    assert s.model_provider.total_timeout_s == 12.5 and s.operating_context.agents == {"alice": "alpha"}


def test_an_empty_variable_unsets_an_optional_setting(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[recall]\nquality_gate = 0.4\n')
    assert load_settings(cfg, environ={"MEMORY_CORE_RECALL_QUALITY_GATE": ""}).recall.quality_gate is None


def test_a_missing_or_broken_file_fails_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml", environ={})
    bad = tmp_path / "bad.toml"
    bad.write_text("[recall\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(bad, environ={})


def test_the_summary_provider_reads_the_one_model_provider_section() -> None:
    from memory_core.settings.schema import ModelProviderSettings as SummarySettings

    assert SummarySettings is ModelProviderSettings
    assert isinstance(load_settings(environ={}).model_provider, ModelProviderSettings)


def test_importing_the_config_does_not_import_pydantic_settings() -> None:
    """pydantic-settings (~70-90 ms) loads when settings are loaded, not when the module is imported."""
    probe = "import sys, memory_core.settings.schema; print('pydantic_settings' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.slow
def test_the_stdio_server_refuses_to_start_with_a_malformed_tenant(tmp_path: Path) -> None:
    from testbed.mcp_harness import SERVER_COMMAND, server_env
    from tools.cli.common import EXIT_CONFIG

    proc = subprocess.run(
        [sys.executable, *SERVER_COMMAND, "--data-dir", str(tmp_path / "data")],
        cwd=ROOT, env=server_env(MEMORY_CORE_TENANT="two words"), capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == EXIT_CONFIG
    assert proc.stderr.startswith("memory-core: CONFIG_INVALID: MEMORY_CORE_TENANT") and "Traceback" not in proc.stderr
    assert not (tmp_path / "data").exists()
