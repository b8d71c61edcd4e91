-- The SQL the Python client sends, one named statement per block.
--
-- Each is a thin call of a pgque.* function: the logic lives in the SQL API.
-- pgque/_queries.py reads this file once; `-- name: <key>` starts a block.
-- The texts of upstream pgque-py's client are kept exactly (its tests look
-- at them), with psycopg's %s placeholders.

-- name: send
select pgque.send(%s, %s::jsonb)

-- name: send_typed
select pgque.send(%s, %s, %s::jsonb)

-- name: send_text
select pgque.send(%s, %s, %s::text)

-- name: send_extras
select pgque.send(%s, %s, %s::jsonb, %s, %s, %s, %s)

-- name: send_text_extras
select pgque.send(%s, %s, %s::text, %s, %s, %s, %s)

-- name: send_batch
select pgque.send_batch(%s, %s, %s::jsonb[])

-- name: send_batch_text
select pgque.send_batch(%s, %s, %s::text[])

-- name: send_json_text_extras
select pgque.send(%s, %s, %s::json::text, %s, %s, %s, %s)

-- name: send_batch_json_text
select pgque.send_batch(%s, %s, %s::json[]::text[])

-- name: send_batch_extras
select pgque.send_batch(%s, %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[])

-- name: subscribe
select pgque.subscribe(%s, %s)

-- name: unsubscribe
select pgque.unsubscribe(%s, %s)

-- name: receive
select * from pgque.receive(%s, %s, %s)

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

-- name: ticker_try_lead
select pg_catalog.pg_try_advisory_lock(pgque.ticker_lock_key())

-- name: ticker_resign
select pg_catalog.pg_advisory_unlock(pgque.ticker_lock_key())

-- name: ticker_sequences
select q.queue_name,
       coalesce(pg_catalog.pg_sequence_last_value(q.queue_event_seq::regclass), 1)
  from pgque.queue q
 where not q.queue_ticker_paused and not q.queue_external_ticker

-- name: ticker_eager
select pgque.ticker_eager(%s, %s::interval)

-- name: ticker_xmin
select pgque.xmin_horizon()

-- name: maint_retry_events
select pgque.maint_retry_events()

-- name: maint_deliver_delayed
select pgque.maint_deliver_delayed()

-- name: maint
select pgque.maint()

-- name: maint_tables_to_vacuum
select t from pgque.maint_tables_to_vacuum() t

-- name: dead_letter_event
select pgque.dead_letter_event(%s, %s, %s)

-- name: nack_by_id
select pgque.nack(%s, %s::bigint, %s::interval, %s)

-- Producer (pgque.Producer / AsyncProducer): payloads are encoded on the
-- client and go through the text overloads; batch arrays are bound in
-- binary form (%b), which is much cheaper than array literals.

-- name: producer_send_batch
select pgque.send_batch(%s, %s, %b::text[])

-- name: producer_send_batch_extras
select pgque.send_batch(%s, %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[])

-- The same for connections binding on the client (cursor_factory=ClientCursor,
-- e.g. behind a pooler), which cannot send binary parameters.

-- name: producer_send_batch_client_side
select pgque.send_batch(%s, %s, %s::text[])

-- name: producer_send_batch_extras_client_side
select pgque.send_batch(%s, %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[])

-- name: producer_send_at
select pgque.send_at(%s, %s, %s::text, %s::timestamptz)

-- name: producer_send_after
select pgque.send_at(%s, %s, %s::text, pg_catalog.now() + %s::interval)

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
