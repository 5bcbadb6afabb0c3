"""The PostgreSQL graph store at scale: counts, lexical search and reads over big tenants."""
