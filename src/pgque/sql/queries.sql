-- Every statement the Python package sends, one named statement per block
-- (the installer's pgque.sql aside; SQL that must be dynamic is composed with
-- psycopg.sql from these blocks).
--
-- Each is a thin call of a pgque.* function: the logic lives in the SQL API.
-- pgque/_queries.py reads this file once; `-- name: <key>` starts a block.
-- The texts of upstream pgque-py's client are kept exactly (its tests look
-- at them), with psycopg's %s placeholders.

-- The one send path (pgque/_send_plan.py): the clients and the producers send
-- through this one family. The payload goes as jsonb (the client with a JSON
-- serializer: validated and stored canonically), as json text (a JSON text
-- holding a \u0000 escape, which jsonb cannot hold: validated, kept as encoded)
-- or as text (the producers, RAW_TEXT: verbatim). Batch arrays are bound in
-- binary (%b), much cheaper than array literals; the text forms (%s) are for
-- connections binding on the client (cursor_factory=ClientCursor, e.g. behind a
-- pooler), which cannot send binary parameters.

-- name: send
select pgque.send(%s, %s::jsonb)

-- name: send_typed
select pgque.send(%s, %s, %s::jsonb)

-- name: send_text
select pgque.send(%s, %s, %s::text)

-- name: send_extras
select pgque.send(%s, %s, %s::jsonb, %s, %s, %s, %s)

-- name: send_json_text_extras
select pgque.send(%s, %s, %s::json::text, %s, %s, %s, %s)

-- name: send_text_extras
select pgque.send(%s, %s, %s::text, %s, %s, %s, %s)

-- name: send_batch
select pgque.send_batch(%s, %s, %s::jsonb[])

-- name: send_batch_binary
-- Each text parsed as jsonb and printed back: what the jsonb[] overload
-- stores, without building the jsonb[] array (a third less work a row).
select pgque.send_batch(%s, %s, array(select pg_catalog.unnest(%b::text[])::jsonb::text))

-- name: send_batch_json_array
-- A client's batch of plain JSON values (no str, null or model) as one JSON
-- array the server splits: one encoding and one parse instead of one per payload.
-- The set-returning function in the select list gives the elements in order,
-- each printed as jsonb prints it: the text the jsonb[] overload would store.
select pgque.send_batch(%s, %s, array(select pg_catalog.jsonb_array_elements(%s::jsonb)::text))

-- name: send_batch_json_array_text
-- The same for the producers (text storage): json (not jsonb) keeps each
-- element's text as the client wrote it, which is what is stored.
select pgque.send_batch(%s, %s, array(select pg_catalog.json_array_elements(%s::json)::text))

-- name: send_batch_json_text
select pgque.send_batch(%s, %s, %s::json[]::text[])

-- name: send_batch_json_text_binary
select pgque.send_batch(%s, %s, %b::text[]::json[]::text[])

-- name: send_batch_text
select pgque.send_batch(%s, %s, %s::text[])

-- name: send_batch_text_binary
select pgque.send_batch(%s, %s, %b::text[])

-- name: send_batch_text_extras
-- Per-message types and extras (parallel arrays; a NULL array: all NULL).
select pgque.send_batch(%s, %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[])

-- name: send_batch_text_extras_binary
select pgque.send_batch(%s, %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[])

-- name: send_at
select pgque.send_at(%s, %s, %s::jsonb, %s::timestamptz)

-- name: send_at_json_text
select pgque.send_at(%s, %s, %s::json::text, %s::timestamptz)

-- name: send_at_text
select pgque.send_at(%s, %s, %s::text, %s::timestamptz)

-- name: send_after
select pgque.send_at(%s, %s, %s::jsonb, pg_catalog.now() + %s::interval)

-- name: send_after_json_text
select pgque.send_at(%s, %s, %s::json::text, pg_catalog.now() + %s::interval)

-- name: send_after_text
select pgque.send_at(%s, %s, %s::text, pg_catalog.now() + %s::interval)

-- name: subscribe
select pgque.subscribe(%s, %s)

-- name: unsubscribe
select pgque.unsubscribe(%s, %s)

-- Run once on a consumer's connection: allocates and frees 1 MB in the backend.
-- glibc's malloc then raises its trim threshold (to twice the largest chunk it
-- freed), so the backend keeps its heap between batches; with the default of
-- 128 kB it hands a batch's memory back to the kernel after every batch and
-- faults it in again for the next one (tests/sdk/test_consumer_backend_heap.py).
-- name: keep_backend_heap
select pg_catalog.length(pg_catalog.repeat('x', 1048576))

-- name: receive
select * from pgque.receive(%s, %s, %s)

-- A consumer's batch, opened in one round trip with the simple protocol
-- (pgque/_async_batch.py): these statements are composed with literals,
-- not parameters. The tick (when the consumer ticks its queue itself) is a
-- transaction of its own, committed asynchronously as the ticker's ticks
-- are, that arms the producers' wakeup first (queue, max wait). It begins
-- explicitly: a COMMIT that ends the implicit transaction of a
-- multi-statement query string makes the server log "WARNING: there is no
-- transaction in progress" (tests/sdk/test_quiet_log.py).
-- name: batch_tick
begin;
select pgque._consumer_tick({queue}, {max_wait}::interval),
       pg_catalog.set_config('synchronous_commit', 'off', true);
commit

-- The batch's transaction, left open for the handlers and the ack.
-- name: batch_begin_receive
begin;
select * from pgque.receive({queue}, {consumer}, {max_messages})

-- The batch's ack and the COMMIT that ends its transaction, in one round trip
-- (the ack's count is the first result).
-- name: batch_ack_commit
select pgque.ack({batch_id});
commit

-- name: batch_rest
select ev_id, %s::bigint, ev_type, ev_data, ev_retry, ev_time,
       ev_extra1, ev_extra2, ev_extra3, ev_extra4
  from pgque.get_batch_events(%s)
 where ev_id > %s

-- name: ack
select pgque.ack(%s)

-- name: nack
select pgque.nack(%s, ROW(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)::pgque.message, %s::interval, %s)

-- name: ticker
select pgque.ticker(%s)

-- name: ticker_all
select pgque.ticker()

-- name: force_next_tick
select pgque.force_next_tick(%s)

-- name: subscribe_subconsumer
select pgque.subscribe_subconsumer(%s, %s, %s)

-- name: unsubscribe_subconsumer
select pgque.unsubscribe_subconsumer(%s, %s, %s, %s)

-- name: receive_coop
select * from pgque.receive_coop(%s, %s, %s, %s, %s::interval)

-- name: touch_subconsumer
select pgque.touch_subconsumer(%s, %s, %s)

-- name: scheduler
select scheduler, ticker_job_id, maint_job_id from pgque.config

-- name: tick_period_ms
select tick_period_ms from pgque.config

-- The Ticker's leadership: a lease taken or renewed by a token of its own
-- (holder, lease), true while it leads; given up at once (and NOTIFYing
-- pgque_ticker_resign, for the standbys) when it stops.
-- name: ticker_lead
select pgque.ticker_lead(%s, %s::interval)

-- name: ticker_resign
select pgque.ticker_resign(%s)

-- name: ticker_eager
select pgque.ticker_eager(%s, %s::interval)

-- Arms the producers' wakeup, then reads every queue's event sequence and
-- the value its last tick recorded.
-- name: ticker_arm_wake
select queue_name, event_seq, tick_event_seq from pgque._ticker_arm_wake()

-- Ticks a queue whose last tick left out a transaction that has committed since.
-- name: ticker_stragglers
select pgque._tick_stragglers(%s)

-- Whether the role may tick a queue itself (NULL: pgque has no such function).
-- name: may_self_tick
select pg_catalog.has_function_privilege(
           pg_catalog.to_regprocedure('pgque._consumer_tick(text, interval)'), 'execute')

-- A consumer's own eager tick, in one statement on an autocommit connection:
-- a transaction of its own, committed asynchronously as the ticker's ticks
-- are (queue, max wait). It arms the producers' wakeup first, so a consumer
-- that then finds nothing is woken by the next commit.
-- name: consumer_tick
select pgque._consumer_tick(%s, %s::interval),
       pg_catalog.set_config('synchronous_commit', 'off', true)

-- name: ticker_xmin
select pgque.xmin_horizon()

-- name: maint_retry_events
select pgque.maint_retry_events()

-- name: maint_deliver_delayed
select pgque.maint_deliver_delayed()

-- name: run_maint
call pgque.run_maint()

-- name: maint_tables_to_vacuum
select t from pgque.maint_tables_to_vacuum() t

-- name: dead_letter_event
select pgque.dead_letter_event(%s, %s, %s)

-- name: nack_by_id
select pgque.nack(%s, %s::bigint, %s::interval, %s)

-- Partition slots (the client's slot calls; consumers with partitions=).

-- name: subscribe_slot
select pgque.subscribe_slot(%s, %s, %s, %s)

-- name: unsubscribe_slot
select pgque.unsubscribe_slot(%s, %s, %s)

-- name: claim_slot
select pgque.claim_slot(%s, %s, %s, %s, %s::interval)

-- name: release_slot
select pgque.release_slot(%s, %s, %s, %s)

-- name: receive_partitioned
select * from pgque.receive_partitioned(%s, %s, %s, %s, %s, %s)

-- name: ack_partitioned
select pgque.ack_partitioned(%s, %s, %s, %s, %s)

-- nack_partitioned reads only the message's msg_id.
-- name: nack_partitioned_by_id
select pgque.nack_partitioned(%s, %s, %s, %s, %s,
       row(%s::bigint, null, null, null, null, null, null, null, null, null)::pgque.message,
       %s::interval, %s)

-- name: dead_letter_partitioned
select pgque.dead_letter_partitioned(%s, %s, %s, %s, %s, %s, %s)

-- Client health: whether this role may read pgque.queue_health() (and the
-- version), without raising when pgque or the function is missing.

-- name: health_probe
select case when n.oid is null then 'missing'
            when not pg_catalog.has_schema_privilege(n.oid, 'usage') then 'denied'
            when pg_catalog.to_regprocedure('pgque.queue_health()') is null then 'missing'
            when not pg_catalog.has_function_privilege(
                pg_catalog.to_regprocedure('pgque.queue_health()'), 'execute') then 'denied'
            else 'ok' end,
       case when n.oid is null then 'missing'
            when not pg_catalog.has_schema_privilege(n.oid, 'usage') then 'denied'
            when pg_catalog.to_regprocedure('pgque.version()') is null then 'missing'
            when not pg_catalog.has_function_privilege(
                pg_catalog.to_regprocedure('pgque.version()'), 'execute') then 'denied'
            else 'ok' end
  from (select 1) one
  left join pg_catalog.pg_namespace n on n.nspname = 'pgque'

-- name: health_version
select pgque.version()::text

-- name: queue_health
select queue_name, check_name, status, detail from pgque.queue_health()

-- name: otel_metrics
select metric_name, value, labels from pgque.otel_metrics()

-- Administration (PgqueClient / AsyncPgqueClient): queues, dead letters,
-- scheduler, status. Column lists are written out: each row becomes a
-- dataclass of pgque.records by position.

-- name: create_queue
select pgque.create_queue(%s, %s::jsonb)

-- name: drop_queue
select pgque.drop_queue(%s, %s)

-- name: set_queue_config
select pgque.set_queue_config(%s, %s, %s)

-- name: pause_queue
select pgque.pause_queue(%s)

-- name: resume_queue
select pgque.resume_queue(%s)

-- name: dlq_inspect
select dl_id, dl_queue_id, dl_consumer_id, dl_time, dl_reason, ev_id, ev_time, ev_retry,
       ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4
  from pgque.dlq_inspect(%s, %s)

-- name: dlq_get
select dl_id, dl_queue_id, dl_consumer_id, dl_time, dl_reason, ev_id, ev_time, ev_retry,
       ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4
  from pgque.dlq_get(%s)

-- name: recent_events
select ev_id, ev_time, ev_txid, ev_retry, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3,
       ev_extra4
  from pgque.recent_events(%s, %s, %s)

-- name: dlq_replay
select pgque.dlq_replay(%s)

-- name: dlq_replay_all
select replayed, failed, first_error from pgque.dlq_replay_all(%s)

-- name: dlq_purge
select pgque.dlq_purge(%s, %s::interval)

-- name: start_scheduler
select pgque.start()

-- name: start_timetable
select pgque.start_timetable(%s)

-- name: stop_scheduler
select pgque.stop()

-- name: status
select component, status, detail from pgque.status()

-- name: queue_stats
select queue_name, queue_id, depth, oldest_msg_age, consumers, events_per_sec, cur_table,
       rotation_age, rotation_period, ticker_paused, last_tick_time, last_tick_id, dlq_count
  from pgque.queue_stats()
 where %s::text is null or queue_name = %s

-- name: consumer_stats
select queue_name, consumer_name, lag, pending_events, last_batch_start, batch_active, batch_id
  from pgque.consumer_stats()
 where %s::text is null or queue_name = %s

-- Charts, metrics, members and privileges (the web console, pgque.web).

-- name: throughput
select bucket_start, events, events_per_sec from pgque.throughput(%s, %s::interval, %s::interval)

-- name: error_rate
select bucket_start, retries, dead_letters from pgque.error_rate(%s, %s::interval, %s::interval)

-- name: metric_samples
select metric_name, metric_type, value, labels from pgque.otel_metrics()

-- name: consumer_positions
select consumer_name, last_tick from pgque.get_consumer_info(%s)

-- name: subconsumer_stats
select q.queue_name, pg_catalog.split_part(c.co_name, '.', 1),
       pg_catalog.substr(c.co_name, pg_catalog.strpos(c.co_name, '.') + 1),
       pg_catalog.now() - s.sub_active, s.sub_batch, s.sub_last_tick
  from pgque.subscription s
  join pgque.queue q on q.queue_id = s.sub_queue
  join pgque.consumer c on c.co_id = s.sub_consumer
 where s.sub_role = 'coop_member' and q.queue_name = %s
 order by c.co_name
 limit %s

-- name: partition_slots
select queue_name, consumer, slot, n, lease_owner, lease_until, epoch, last_tick, pending_events
  from pgque.partition_slot_status
 where queue_name = %s
 order by consumer, slot
 limit %s

-- name: write_privileges
select pg_catalog.has_function_privilege('pgque.pause_queue(text)', 'execute')
       and pg_catalog.has_function_privilege('pgque.resume_queue(text)', 'execute'),
       pg_catalog.has_function_privilege('pgque.dlq_replay(bigint)', 'execute')
       and pg_catalog.has_function_privilege('pgque.dlq_replay_all(text)', 'execute'),
       pg_catalog.has_function_privilege('pgque.dlq_purge(text, interval)', 'execute')

-- The command line (pgque.cli).

-- name: queue_exists
select exists (select from pgque.get_queue_info(%s))

-- name: may_count_consumers
-- Producers warn once per queue when it has no consumer (events sent then are
-- received by nobody): asked first, since a writer alone may not read
-- consumers and the count runs inside the caller's transaction.
select pg_catalog.has_function_privilege('pgque.get_consumer_info(text, text)', 'execute')

-- name: queue_consumer_count
select pg_catalog.count(*) from pgque.get_consumer_info(%s)

-- name: ticker_leader
-- Who holds the ticker lease (pgque status, the console, /metrics), read as a
-- pgque.monitoring.TickerLease. expires is -infinity before the first leader
-- and after a resignation: NULL here (psycopg loads no infinite timestamp).
select application_name, pid, pg_catalog.host(client_addr), since, renewed,
       case when pg_catalog.isfinite(expires) then expires end,
       coalesce(active, false), pg_catalog.clock_timestamp()
  from pgque.ticker_leader()

-- name: monitoring_config
-- The scheduler, its jobs and the tick period: a pgque.monitoring.MonitoringConfig.
select scheduler, ticker_job_id, maint_job_id, tick_period_ms from pgque.config

-- name: pg_cron_version
select extversion from pg_catalog.pg_extension where extname = 'pg_cron'

-- name: queue_sample
select depth, events_per_sec, oldest_msg_age, consumers, pg_catalog.now()
  from pgque.queue_stats()
 where queue_name = %s

-- name: queue_option_names
select pg_catalog.array_agg(distinct m[1] order by m[1])
  from pg_catalog.regexp_matches(
         pg_catalog.pg_get_functiondef('pgque.set_queue_config(text, text, text)'::pg_catalog.regprocedure),
         'when ''([a-z_0-9]+)'' then', 'g') as m

-- name: dlq_oldest_ids
select dl_id from pgque.dlq_inspect(%s, null) order by dl_id limit %s

-- Templates for psycopg.sql, where an identifier must be spliced in: each {}
-- is an sql.Identifier.

-- name: listen
listen {}

-- name: unlisten
unlisten {}

-- name: notify
notify {}

-- name: vacuum
vacuum {}

-- name: create_database
create database {} template {}

-- name: drop_database
drop database if exists {} with (force)

-- The Ticker: synchronous_commit of a connection it borrows, read and set
-- for the session.

-- name: synchronous_commit
select pg_catalog.current_setting('synchronous_commit')

-- name: set_synchronous_commit
select pg_catalog.set_config('synchronous_commit', %s, false)

-- The pytest plugin (pgque.testing): may the server's role create the test databases?

-- name: may_create_databases
select rolsuper or rolcreatedb from pg_catalog.pg_roles where rolname = current_user

-- The Spark connector (pgque.spark).

-- name: spark_client_encoding
set client_encoding to 'UTF8'

-- name: spark_range_sql
select pgque.spark_range_sql(%s, %s, %s, %s, %s)

-- The same through ADBC (the readers' Arrow connections): $n placeholders.
-- name: spark_range_sql_arrow
select pgque.spark_range_sql($1::text, $2::int8, $3::int8, $4::int4, $5::int4)

-- A psycopg.sql template: {} is the query spark_range_sql returned. The event
-- columns in the order of the reader's Arrow batches (ADBC runs it as binary COPY).
-- name: spark_arrow_read
select ev_id, ev_time, ev_type, ev_data, ev_retry, ev_extra1, ev_extra2, ev_extra3, ev_extra4
  from ({}) e

-- name: spark_start_tick
select pgque.spark_start_tick(%s, %s, %s)

-- name: spark_latest_tick
select tick_id from pgque.spark_latest_tick(%s)

-- name: spark_next_tick
select pgque.spark_next_tick(%s, %s, %s, %s, %s, %s)

-- name: spark_advance
select pgque.spark_advance(%s, %s, %s)

-- name: spark_consumer_tick
select last_tick from pgque.get_consumer_info(%s, %s)

-- name: spark_stage
select pgque.spark_stage(%s, %s, %s, %b::text[], %b::text[],
                         %b::text[], %b::text[], %b::text[], %b::text[])

-- name: spark_publish
select pgque.spark_publish(%s, %s, %s::text[], %s::bigint[], %s, %s)

-- name: spark_discard
select pgque.spark_discard(%s)

-- The Django integration (pgque.contrib.django): messages uninstalling would lose
-- besides the subscriptions' unconsumed events.

-- name: django_waiting_events
select (select pg_catalog.count(*) from pgque.delayed_events)
     + (select pg_catalog.count(*) from pgque.retry_queue)

-- The web console (pgque.web): its own reads, each bounded (payload previews
-- cut in the database, one event looked up by id).

-- name: web_backend
select backend_type, query from pg_catalog.pg_stat_activity where pid = %s

-- name: web_recent_events
select ev_id, ev_time, ev_txid, ev_retry, ev_type,
       pg_catalog.left(ev_data, %(cut)s) as ev_data,
       pg_catalog.octet_length(ev_data) as ev_size,
       pg_catalog.left(ev_extra1, %(cut)s) as ev_extra1,
       pg_catalog.left(ev_extra2, %(cut)s) as ev_extra2,
       pg_catalog.left(ev_extra3, %(cut)s) as ev_extra3,
       pg_catalog.left(ev_extra4, %(cut)s) as ev_extra4
  from pgque.recent_events(%(queue)s, %(limit)s, %(type)s)

-- name: web_dead_letters
select dl_id, dl_queue_id, dl_consumer_id, dl_time, dl_reason, ev_id, ev_time, ev_retry,
       ev_type, pg_catalog.left(ev_data, %(cut)s) as ev_data,
       pg_catalog.octet_length(ev_data) as ev_size
  from pgque.dlq_inspect(%(queue)s, %(limit)s)

-- name: web_event_copies
-- {} is the queue's event table (pgque.event_<queue id>, its three children
-- included); no index on ev_id: the caller bounds the scan's time.
select e.ev_id, e.ev_time, e.ev_txid::text::bigint as ev_txid, e.ev_retry,
       co.co_name as owner, e.ev_type,
       pg_catalog.left(e.ev_data, %(cut)s) as ev_data,
       pg_catalog.octet_length(e.ev_data) as ev_size,
       e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4
  from {} e
  left join pgque.consumer co on co.co_id = e.ev_owner
 where e.ev_id = %(ev_id)s
 order by e.ev_txid, e.ev_retry nulls first

-- name: web_event_retries
select co.co_name as owner, r.ev_retry, r.ev_retry_after
  from pgque.retry_queue r
  left join pgque.consumer co on co.co_id = r.ev_owner
 where r.ev_queue = %(queue_id)s and r.ev_id = %(ev_id)s
 order by r.ev_retry_after

-- name: web_event_dead_letters
select d.dl_id, d.dl_time, d.dl_reason, d.ev_retry, co.co_name as owner, d.ev_time,
       d.ev_type, pg_catalog.left(d.ev_data, %(cut)s) as ev_data,
       pg_catalog.octet_length(d.ev_data) as ev_size,
       d.ev_extra1, d.ev_extra2, d.ev_extra3, d.ev_extra4
  from pgque.dead_letter d
  left join pgque.consumer co on co.co_id = d.dl_consumer_id
 where d.dl_queue_id = %(queue_id)s and d.ev_id = %(ev_id)s
 order by d.dl_id

-- name: web_lookup_timeout
select pg_catalog.set_config('statement_timeout', %s, true)

-- Periodic schedules (the client, the CLI, the console, a consumer's @every).

-- name: schedule
select pgque.schedule(%s, %s, %s, %s::jsonb, %s, %s)

-- name: unschedule
select pgque.unschedule(%s, %s)

-- name: schedules
select queue_name, schedule_name, cron, time_zone, type_name, payload, next_run, last_run,
       last_event_id
  from pgque.schedules()
 where %s::text is null or queue_name = %s
