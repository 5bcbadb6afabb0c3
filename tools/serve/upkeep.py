"""Upkeep a serving process runs in the background: the consolidation schedule (``consolidation.every_s``).

Off by default. When on, :func:`start_upkeep` starts a :class:`memory_core.operator.ConsolidationSchedule`
over the server's stores (a wake-up before they are open is skipped), its runs counted in ``/metrics`` when
metrics are on; the server stops it when it stops (it waits for the merge in progress).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_core import Settings
from memory_core.observe import Observer
from tools.mcp.stores import Stores
from tools.serve.probes import open_core_of

if TYPE_CHECKING:
    from memory_core.operator import ConsolidationSchedule, OperatorParts


def start_upkeep(settings: Settings, stores: Stores, observer: Observer) -> ConsolidationSchedule | None:
    """Start the consolidation schedule if ``consolidation.every_s`` asks for one (None: it is off)."""
    every_s = settings.consolidation.every_s
    if every_s <= 0:
        return None
    from memory_core.operator import ConsolidationSchedule  # numpy and the plan load only when it is on

    def parts_of() -> OperatorParts | None:
        core = open_core_of(stores)
        return None if core is None else core.operator_parts()

    metrics = observer.metrics
    schedule = ConsolidationSchedule(parts_of, every_s, tenant_mode=settings.logs.tenant,
                                     on_run=None if metrics is None else metrics.record_consolidation)
    schedule.start()
    return schedule
