"""pgque: a PostgreSQL queue built on PgQ's design, in plain PL/pgSQL.

Install the schema into a database with :func:`install` (the SQL ships inside
this package as one file, ``pgque/sql/pgque.sql``), send and receive with
:func:`connect` / :class:`PgqueClient` (asyncio: :func:`connect_async`), send
from many threads or tasks with :class:`Producer` / :class:`AsyncProducer`,
run handlers with :class:`Consumer` / :class:`AsyncConsumer` (several queues
by priority: :class:`MultiQueueConsumer`), and tick without pg_cron with
:class:`Ticker`.
"""

from pgque import errors as _errors
from pgque import records as _records
from pgque._consumer.options import ConsumerOptions
from pgque._version import __version__
from pgque.async_client import AsyncPgqueClient, connect_async
from pgque.async_consumer import AsyncConsumer
from pgque.async_multi_consumer import AsyncMultiQueueConsumer
from pgque.async_producer import AsyncProducer, AsyncProducerBatch
from pgque.client import PgqueClient, connect
from pgque.consumer import Consumer
from pgque.errors import *  # noqa: F403 (its classes; from_database_error is deleted below)
from pgque.health import Health, HealthCheck
from pgque.installer import install, installed_version, uninstall
from pgque.message import Event, Message
from pgque.multi_consumer import MultiQueueConsumer
from pgque.producer import Producer, ProducerBatch
from pgque.records import *  # noqa: F403 (the rows the client's calls return)
from pgque.ticker import Ticker

__all__ = [
    "AsyncConsumer",
    "AsyncMultiQueueConsumer",
    "AsyncPgqueClient",
    "AsyncProducer",
    "AsyncProducerBatch",
    "Consumer",
    "ConsumerOptions",
    "Event",
    "Health",
    "HealthCheck",
    "Message",
    "MultiQueueConsumer",
    "PgqueClient",
    "Producer",
    "ProducerBatch",
    "Ticker",
    "__version__",
    "connect",
    "connect_async",
    "install",
    "installed_version",
    "uninstall",
]
# The errors and the rows as their modules list them (one list each).
__all__ += _errors.__all__
__all__ += _records.__all__
__all__.remove("from_database_error")
__all__.sort()
del from_database_error  # noqa: F821 (pgque.errors.from_database_error, not exported here)
