"""pgque's benchmark suite: pgque next to PgQ, a SKIP LOCKED queue and peer libraries.

Run it with ``python -m benchmarks run``; see ``benchmarks/README.md``.
"""
