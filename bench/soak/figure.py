"""The soak's figure and table: per-minute throughput and latencies, RSS and descriptors over time.

    python -m bench.soak.figure REPORT.json [REPORT.json …] --out docs/figures/soak.png

One column per report (a backend each), three panels: calls per second, p50/p95 latency (add and
recall), the server's RSS and open descriptors; the SIGKILLs are the dashed vertical lines.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

KILL_STYLE = {"color": "#b22222", "linestyle": "--", "linewidth": 0.8, "alpha": 0.6}


def _title(report: dict[str, Any]) -> str:
    c, t = report["config"], report["totals"]
    graph = "SQLite" if c["backend"] == "sqlite" else "PostgreSQL + chroma run"
    return (f"{graph}: {c['writers']} writers, {c['recallers']} recallers, {report['seconds'] / 60:.0f} min, "
            f"{t['kills']} SIGKILLs\n{t['acknowledged']:,} adds acknowledged: {t['lost']} lost, "
            f"{t['duplicated']} duplicated, {t['wrong']} wrong")


def draw(reports: dict[str, Any] | list[dict[str, Any]], path: Path) -> None:
    """Write the figure of one or more soak reports to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reports = [reports] if isinstance(reports, dict) else reports
    fig, axes = plt.subplots(3, len(reports), figsize=(7.5 * len(reports), 9.5), squeeze=False, sharex="col")
    for col, report in enumerate(reports):
        minutes = report["minutes"]
        xs = [m["minute"] - 0.5 for m in minutes]
        kills = [k / 60 for k in report["kills_at_s"]]
        top, mid, low = axes[0][col], axes[1][col], axes[2][col]
        top.plot(xs, [m["adds_per_s"] for m in minutes], marker="o", markersize=3, label="adds acknowledged / s")
        top.plot(xs, [m["recalls_per_s"] for m in minutes], marker="s", markersize=3, label="recalls / s")
        top.set_ylabel("calls per second")
        top.set_ylim(bottom=0)
        top.set_title(_title(report), fontsize=10)
        for name, style in (("add", "-"), ("recall", ":")):
            for pct, color in (("p50", "#1f77b4"), ("p95", "#ff7f0e")):
                ys = [m[f"{name}_{pct}_ms"] for m in minutes]
                mid.plot(xs, ys, linestyle=style, color=color, marker=".", label=f"{name} {pct}")
        mid.set_yscale("log")
        mid.set_ylabel("latency, ms (log)")
        samples = report["samples"]
        ts = [s["t"] / 60 for s in samples]
        low.plot(ts, [s["rss_mb"] for s in samples], color="#2ca02c", label="RSS, MB")
        low.set_ylabel("server RSS, MB")
        low.set_xlabel("minute")
        twin = low.twinx()
        twin.plot(ts, [s["fds"] for s in samples], color="#9467bd", label="open descriptors")
        twin.set_ylabel("open descriptors")
        twin.set_ylim(bottom=0)
        low.set_ylim(bottom=0)
        for ax in (top, mid, low):
            for k in kills:
                ax.axvline(k, **KILL_STYLE)
            ax.grid(alpha=0.3)
        top.legend(loc="lower left", fontsize=8)
        mid.legend(loc="upper left", fontsize=8, ncol=2)
        lines = low.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
        low.legend(lines, [str(line.get_label()) for line in lines], loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def print_report(report: dict[str, Any]) -> None:
    c, t, f = report["config"], report["totals"], report["flatness"]
    print(f"\nsoak on {c['backend']}: {c['writers']} writers, {c['recallers']} recallers, {report['seconds']:.0f} s, "
          f"{c['embedder']}, {report['machine']['cores']} cores, load {report['machine']['load_at_start']} -> "
          f"{report['machine']['load_at_end']}")
    print("minute  adds/s  add p50/p95 ms  recalls/s  recall p50/p95 ms  failed  kills  RSS MB  fds  load")
    for m in report["minutes"]:
        print(f"{m['minute']:>6}  {m['adds_per_s']:>6}  {m['add_p50_ms']!s:>6} / {m['add_p95_ms']!s:<6}  "
              f"{m['recalls_per_s']:>9}  {m['recall_p50_ms']!s:>7} / {m['recall_p95_ms']!s:<7}  "
              f"{m['failed_calls']:>6}  {m['kills']:>5}  {m['rss_mb']!s:>6}  {m['fds']!s:>3}  {m['load']}")
    print(f"acknowledged {t['acknowledged']}, rows {t['rows']}: lost {t['lost']}, duplicated {t['duplicated']}, "
          f"wrong {t['wrong']}; applied but unacknowledged {t['applied_unacknowledged']}; replayed by key "
          f"{t['replayed_by_key']}; doctor findings {t['doctor_findings']}; foreign rows {t['foreign_rows']}")
    print(f"kills {t['kills']}, downtime s {t['downtime_s']}; failed calls {t['failed_calls']}; tool errors "
          f"{t['tool_errors']}")
    print(f"server /metrics means: {report.get('server_metrics')}")
    print(f"flatness: descriptors +{f['fd_growth_max']} at most within a life (max {f['fds_max']}); RSS "
          f"+{f['rss_growth_max_mb']} MB at most within a life (max {f['rss_max_mb']} MB)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    draw([json.loads(p.read_text(encoding="utf-8")) for p in args.reports], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
