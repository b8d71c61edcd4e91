-- Test helpers for users' own test suites: send a message, consume exactly
-- one, assert that a queue or its dead letter queue is empty. Each raises
-- (P0001, DETAIL pgque:assertion_failed) with the queue and what it found.
-- A function cannot commit, so the caller ticks between test_send and
-- test_consume, in separate transactions:
--
--   select pgque.test_send('q', '{"id": 1}');          -- transaction 1
--   select pgque.force_next_tick('q');                  -- transaction 2
--   select pgque.ticker('q');                           -- transaction 3
--   select * from pgque.test_consume('q', 'c', 'default');

create or replace function pgque.test_send(queue text, payload jsonb)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q pgque.queue;
    v_id bigint;
    v_stored text;
begin
    q := pgque._observed_queue('test_send', test_send.queue);
    if test_send.payload is null then
        perform pgque._refuse_null('test_send', 'payload', q.queue_name);
    end if;
    v_id := pgque.send(q.queue_name, test_send.payload);
    -- Read it back through the txid index: this transaction's events only.
    execute pg_catalog.format(
        'select ev_data from %s where ev_txid = pg_catalog.pg_current_xact_id() and ev_id = $1',
        pgque._event_table_name(q, null))
       into v_stored using v_id;
    if v_stored is null or v_stored::jsonb <> test_send.payload then
        raise exception 'test_send: event % of queue % was not stored as sent (found %)',
            v_id, q.queue_name, coalesce(v_stored, 'nothing')
            using detail = 'pgque:assertion_failed';
    end if;
    return v_id;
end
$$;
comment on function pgque.test_send(text, jsonb) is
    'Test helper: sends a JSON message of type ''default'' and checks it was stored. Returns the event id.';

create or replace function pgque.test_consume(queue text, consumer text, expected_type text)
returns pgque.message language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q pgque.queue;
    v_messages pgque.message[];
    v_msg pgque.message;
begin
    q := pgque._observed_queue('test_consume', test_consume.queue);
    if test_consume.consumer is null then
        perform pgque._refuse_null('test_consume', 'consumer name', q.queue_name);
    end if;
    -- Up to 1000, to say how many there were when there is more than one.
    select pg_catalog.array_agg(m order by m.msg_id) into v_messages
      from pgque.receive(q.queue_name, test_consume.consumer, 1000) m;
    if v_messages is null then
        raise exception 'test_consume: no message for consumer % on queue % (was it sent and then ticked, in separate transactions?)',
            test_consume.consumer, q.queue_name using detail = 'pgque:assertion_failed';
    end if;
    if pg_catalog.cardinality(v_messages) > 1 then
        raise exception 'test_consume: expected one message for consumer % on queue %, batch % holds % (types: %)',
            test_consume.consumer, q.queue_name, (v_messages[1]).batch_id,
            case when pg_catalog.cardinality(v_messages) >= 1000 then '1000 or more'
                 else pg_catalog.cardinality(v_messages)::text end,
            (select pg_catalog.string_agg(coalesce(m.type, 'NULL'), ', ' order by m.msg_id)
               from pg_catalog.unnest(v_messages[1:10]) m)
            using detail = 'pgque:assertion_failed';
    end if;
    v_msg := v_messages[1];
    if test_consume.expected_type is not null
       and v_msg.type is distinct from test_consume.expected_type then
        raise exception 'test_consume: expected type % on queue % (consumer %), got % (msg_id %, payload %)',
            test_consume.expected_type, q.queue_name, test_consume.consumer,
            coalesce(v_msg.type, 'NULL'), v_msg.msg_id, pg_catalog.left(v_msg.payload, 200)
            using detail = 'pgque:assertion_failed';
    end if;
    perform pgque.ack(v_msg.batch_id);
    return v_msg;
end
$$;
comment on function pgque.test_consume(text, text, text) is
    'Test helper: receives the consumer''s next batch, which must hold exactly one message of expected_type (NULL: any type), acks it and returns the message.';

create or replace function pgque.assert_empty(queue text)
returns boolean language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q pgque.queue;
    s record;
    v_count bigint;
    v_first bigint;
    v_findings text[] := '{}';
begin
    q := pgque._observed_queue('assert_empty', assert_empty.queue);
    -- Exact, not estimated: per subscription, the events past its position
    -- (not visible in its last tick's snapshot) that it would receive.
    for s in
        select co.co_name, sub.sub_id, t.tick_snapshot
          from pgque.subscription sub
          join pgque.consumer co on co.co_id = sub.sub_consumer
          join pgque.tick t on t.tick_queue = sub.sub_queue and t.tick_id = sub.sub_last_tick
         where sub.sub_queue = q.queue_id
         order by co.co_name
    loop
        execute pg_catalog.format(
            'select pg_catalog.count(*), pg_catalog.min(ev_id) from (select ev_id from %s'
            ' where ev_txid >= $1 and not pg_catalog.pg_visible_in_snapshot(ev_txid, $2)'
            ' and (ev_owner is null or ev_owner = $3) limit 1000) e',
            pgque._event_table_name(q, null))
           into v_count, v_first
          using pg_catalog.pg_snapshot_xmin(s.tick_snapshot), s.tick_snapshot, s.sub_id;
        if v_count > 0 then
            v_findings := v_findings || pg_catalog.format(
                'consumer %s has %s%s events not yet consumed (first ev_id %s)', s.co_name,
                case when v_count >= 1000 then 'at least ' else '' end, v_count, v_first);
        end if;
    end loop;
    select pg_catalog.count(*) into v_count from pgque.retry_queue r where r.ev_queue = q.queue_id;
    if v_count > 0 then
        v_findings := v_findings || pg_catalog.format('%s events wait in retry_queue', v_count);
    end if;
    select pg_catalog.count(*) into v_count from pgque.delayed_events d where d.de_queue_name = q.queue_name;
    if v_count > 0 then
        v_findings := v_findings || pg_catalog.format('%s delayed messages wait for delivery', v_count);
    end if;
    if pg_catalog.cardinality(v_findings) > 0 then
        raise exception 'assert_empty: queue % is not empty: %', q.queue_name,
            pg_catalog.array_to_string(v_findings, '; ') using detail = 'pgque:assertion_failed';
    end if;
    return true;
end
$$;
comment on function pgque.assert_empty(text) is
    'Test helper: true when no consumer of the queue has an event left to consume and no retry or delayed message waits; raises with the findings otherwise.';

create or replace function pgque.assert_dlq_empty(queue text)
returns boolean language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q constant pgque.queue := pgque._observed_queue('assert_dlq_empty', assert_dlq_empty.queue);
    v_count bigint;
    v_newest pgque.dead_letter;
begin
    select pg_catalog.count(*) into v_count from pgque.dead_letter d where d.dl_queue_id = q.queue_id;
    if v_count > 0 then
        select d.* into v_newest from pgque.dead_letter d
         where d.dl_queue_id = q.queue_id order by d.dl_time desc, d.dl_id desc limit 1;
        raise exception 'assert_dlq_empty: queue % has % dead letters (newest: dl_id %, ev_id %, consumer %, reason %)',
            q.queue_name, v_count, v_newest.dl_id, v_newest.ev_id,
            (select co.co_name from pgque.consumer co where co.co_id = v_newest.dl_consumer_id),
            coalesce(v_newest.dl_reason, 'NULL') using detail = 'pgque:assertion_failed';
    end if;
    return true;
end
$$;
comment on function pgque.assert_dlq_empty(text) is
    'Test helper: true when the queue has no dead letters; raises with their count and the newest otherwise.';
