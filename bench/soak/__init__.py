"""The soak: many agents writing and recalling over HTTP for a long time while the server is killed.

    python -m bench.soak.run [--backend sqlite|postgres] [--minutes 30] [--writers 32] [--recallers 8]
                             [--kill-every 180] [--embedder minilm|hash] [--out DIR] [--figure PNG]

- :mod:`bench.soak.agents` — the writers (each its own session, adding one turn a call with an
  idempotency key, retrying the same key until it is acknowledged) and the recallers, as JSON-RPC
  clients of the streamable HTTP endpoint, one connection each;
- :mod:`bench.soak.run` — the server (``memory-core serve --http``), SIGKILLed and started again every
  few minutes, its RSS and open descriptors sampled, then the store checked through the library:
  every acknowledged add present once with its content, doctor clean;
- :mod:`bench.soak.figure` — the per-minute figure (matplotlib) and table of docs/reliability.md.

``make soak`` runs it 30 minutes on each graph backend; ``tests/reliability/test_soak.py`` runs two
minutes of it in ``make test``.
"""
