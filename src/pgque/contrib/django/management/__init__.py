"""Management commands: ``pgque_worker`` and ``pgque``."""
