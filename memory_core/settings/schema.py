"""Settings: defaults, an optional TOML file, then ``MEMORY_CORE_<SECTION>_<KEY>`` env vars.

The sections are plain pydantic models, cheap to import; :func:`memory_core.settings.load_settings`
layers them through pydantic-settings (:mod:`memory_core.settings.sources`), which imports this
module and never the reverse.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memory_core.scopes import DEFAULT_SCOPE, Scope
from memory_core.validation import NAME_PATTERN, TENANT_PATTERN


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class StorageSettings(_Section):
    data_dir: str = ".memory-core"
    chroma: Literal["embedded", "http"] = "embedded"
    chroma_host: str = "127.0.0.1"
    chroma_port: int = Field(8000, ge=1, le=65535)
    chroma_ssl: bool = False
    chroma_auth_header: str | None = None
    chroma_auth_token_env: str | None = None
    chroma_retries: int = Field(3, ge=0, le=20)
    collection_prefix: str = Field("mc", pattern=r"^[a-z][a-z0-9]{0,15}$")
    vector_deadline_s: float = Field(30.0, gt=0, le=3600)
    # what the embedded Chroma's loaded indexes may take (estimated; 0: no bound; see memory_core/vectors/cache.py)
    vector_cache_mb: int = Field(4096, ge=0, le=16_777_216)
    # a server loads this many tenants' vector indexes right after it starts (its bound tenant, else the
    # newest), within vector_cache_mb; 0: each loads on its first call (see memory_core/vectors/preload.py)
    preload_tenants: int = Field(8, ge=0, le=100_000)
    # memory nodes the graph store keeps in its LRU (≈ 0.5 kB each); reads past it go to the indexes
    graph_cache_nodes: int = Field(50_000, ge=0, le=10_000_000)
    # the durable graph: one SQLite file in data_dir (embedded, one process), or PostgreSQL (replicas)
    graph: Literal["sqlite", "postgres"] = "sqlite"
    postgres_dsn: str | None = None
    postgres_pool_size: int = Field(8, ge=1, le=256)
    postgres_lease_s: float = Field(30.0, ge=1, le=3600)  # a dead replica's journal is recovered after this


class EmbeddingSettings(_Section):
    provider: Literal["minilm", "fastembed", "hash", "litellm"] = "minilm"
    model: str | None = None
    # provider "fastembed": a folder holding the model's files (loaded as is, nothing downloaded), and
    # where fastembed keeps the models it downloads (None: $FASTEMBED_CACHE_PATH, else ~/.cache/memory-core/fastembed)
    model_path: str | None = None
    cache_dir: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    batch_size: int = Field(32, ge=1, le=1024)
    dimension: int = Field(64, ge=8, le=4096)
    # threads of one local model run (None: onnxruntime's default, every core); 1 suits a server answering
    # several agents at once: runs then never wait on each other's threads (see docs/performance.md, Scale)
    threads: int | None = Field(None, ge=1, le=256)

    @field_validator("provider", mode="before")
    @classmethod
    def _removed_providers(cls, value: object) -> object:
        if value == "mpnet":
            raise ValueError(
                "'mpnet' was removed (its hand-built model pulled torch and CUDA into installs); use "
                "provider = \"fastembed\" with a model of fastembed's catalogue (e.g. model = "
                "\"BAAI/bge-base-en-v1.5\"), or the default \"minilm\"")
        return value


class LimitSettings(_Section):
    max_content_chars: int = Field(100_000, ge=1)
    max_metadata_bytes: int = Field(16_384, ge=2)
    max_metadata_depth: int = Field(8, ge=1, le=64)
    duplicate_window_s: float = Field(600.0, ge=0)
    max_batch: int = Field(1000, ge=1)


class WriteSettings(_Section):
    """Group commit of single adds (see :mod:`memory_core.write.group_commit`)."""

    # most single adds written as one batch (one embedding call, one Chroma add, one graph transaction);
    # 1: each add is written alone, as before group commit
    batch_max: int = Field(32, ge=1, le=1000)
    # how long a batch's leader waits, at most, for the adds it expects (ones being validated, and right after a
    # batch, that batch's other callers coming back); a lone caller never waits
    coalesce_ms: float = Field(10.0, ge=0, le=1000)


class HygieneSettings(_Section):
    """Write-time hygiene (see :mod:`memory_core.write.hygiene`): rows that carry no information are not stored."""

    # acknowledgements, heartbeats, a harness's bookkeeping, empty rows and an agent's exact repeats are
    # answered ``stored: false`` with a reason instead of being stored
    enabled: bool = True
    # an agent's row whose words repeat its own row of the same session, visibility and project written at most
    # this long before (or after) is a repeat; 0: repeats are stored
    repeat_window_s: float = Field(600.0, ge=0, le=86_400 * 30)
    # per tenant: true or false overrides ``enabled`` for that tenant
    tenants: dict[str, bool] = Field(default_factory=dict)

    def on_for(self, tenant: str) -> bool:
        """Whether hygiene screens ``tenant``'s writes."""
        return self.tenants.get(tenant, self.enabled)


class RecallSettings(_Section):
    preview_chars: int = Field(500, ge=0)
    full_content_budget_chars: int = Field(200_000, ge=1)
    scan_window: int = Field(500, ge=10)
    default_limit: int = Field(10, ge=1)
    preset: str = "balanced"
    recency_weight: float = Field(0.2, ge=0, le=1)
    recency_half_life_days: float = Field(30.0, gt=0)
    type_recency_weight: float = Field(0.5, ge=0, le=1)
    type_recency_half_life_days: float = Field(7.0, gt=0)
    quality_gate: float | None = Field(None, ge=0, le=1)


class RecoverSettings(_Section):
    turns: int = Field(20, ge=1, le=100)
    turn_preview_chars: int = Field(200, ge=0)
    turns_budget_chars: int = Field(5000, ge=400)
    summary_wait_s: float = Field(2.0, ge=0)


def _agent_name(value: str | None) -> str | None:
    if value is not None and not NAME_PATTERN.match(value):
        raise ValueError("an agent id is 1-128 printable characters without whitespace")
    return value


def _tenant_name(value: str | None) -> str | None:
    if value is not None and not TENANT_PATTERN.match(value):
        raise ValueError("a tenant is 1-128 of A-Z a-z 0-9 _ . : @ -, starting with a letter or digit")
    return value


class TokenBinding(_Section):
    """What one bearer token binds: a tenant, optionally the one agent it acts as, and what it
    may do (``scope``; an entry without one is ``write``, see :mod:`memory_core.scopes`)."""

    tenant: str
    agent: str | None = None
    scope: Scope = DEFAULT_SCOPE

    _check_agent = field_validator("agent")(_agent_name)


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    tenant: str | None = None
    agent: str | None = None
    # what a connection no token binds may do (stdio, HTTP without tokens): read | write | admin
    scope: Scope = DEFAULT_SCOPE
    # sha256(token) -> "tenant" or {tenant = "...", agent = "...", scope = "..."}; a plain string binds
    # the tenant only, with the default scope (write)
    tokens: dict[str, TokenBinding] = Field(default_factory=dict)
    mcp_limit_cap: int = Field(50, ge=1)
    operator_token_sha256: str | None = Field(None, pattern=r"^[0-9a-fA-F]{64}$")
    max_request_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    max_inflight_bytes: int = Field(32 * 1024 * 1024, ge=1024)
    body_timeout_s: float = Field(30.0, gt=0, le=3600)  # a stalled request body is given up after this long
    # stdio launches share one background HTTP server per data directory; it stops after this long unused
    shared_idle_s: float = Field(300.0, gt=0, le=86_400)

    _check_agent = field_validator("agent")(_agent_name)
    _check_tenant = field_validator("tenant")(_tenant_name)

    @field_validator("tokens", mode="before")
    @classmethod
    def _tenant_only_tokens(cls, value: object) -> object:
        """Hashes in lower case, each token bound once; the original form ``"<sha256>" = "tenant"`` stays
        valid (it binds no agent). One token listed twice (its hash in two cases, or in the file and the
        environment) would bind whichever entry came last: refused, whatever the two entries say."""
        if not isinstance(value, Mapping):
            return value
        tokens: dict[object, object] = {}
        for key, entry in value.items():
            digest = key.lower() if isinstance(key, str) else key
            if digest in tokens:
                raise ValueError(f"the token whose sha256 is {str(digest)[:12]}… is listed twice; bind each "
                                 "token once (hashes are compared in lower case)")
            tokens[digest] = {"tenant": entry} if isinstance(entry, str) else entry
        return tokens


class OperatingContextSettings(_Section):
    agents: dict[str, str] = Field(default_factory=dict)


class ModelProviderSettings(_Section):
    """The ``[model_provider]`` section, also what the summary provider is built from.

    ``api_key_env`` names the environment variable holding the key; the key itself never lives in
    config. ``timeout_s`` bounds one HTTP attempt, ``total_timeout_s`` bounds all attempts plus the
    back-off sleeps between them.
    """

    enabled: bool = False
    model: str = "openai/gpt-4o-mini"
    api_base: str | None = None
    api_key_env: str | None = None
    timeout_s: float = Field(10.0, gt=0)
    max_retries: int = Field(2, ge=0, le=10)
    max_input_chars: int = Field(12_000, ge=100)
    max_summary_chars: int = Field(280, ge=20)
    total_timeout_s: float = Field(30.0, gt=0)
    # also ask the model for each added memory's entities and relations, on a background worker
    # (never blocking or failing an add); the deterministic extractor runs either way
    extract_entities: bool = False


PoisoningPolicy = Literal["flag", "quarantine", "reject"]


class SecuritySettings(_Section):
    # what a write holding secrets (API keys, tokens, private keys, passwords, credentials in URLs) does:
    # "redact" them to [REDACTED:<kind>], "reject" the write (SECRET_REJECTED), or "allow" (store as given)
    secrets: Literal["redact", "reject", "allow"] = "redact"
    # what a write holding instructions aimed at a model does (see memory_core/write/poisoning.py): "flag" it
    # (stored, returned with its flags), "quarantine" it (stored, recalled only when asked), "reject" it
    # (POISONING_REJECTED, nothing written)
    poisoning: PoisoningPolicy = "flag"
    # per tenant: a policy that overrides ``poisoning`` for that tenant
    poisoning_tenants: dict[str, PoisoningPolicy] = Field(default_factory=dict)

    def poisoning_for(self, tenant: str) -> PoisoningPolicy:
        """The poisoning policy of ``tenant``."""
        return self.poisoning_tenants.get(tenant, self.poisoning)


class HooksSettings(_Section):
    """``memory-core hook``: what a harness's lifecycle events capture and inject (docs/harness.md)."""

    budget_tokens: int = Field(1500, ge=200, le=20_000)
    turns: int = Field(4, ge=0, le=100)
    relevant: int = Field(3, ge=0, le=20)
    min_confidence: float = Field(0.3, ge=0, le=1)
    inject_on_startup: bool = True
    prompt_injection: bool = False
    prompt_budget_tokens: int = Field(400, ge=100, le=5_000)
    prompt_min_confidence: float = Field(0.55, ge=0, le=1)
    agent: str = "claude-code"
    store: Literal["auto", "shared", "direct"] = "auto"
    timeout_s: float = Field(20.0, gt=0, le=600)
    turn_chars: int = Field(8000, ge=200, le=100_000)
    max_read_mb: int = Field(16, ge=1, le=1024)

    _check_agent = field_validator("agent")(_agent_name)


class MetricsSettings(_Section):
    """Prometheus metrics at ``/metrics`` (:mod:`memory_core.observe.metrics`); never open by default."""

    enabled: bool = False
    # None: /metrics on the server's own port, behind a token (metrics.token_sha256, or an admin-scope one of
    # [server.tokens] while tenant_labels is 0); a port: a listener of its own on metrics.host (0: any free port)
    port: int | None = Field(None, ge=0, le=65535)
    host: str = "127.0.0.1"
    token_sha256: str | None = Field(None, pattern=r"^[0-9a-fA-F]{64}$")
    # per-tenant series for at most this many tenants (the first seen; the rest share "_other"); 0: no tenant labels
    tenant_labels: int = Field(0, ge=0, le=1000)
    store_counts_s: float = Field(60.0, ge=1, le=86_400)  # rows and vectors per store are counted at most this often


class LogSettings(_Section):
    """What a serving process logs on stderr (:mod:`memory_core.observe.logs`); never content or secrets."""

    format: Literal["text", "json"] = "text"
    level: Literal["debug", "info", "warning", "error"] = "warning"
    # how a call's tenant appears in log lines and spans: a sha256 prefix, as is, or not at all
    tenant: Literal["hash", "plain", "omit"] = "hash"


class TracingSettings(_Section):
    """OpenTelemetry spans per tool call and stage (:mod:`memory_core.observe.tracing`, extra ``otel``)."""

    enabled: bool = False
    # OTLP/HTTP traces endpoint; None: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, the default
    endpoint: str | None = None
    service_name: str = Field("memory-core", min_length=1, max_length=200)
    sample_ratio: float = Field(1.0, ge=0, le=1)


class ConsolidationSettings(_Section):
    """How ``memory-core consolidate`` tells near-duplicates (see memory_core.operator.consolidation)."""

    # both must hold: near in meaning (cosine of the stored vectors) and in words (Jaccard of the word sets);
    # rows whose numbers or negations differ are never merged, however near
    min_cosine: float = Field(0.9, ge=0, le=1)
    min_overlap: float = Field(0.6, ge=0, le=1)
    # most rows one canonical memory stands for (its provenance lives in its metadata); a rerun merges canonicals
    max_group: int = Field(40, ge=2, le=200)
    # a serving process (memory-core serve) runs the same consolidation over every tenant this often, in a
    # background thread, one merge per writer-lock hold; 0 (the default): never, only `memory-core consolidate`
    every_s: float = Field(0, ge=0)
    # the canonical's text written by [model_provider]'s model from the members' texts (opt-in, fail-soft: a
    # failing, slow or unfaithful answer leaves the LLM-free text and says why); each answer within model_timeout_s
    model_canonical: bool = False
    model_timeout_s: float = Field(20.0, gt=0)


class RetentionSettings(_Section):
    """What ``memory-core retention apply`` archives (see memory_core.operator.retention)."""

    # memory type -> days: current rows of that type older than this leave recall and the vector index
    # (they stay in the graph, exports and check_memory, and can be restored); empty: nothing is archived
    archive_after_days: dict[str, float] = Field(default_factory=dict)


class Settings(_Section):
    storage: StorageSettings = Field(default_factory=StorageSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    write: WriteSettings = Field(default_factory=WriteSettings)
    hygiene: HygieneSettings = Field(default_factory=HygieneSettings)
    recall: RecallSettings = Field(default_factory=RecallSettings)
    recover: RecoverSettings = Field(default_factory=RecoverSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    operating_context: OperatingContextSettings = Field(default_factory=OperatingContextSettings)
    model_provider: ModelProviderSettings = Field(default_factory=ModelProviderSettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    logs: LogSettings = Field(default_factory=LogSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    hooks: HooksSettings = Field(default_factory=HooksSettings)
    consolidation: ConsolidationSettings = Field(default_factory=ConsolidationSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
