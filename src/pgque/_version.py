"""The pgque version, read by the build (hatch) and tools/build_sql.py."""

__version__ = "0.1.0"
