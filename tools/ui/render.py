"""HTML rendering: Jinja2 templates with autoescape on everything, and small SVG helpers.

Memory text is untrusted: every value reaches the page through ``{{ }}`` (escaped), never
``|safe``; the JavaScript reads data from JSON endpoints and writes it with ``textContent``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.responses import HTMLResponse

ENV = Environment(
    loader=PackageLoader("tools.ui", "templates"),
    autoescape=True,  # every template, whatever its name
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    title: str


def bars(values: list[int], labels: list[str], width: int = 180, height: int = 36) -> list[Bar]:
    """Bars of a small per-day chart, scaled to the largest value (at least 1 px when > 0)."""
    top = max(values, default=0) or 1
    step = width / max(1, len(values))
    out = []
    for i, (value, label) in enumerate(zip(values, labels, strict=True)):
        h = 0.0 if value == 0 else max(1.0, height * value / top)
        out.append(Bar(round(i * step, 2), round(height - h, 2), round(max(1.0, step - 1), 2), round(h, 2),
                       f"{label}: {value}"))
    return out


def human_bytes(n: int | None) -> str:
    if n is None:
        return "–"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def short_time(ts: str | None) -> str:
    """``2026-12-01T07:42:54.434916+00:00`` → ``2026-12-01 07:42:54``."""
    return "–" if not ts else ts.replace("T", " ")[:19]


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def query(**params: Any) -> str:
    """A query string of the non-None params (for links built in templates)."""
    return urlencode({k: v for k, v in params.items() if v is not None and v != ""})


ENV.filters.update(human_bytes=human_bytes, short_time=short_time, pretty_json=pretty_json)
ENV.globals.update(bars=bars, query=query)


def page(template: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    """Render a template into a response (the context always carries ``root``, the mount path)."""
    return HTMLResponse(ENV.get_template(template).render(**context), status_code=status)
