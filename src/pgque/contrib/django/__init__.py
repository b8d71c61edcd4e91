"""pgque for Django: ``INSTALLED_APPS += ["pgque.contrib.django"]``.

- ``manage.py migrate`` installs and upgrades pgque, and creates the queues
  of ``settings.PGQUE["QUEUES"]`` (:mod:`pgque.contrib.django.conf`).
- :func:`send`, :func:`send_batch`, :func:`send_at` send on Django's
  connection, in its open transaction.
- :func:`consumer` declares consumers in an app's ``consumers.py``;
  ``manage.py pgque_worker`` runs them.
- ``pgque.contrib.django.tasks.PgqueBackend`` (Django 6) runs ``django.tasks``
  tasks enqueued in Django's transaction; ``pgque_worker`` runs them too.
- ``manage.py pgque ...`` runs the ``pgque`` command line on a database.
- ``manage.py check`` reports unusable databases and a missing or old pgque.

Install with ``pip install '.[django]'`` from a clone.
"""

from __future__ import annotations

from pgque.contrib.django.registry import DjangoConsumer, consumer
from pgque.contrib.django.sending import send, send_at, send_batch

__all__ = ["DjangoConsumer", "consumer", "send", "send_at", "send_batch"]
