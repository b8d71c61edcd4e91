-- Privileges, re-applied by every install.
--
-- Deny by default: PUBLIC gets nothing. pgque_reader consumes, pgque_writer
-- produces (and cannot consume), pgque_admin (a member of both) manages
-- queues and maintenance. Functions run as their owner (SECURITY DEFINER
-- with a pinned search_path), so the roles need EXECUTE only. Readers and
-- admins may SELECT the tables; no pgque role may write, truncate, reference
-- or put a trigger on any of them: every change of pgque's bookkeeping goes
-- through a function that checks what it stores (docs/operations.md,
-- "Security model").

revoke all on all routines in schema pgque from public;
revoke all on all tables in schema pgque from public;
revoke all on all sequences in schema pgque from public;
revoke all on schema pgque from public;
-- Earlier versions granted the admin every table privilege: take them back.
revoke all on all tables in schema pgque from pgque_reader, pgque_writer, pgque_admin;
revoke all on all sequences in schema pgque from pgque_reader, pgque_writer, pgque_admin;

grant usage on schema pgque to pgque_reader, pgque_writer, pgque_admin;
grant select on all tables in schema pgque to pgque_reader;
grant select on all sequences in schema pgque to pgque_reader;
grant select on all tables in schema pgque to pgque_admin;
grant select on all sequences in schema pgque to pgque_admin;

-- The admin may run every public function; internal helpers (names starting
-- with an underscore) are reached only through the functions that use them.
do $grants$
declare
    v_fn regprocedure;
begin
    for v_fn in
        select p.oid::regprocedure
          from pg_catalog.pg_proc p
         where p.pronamespace = 'pgque'::regnamespace
           and p.proname not like '\_%'
           and p.prokind in ('f', 'p')
    loop
        execute pg_catalog.format('grant execute on %s %s to pgque_admin',
                       case when (select prokind from pg_catalog.pg_proc where oid = v_fn) = 'p'
                            then 'procedure' else 'function' end,
                       v_fn);
    end loop;
end
$grants$;

-- Internal functions that admins call: the ticker loops and run_maint()
-- (with the caller's rights), the SDK's Ticker and its consumers' ticks.
grant execute on function
    pgque._ticker_next_slot(timestamptz, timestamptz),
    pgque._move_retry_events(integer),
    pgque._run_extra_maint(text, text),
    pgque._ticker_arm_wake(),
    pgque._consumer_tick(text, interval),
    pgque._ticker_sequences(),
    pgque._tick_stragglers(text)
to pgque_admin;

grant execute on function
    pgque.version(),
    pgque.register_consumer(text, text),
    pgque.register_consumer_at(text, text, bigint),
    pgque.unregister_consumer(text, text),
    pgque.next_batch(text, text),
    pgque.next_batch_info(text, text),
    pgque.next_batch_custom(text, text, interval, int4, interval),
    pgque.get_batch_events(bigint),
    pgque.get_batch_info(bigint),
    pgque.finish_batch(bigint),
    pgque.event_retry(bigint, bigint, timestamptz),
    pgque.event_retry(bigint, bigint, integer),
    pgque.get_queue_info(text),
    pgque.get_consumer_info(text, text),
    pgque.subscribe(text, text),
    pgque.unsubscribe(text, text),
    pgque.receive(text, text, integer),
    pgque.ack(bigint),
    pgque.nack(bigint, pgque.message, interval, text),
    pgque.nack(bigint, bigint, interval, text),
    pgque.dead_letter_event(bigint, bigint, text),
    pgque.dlq_inspect(text, integer),
    pgque.dlq_get(bigint),
    pgque.recent_events(text, integer, text),
    pgque.register_subconsumer(text, text, text, boolean),
    pgque.subscribe_subconsumer(text, text, text, boolean),
    pgque.unregister_subconsumer(text, text, text, integer),
    pgque.unsubscribe_subconsumer(text, text, text, integer),
    pgque.touch_subconsumer(text, text, text),
    pgque.next_batch(text, text, text, interval),
    pgque.next_batch_custom(text, text, text, interval, int4, interval, interval),
    pgque.receive_coop(text, text, text, integer, interval),
    pgque.subscribe_slot(text, text, integer, integer),
    pgque.unsubscribe_slot(text, text, integer),
    pgque.claim_slot(text, text, integer, text, interval),
    pgque.release_slot(text, text, integer, text),
    pgque.receive_partitioned(text, text, integer, integer, text, integer),
    pgque.ack_partitioned(text, text, integer, integer, text),
    pgque.nack_partitioned(text, text, integer, integer, text, pgque.message, interval, text),
    pgque.dead_letter_partitioned(text, text, integer, integer, text, bigint, text)
to pgque_reader;
grant select on pgque.partition_slot_status to pgque_reader;
-- Idempotency keys are nobody's business but send_idem's.
revoke all on pgque.idem from pgque_reader, pgque_admin;
-- The coordination rows: the ticker lease's holder token is the leader's
-- alone (ticker_leader() shows who leads), the mutexes nobody's.
revoke all on pgque.ticker_leader, pgque.mutex, pgque.tick_lock
    from pgque_reader, pgque_admin;
-- Staged, unpublished Spark sink rows belong to the sink's definer functions.
revoke all on pgque.spark_staging, pgque.spark_commits from pgque_reader;

grant execute on function
    pgque.version(),
    pgque.insert_event(text, text, text),
    pgque.insert_event(text, text, text, text, text, text, text),
    pgque.send(text, text),
    pgque.send(text, jsonb),
    pgque.send(text, text, text),
    pgque.send(text, text, jsonb),
    pgque.send(text, text, text, text, text, text, text),
    pgque.send(text, text, jsonb, text, text, text, text),
    pgque.send_batch(text, text[]),
    pgque.send_batch(text, jsonb[]),
    pgque.send_batch(text, text, text[]),
    pgque.send_batch(text, text, jsonb[]),
    pgque.send_batch(text, text[], text[], text[], text[], text[], text[]),
    pgque.send_batch(text, text[], jsonb[], text[], text[], text[], text[]),
    pgque.send_at(text, text, jsonb, timestamptz),
    pgque.send_at(text, text, text, timestamptz),
    pgque.dlq_replay(bigint),
    pgque.dlq_replay_all(text),
    pgque.send(text, text, jsonb, text),
    pgque.send(text, text, text, text),
    pgque.send_idem(text, text, text, text, interval, text),
    pgque.send_idem(text, text, jsonb, text, interval, text)
to pgque_writer;

-- Monitoring and the SQL test helpers are a reader's business; test_send
-- is a writer's.
grant execute on function
    pgque.queue_stats(),
    pgque.consumer_stats(),
    pgque.ticker_leader(),
    pgque.schedules(),
    pgque.queue_health(),
    pgque.otel_metrics(),
    pgque.throughput(text, interval, interval),
    pgque.error_rate(text, interval, interval),
    pgque.in_flight(text),
    pgque.stuck_consumers(interval),
    pgque.latency_percentiles(text, text, interval),
    pgque.test_consume(text, text, text),
    pgque.assert_empty(text),
    pgque.assert_dlq_empty(text)
to pgque_reader;
grant execute on function pgque.test_send(text, jsonb) to pgque_writer;

-- Readers run Spark sources, writers Spark sinks.
grant execute on function
    pgque.spark_range_sql(text, bigint, bigint, integer, integer),
    pgque.spark_read_range(text, bigint, bigint, integer, integer),
    pgque.spark_latest_tick(text),
    pgque.spark_start_tick(text, text, text),
    pgque.spark_next_tick(text, text, bigint, bigint, integer, bigint),
    pgque.spark_advance(text, text, bigint)
to pgque_reader;
grant execute on function
    pgque.spark_latest_tick(text),
    pgque.spark_stage(text, text, bigint, text[], text[], text[], text[], text[], text[]),
    pgque.spark_publish(text, text, text[], bigint[], text, bigint),
    pgque.spark_discard(text)
to pgque_writer;

-- The DML user runs these (SECURITY INVOKER), so pgque_writer needs them, as in PgQ.
grant execute on function
    pgque.jsontriga(),
    pgque.logutriga(),
    pgque.sqltriga(),
    pgque._trigger_urlencode(text),
    pgque._trigger_json_row(text[], text[], boolean[]),
    pgque._trigger_urlencode_row(text[], text[], boolean[]),
    pgque._trigger_list_has(text, text),
    pgque._trigger_eq_operator(oid, boolean),
    pgque._trigger_eval(text, record, text),
    pgque._trigger_event(text, text, text, text, oid, text, text, text[], record, record, text)
to pgque_writer;

-- Owner only: not even the admin.
do $owner_only$
declare
    v_fn regprocedure;
begin
    for v_fn in
        select f from pg_catalog.unnest(array[
            pg_catalog.to_regprocedure('pgque.insert_event_bulk(text, text, text[])'),
            pg_catalog.to_regprocedure('pgque.register_maint_function(regprocedure)'),
            pg_catalog.to_regprocedure('pgque.unregister_maint_function(regprocedure)'),
            pg_catalog.to_regprocedure('pgque.uninstall()')]) f
         where f is not null
    loop
        execute pg_catalog.format('revoke execute on function %s from pgque_admin', v_fn);
    end loop;
end
$owner_only$;

-- The insert routers and the batch readers (the tops and routers, and the
-- middle routers, leaves and readers of the queues that exist; the
-- stale-routine step dropped the previous build's).
do $router$
begin
    perform pgque._rebuild_routers();
end
$router$;
