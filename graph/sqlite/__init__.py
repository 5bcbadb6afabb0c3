"""The graph store on one SQLite file (:class:`graph.sqlite.store.SqliteGraphStore`)."""
