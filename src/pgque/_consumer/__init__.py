"""The consumer's core, shared by :class:`pgque.Consumer`, :class:`pgque.AsyncConsumer`
and the multi-queue consumers (its modules are private; the public classes are in
:mod:`pgque.async_consumer` and its generated twin :mod:`pgque.consumer`).

* :mod:`~pgque._consumer.options`: every option, its default and its check.
* :mod:`~pgque._consumer.async_runner`: the loop (connect, wait, poll, reconnect, stop).
* :mod:`~pgque._consumer.async_sources`: where batches come from, one batch source per
  mode (plain, cooperative member, partition slots).
* :mod:`~pgque._consumer.async_batch`: the plain mode's one-trip batch (BEGIN and receive).
* :mod:`~pgque._consumer.async_slots`: partition slot leases.
* :mod:`~pgque._consumer.async_handlers`: the handler registry and the running of a batch.
* :mod:`~pgque._consumer.async_settle`: acks and nacks.
* :mod:`~pgque._consumer.dispatch`: outcomes, lanes, deadlines, the rate limiter.
* :mod:`~pgque._consumer.every`: ``@consumer.every`` schedules.
* the rules, without I/O: :mod:`~pgque._consumer.policy`.

Each ``async_*`` module is the source of a generated sync twin without the prefix
(``tools/async_to_sync.py``).
"""
