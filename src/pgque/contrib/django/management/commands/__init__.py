"""``manage.py pgque_worker`` and ``manage.py pgque``."""
