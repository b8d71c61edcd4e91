-- The modern API, consuming: subscribe, receive, ack, nack.
--
-- receive() opens the consumer's next batch (or returns the open one) and
-- returns its messages; ack() finishes the whole batch, messages beyond
-- receive()'s limit included; nack() puts one message of the open batch
-- back for a later retry, or into the dead letter queue once it has been
-- retried max_retries times.

create or replace function pgque.subscribe(queue text, consumer text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if queue = '' then
        raise exception 'queue name must not be empty' using detail = 'pgque:invalid_argument';
    end if;
    perform pgque._registration_queue(queue, true);
    perform pgque._refuse_reserved_name(consumer, null);
    return pgque._register_consumer_at(queue, consumer, null);
end
$$;
comment on function pgque.subscribe(text, text) is
    'Subscribes a consumer at the queue''s latest tick. Returns 1, or 0 when already subscribed.';

create or replace function pgque.unsubscribe(queue text, consumer text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque.unregister_consumer(queue, consumer); end $$;
comment on function pgque.unsubscribe(text, text) is
    'Removes a subscription with its pending retries. Returns 1, or 0 when not subscribed.';

-- Internal: the body of receive, receive_coop and receive_partitioned. Opens
-- the consumer's next batch (or takes its open one: the subconsumer's with
-- i_subconsumer, see the cooperative next_batch_custom) and returns up to
-- i_max of its messages (of slot i_slot of i_n only, with i_n), leaving out
-- events older than the queue's event_ttl, read through the batch readers
-- (batch_reader.sql). A batch with nothing to return is an empty window:
-- there is nothing to ack, so it is finished here and the next one looked
-- at, up to 100 per call.
create or replace function pgque._receive(
    i_queue text, i_consumer text, i_subconsumer text, i_dead_interval interval,
    i_max integer, i_slot integer, i_n integer)
returns setof pgque.message language plpgsql
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off as $$
declare
    v_batch_id bigint;
    a record;
    v_returned bigint;
    v_windows integer := 0;
begin
    loop
        if i_subconsumer is null then
            v_batch_id := (pgque._next_batch_custom(i_queue, i_consumer, null, null, null)).batch_id;
        else
            v_batch_id := (pgque.next_batch_custom(i_queue, i_consumer, i_subconsumer,
                                                   null, null, null, i_dead_interval)).batch_id;
        end if;
        if v_batch_id is null then
            return;
        end if;
        a := pgque._batch_read_args(v_batch_id);
        if a.merge then
            return query
            select r.ev_id, v_batch_id, r.ev_type, r.ev_data, r.ev_retry, r.ev_time,
                   r.ev_extra1, r.ev_extra2, r.ev_extra3, r.ev_extra4
              from pgque._read_batch(a.queue_id, a.tables, a.lower_txid, a.upper_txid, a.s1,
                                     a.s2, a.txid_list, a.owner, a.ttl, i_slot, i_n, i_max) r
             order by r.ev_id limit i_max;
        else
            return query
            select r.ev_id, v_batch_id, r.ev_type, r.ev_data, r.ev_retry, r.ev_time,
                   r.ev_extra1, r.ev_extra2, r.ev_extra3, r.ev_extra4
              from pgque._read_batch(a.queue_id, a.tables, a.lower_txid, a.upper_txid, a.s1,
                                     a.s2, a.txid_list, a.owner, a.ttl, i_slot, i_n, i_max) r;
        end if;
        get diagnostics v_returned = row_count;
        if v_returned > 0 then
            return;
        end if;
        perform pgque._finish_batch(v_batch_id);
        v_windows := v_windows + 1;
        exit when v_windows >= 100;
    end loop;
end
$$;

create or replace function pgque.receive(
    i_queue text, i_consumer text, i_max_return integer default 100)
returns setof pgque.message language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if i_max_return is null or i_max_return < 1 then
        raise exception 'pgque.receive: max_return must be >= 1, got %',
            coalesce(i_max_return::text, 'NULL') using detail = 'pgque:invalid_argument';
    end if;
    if pg_catalog.strpos(i_consumer, '#') > 0 then
        perform pgque._refuse_reserved_name(i_consumer, 'use pgque.receive_partitioned()');
    end if;
    -- A missing queue is reported as such, not as a missing subscription.
    if i_queue = '' then
        raise exception 'queue name must not be empty' using detail = 'pgque:invalid_argument';
    end if;
    perform 1 from pgque.queue where queue_name = i_queue;
    if not found then
        raise exception 'queue not found: %', i_queue using detail = 'pgque:queue_not_found';
    end if;
    return query select * from pgque._receive(i_queue, i_consumer, null, null, i_max_return,
                                              null, null);
end
$$;
comment on function pgque.receive(text, text, integer) is
    'Returns up to i_max_return messages of the consumer''s open or next batch, by msg_id; the same batch again until ack(). Empty batches are finished internally.';

create or replace function pgque.ack(i_batch_id bigint)
returns integer language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off as $$
begin
    -- The usual batch in one statement (finish_batch is this function):
    -- not a partition slot's, not a cooperative main's.
    update pgque.subscription s
       set sub_active = pg_catalog.now(),
           sub_last_tick = case when s.sub_role = 'coop_member' then null else s.sub_next_tick end,
           sub_next_tick = null, sub_batch = null
      from pgque.consumer c
     where s.sub_batch = i_batch_id and s.sub_role <> 'coop_main'
       and c.co_id = s.sub_consumer and not pgque._is_slot_consumer(c.co_name);
    if found then
        return 1;
    end if;
    -- A slot's batch is refused; _finish_batch says what else it is.
    perform pgque._refuse_slot_batch(i_batch_id, 'use pgque.ack_partitioned()');
    return pgque._finish_batch(i_batch_id);
end
$$;
comment on function pgque.ack(bigint) is
    'Finishes the whole batch (every message in it, returned or not). Returns 1, or 0 with a WARNING when it is not open.';

-- Internal: the public functions taking a batch id (ack, nack, finish_batch,
-- event_retry, get_batch_events ...) leave a partition slot's batch to the
-- slot functions, which check the caller holds the slot's lease. Returns
-- whether batch i_batch_id is open (for the callers that check it).
create or replace function pgque._refuse_slot_batch(i_batch_id bigint, i_hint text)
returns boolean language plpgsql as $$
declare
    v_name text;
begin
    select c.co_name into v_name
      from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
     where s.sub_batch = i_batch_id;
    if v_name is not null and pgque._is_slot_consumer(v_name) then
        raise exception 'batch % belongs to partition slot consumer %; %', i_batch_id, v_name, i_hint
            using detail = 'pgque:partition_slot';
    end if;
    return v_name is not null;
end
$$;

-- Internal: dead-letters one event of an open batch for the batch's consumer.
-- Idempotent per (queue, consumer, event).
create or replace function pgque._dead_letter(
    i_batch_id bigint, i_event pgque.event_template, i_reason text)
returns integer language plpgsql as $$
declare
    v_sub record;
begin
    -- A cooperative member's dead letters belong to its group's main consumer.
    select m.sub_queue, m.sub_consumer into v_sub
      from pgque.subscription s
      join pgque.subscription m on m.sub_queue = s.sub_queue and m.sub_id = s.sub_id
                               and m.sub_role = case when s.sub_role = 'coop_member'
                                                     then 'coop_main' else s.sub_role end
     where s.sub_batch = i_batch_id;
    if not found then
        raise exception 'batch not found: %', i_batch_id using detail = 'pgque:batch_not_found';
    end if;
    insert into pgque.dead_letter
        (dl_queue_id, dl_consumer_id, dl_reason, ev_id, ev_time, ev_txid, ev_retry,
         ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
    values (v_sub.sub_queue, v_sub.sub_consumer, i_reason, i_event.ev_id, i_event.ev_time,
            i_event.ev_txid, i_event.ev_retry, i_event.ev_type, i_event.ev_data,
            i_event.ev_extra1, i_event.ev_extra2, i_event.ev_extra3, i_event.ev_extra4)
    on conflict (dl_queue_id, dl_consumer_id, ev_id) do nothing;
    if found then
        perform pgque.log_event('warning', 'dlq', 'dead-lettered', pg_catalog.jsonb_build_object(
            'batch', i_batch_id, 'ev_id', i_event.ev_id, 'reason', i_reason));
    end if;
    return 1;
end
$$;

-- Internal: the nack policy for one event of an open batch: retry it, or
-- dead-letter it once it was retried max_retries times.
create or replace function pgque._nack(
    i_batch_id bigint, i_msg_id bigint, i_retry_after interval, i_reason text)
returns integer language plpgsql as $$
declare
    v_event pgque.event_template;
    v_max_retries integer;
    v_seconds bigint;
begin
    select coalesce(q.queue_max_retries, 5) into v_max_retries
      from pgque.subscription s join pgque.queue q on q.queue_id = s.sub_queue
     where s.sub_batch = i_batch_id;
    if not found then
        raise exception 'batch not found: %', i_batch_id using detail = 'pgque:batch_not_found';
    end if;
    -- The bound keeps the retry time far inside timestamptz's range.
    if i_retry_after is null or i_retry_after < interval '0'
       or i_retry_after > interval '100 years' then
        raise exception 'nack: retry_after must be a non-negative interval of at most 100 years, got % (batch %)',
            coalesce(i_retry_after::text, 'NULL'), i_batch_id
            using detail = 'pgque:invalid_argument';
    end if;
    -- Re-read the event from the batch: only its id is taken from the caller.
    select * into v_event from pgque._batch_events_by_id(i_batch_id, array[i_msg_id]);
    if not found or i_msg_id is null then
        raise exception 'msg_id % not found in batch %', coalesce(i_msg_id::text, '<NULL>'), i_batch_id
            using detail = 'pgque:event_not_found';
    end if;
    if coalesce(v_event.ev_retry, 0) >= v_max_retries then
        return pgque._dead_letter(i_batch_id, v_event, coalesce(i_reason, 'max retries exceeded'));
    end if;
    v_seconds := pg_catalog.ceil(extract(epoch from i_retry_after))::bigint;
    perform pgque._retry_batch_events(i_batch_id, array[i_msg_id],
                                      current_timestamp + v_seconds * interval '1 second');
    return 1;
end
$$;

create or replace function pgque.nack(
    i_batch_id bigint, i_msg pgque.message,
    i_retry_after interval default '60 seconds', i_reason text default null)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque.nack(i_batch_id, i_msg.msg_id, i_retry_after, i_reason); end $$;
comment on function pgque.nack(bigint, pgque.message, interval, text) is
    'Retries a message of the open batch after i_retry_after, or dead-letters it once retried max_retries times. Only msg_id is read from i_msg. Returns 1; the batch stays open for ack().';

create or replace function pgque.nack(
    i_batch_id bigint, i_msg_id bigint,
    i_retry_after interval default '60 seconds', i_reason text default null)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._refuse_slot_batch(i_batch_id, 'retry slot batches via pgque.nack_partitioned()');
    return pgque._nack(i_batch_id, i_msg_id, i_retry_after, i_reason);
end
$$;
comment on function pgque.nack(bigint, bigint, interval, text) is
    'nack() by message id, for clients that kept only ids.';

-- Internal: dead-letters message i_msg_id of open batch i_batch_id, re-read
-- from the batch (as nack, never taken from the caller).
create or replace function pgque._dead_letter_msg(i_batch_id bigint, i_msg_id bigint, i_reason text)
returns integer language plpgsql as $$
declare
    v_event pgque.event_template;
begin
    select * into v_event from pgque._batch_events_by_id(i_batch_id, array[i_msg_id]);
    if not found or i_msg_id is null then
        raise exception 'msg_id % not found in batch %', coalesce(i_msg_id::text, '<NULL>'), i_batch_id
            using detail = 'pgque:event_not_found';
    end if;
    return pgque._dead_letter(i_batch_id, v_event, coalesce(i_reason, 'dead-lettered by consumer'));
end
$$;

create or replace function pgque.dead_letter_event(i_batch_id bigint, i_msg_id bigint, i_reason text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if not pgque._refuse_slot_batch(i_batch_id, 'dead-letter slot batches via pgque.dead_letter_partitioned()') then
        raise exception 'batch not found: %', i_batch_id using detail = 'pgque:batch_not_found';
    end if;
    return pgque._dead_letter_msg(i_batch_id, i_msg_id, i_reason);
end
$$;
comment on function pgque.dead_letter_event(bigint, bigint, text) is
    'Moves a message of the open batch straight to the dead letter queue (the reader''s form of event_dead; the event is re-read from the batch). Returns 1; the batch stays open for ack().';
