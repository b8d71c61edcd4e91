"""pgque: a PostgreSQL queue built on PgQ's design, in plain PL/pgSQL.

Install the schema into a database with :func:`install` (the SQL ships inside
this package as one file, ``pgque/sql/pgque.sql``), send and receive with
:func:`connect` / :class:`PgqueClient` (asyncio: :func:`connect_async`), send
from many threads or tasks with :class:`Producer` / :class:`AsyncProducer`,
run handlers with :class:`Consumer` / :class:`AsyncConsumer` (several queues
by priority: :class:`MultiQueueConsumer`), and tick without pg_cron with
:class:`Ticker`.
"""

from pgque._consumer_options import ConsumerOptions
from pgque._version import __version__
from pgque.async_client import AsyncPgqueClient, connect_async
from pgque.async_consumer import AsyncConsumer
from pgque.async_multi_consumer import AsyncMultiQueueConsumer
from pgque.async_producer import AsyncProducer, AsyncProducerBatch
from pgque.client import PgqueClient, connect
from pgque.consumer import Consumer
from pgque.errors import (
    ConsumerGaveUp,
    PgqueAssertionFailed,
    PgqueBatchNotFound,
    PgqueConnectionError,
    PgqueConsumerNotFound,
    PgqueCorruption,
    PgqueError,
    PgqueFenced,
    PgqueInsertDisallowed,
    PgqueInstallError,
    PgqueInvalidArgument,
    PgqueMaintFailed,
    PgqueMessageNotFound,
    PgqueNotInstalledError,
    PgqueOperationRefused,
    PgquePoolerError,
    PgqueQueueNotFound,
    PgqueSchedulerUnavailable,
    PgqueTickerFailed,
    PgqueTickRefused,
    PgqueTriggerRefused,
    PgqueWrongConsumerKind,
)
from pgque.health import Health, HealthCheck
from pgque.installer import install, installed_version, uninstall
from pgque.message import Event, Message
from pgque.multi_consumer import MultiQueueConsumer
from pgque.producer import Producer, ProducerBatch
from pgque.records import (
    ComponentStatus,
    ConsumerStats,
    DeadLetter,
    DlqReplayResult,
    ErrorRateBucket,
    EventRecord,
    MetricSample,
    PartitionSlot,
    QueueStats,
    Schedule,
    SubconsumerStats,
    ThroughputBucket,
    WritePrivileges,
)
from pgque.ticker import Ticker

__all__ = [
    "AsyncConsumer",
    "AsyncMultiQueueConsumer",
    "AsyncPgqueClient",
    "AsyncProducer",
    "AsyncProducerBatch",
    "ComponentStatus",
    "Consumer",
    "ConsumerGaveUp",
    "ConsumerOptions",
    "ConsumerStats",
    "DeadLetter",
    "DlqReplayResult",
    "ErrorRateBucket",
    "Event",
    "EventRecord",
    "Health",
    "HealthCheck",
    "Message",
    "MetricSample",
    "MultiQueueConsumer",
    "PartitionSlot",
    "PgqueAssertionFailed",
    "PgqueBatchNotFound",
    "PgqueClient",
    "PgqueConnectionError",
    "PgqueConsumerNotFound",
    "PgqueCorruption",
    "PgqueError",
    "PgqueFenced",
    "PgqueInsertDisallowed",
    "PgqueInstallError",
    "PgqueInvalidArgument",
    "PgqueMaintFailed",
    "PgqueMessageNotFound",
    "PgqueNotInstalledError",
    "PgqueOperationRefused",
    "PgquePoolerError",
    "PgqueQueueNotFound",
    "PgqueSchedulerUnavailable",
    "PgqueTickRefused",
    "PgqueTickerFailed",
    "PgqueTriggerRefused",
    "PgqueWrongConsumerKind",
    "Producer",
    "ProducerBatch",
    "QueueStats",
    "Schedule",
    "SubconsumerStats",
    "ThroughputBucket",
    "Ticker",
    "WritePrivileges",
    "__version__",
    "connect",
    "connect_async",
    "install",
    "installed_version",
    "uninstall",
]
