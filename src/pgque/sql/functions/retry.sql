-- Retries: an event a consumer could not process goes to retry_queue and
-- comes back later for that consumer only (ev_owner = its sub_id), with the
-- same ev_id and ev_retry + 1.

-- Internal: the events of an open batch with the given ids (all when NULL),
-- read through the batch query so only events of the batch qualify.
create or replace function pgque._batch_events_by_id(i_batch_id bigint, i_event_ids bigint[])
returns setof pgque.event_template language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
-- JIT and parallel workers: see batch_reader.sql.
set jit = off set max_parallel_workers_per_gather = 0 as $$
begin
    return query execute
        'select b.ev_id, b.ev_time, b.ev_txid::text::xid8, null::integer, b.ev_retry,'
        || ' b.ev_type, b.ev_data, b.ev_extra1, b.ev_extra2, b.ev_extra3, b.ev_extra4'
        || ' from (' || pgque.batch_event_sql(i_batch_id) || ') b'
        || ' where $1 is null or b.ev_id = any ($1)'
        using i_event_ids;
end
$$;

-- Internal: copies events of an open batch into retry_queue for the batch's
-- consumer. Events already queued for that consumer are left alone.
create or replace function pgque._retry_batch_events(
    i_batch_id bigint, i_event_ids bigint[], i_retry_time timestamptz)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_count integer;
begin
    insert into pgque.retry_queue
        (ev_retry_after, ev_queue, ev_id, ev_time, ev_txid, ev_owner, ev_retry,
         ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
    select i_retry_time, s.sub_queue, e.ev_id, e.ev_time, null, s.sub_id,
           coalesce(e.ev_retry, 0) + 1, e.ev_type, e.ev_data,
           e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4
      from pgque._batch_events_by_id(i_batch_id, i_event_ids) e
      join pgque.subscription s on s.sub_batch = i_batch_id
    on conflict (ev_owner, ev_id) do nothing;
    get diagnostics v_count = row_count;
    return v_count;
end
$$;

create or replace function pgque.event_retry(
    x_batch_id bigint, x_event_id bigint, x_retry_time timestamptz)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if pgque._refuse_slot_batch(x_batch_id, 'use pgque.nack_partitioned()') then
        if pgque._retry_batch_events(x_batch_id, array[x_event_id], x_retry_time) > 0 then
            return 1;
        end if;
        -- Nothing inserted: either queued already, or not in this batch.
        perform 1 from pgque._batch_events_by_id(x_batch_id, array[x_event_id]);
        if found then
            return 0;
        end if;
    end if;
    raise exception 'event not found' using detail = 'pgque:event_not_found';
end
$$;
comment on function pgque.event_retry(bigint, bigint, timestamptz) is
    'Queues an event of the open batch for retry at the given time, for this consumer only. Returns 1, or 0 when already queued.';

create or replace function pgque.event_retry(
    x_batch_id bigint, x_event_id bigint, x_retry_seconds integer)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque.event_retry(x_batch_id, x_event_id, current_timestamp + x_retry_seconds * interval '1 second'); end $$;
comment on function pgque.event_retry(bigint, bigint, integer) is
    'Queues an event of the open batch for retry after the given seconds. Returns 1, or 0 when already queued.';

create or replace function pgque.batch_retry(i_batch_id bigint, i_retry_seconds integer)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if not pgque._refuse_slot_batch(i_batch_id, 'use pgque.nack_partitioned()') then
        raise exception 'batch_retry: batch % not found', i_batch_id
            using detail = 'pgque:batch_not_found';
    end if;
    return pgque._retry_batch_events(i_batch_id, null,
                                     current_timestamp + i_retry_seconds * interval '1 second');
end
$$;
comment on function pgque.batch_retry(bigint, integer) is
    'Queues every event of the open batch for retry after the given seconds. Returns how many were queued.';

create or replace function pgque.event_retry_raw(
    x_queue text, x_consumer text, x_retry_after timestamptz,
    x_ev_id bigint, x_ev_time timestamptz, x_ev_retry integer,
    x_ev_type text, x_ev_data text,
    x_ev_extra1 text, x_ev_extra2 text, x_ev_extra3 text, x_ev_extra4 text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_sub record;
    v_ev_id bigint;
begin
    perform pgque._refuse_reserved_name(x_consumer, null);
    select s.sub_id, s.sub_queue into v_sub
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
     where q.queue_name = x_queue and c.co_name = x_consumer;
    if not found then
        raise exception 'Not subscriber to queue: %/%',
            coalesce(x_queue, 'NULL'), coalesce(x_consumer, 'NULL')
            using detail = 'pgque:consumer_not_found';
    end if;
    v_ev_id := coalesce(x_ev_id, pg_catalog.nextval(pgque._queue_sequence(v_sub.sub_queue, 'id')));
    insert into pgque.retry_queue
        (ev_retry_after, ev_queue, ev_id, ev_time, ev_owner, ev_retry,
         ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
    values (x_retry_after, v_sub.sub_queue, v_ev_id, x_ev_time, v_sub.sub_id, x_ev_retry,
            x_ev_type, x_ev_data, x_ev_extra1, x_ev_extra2, x_ev_extra3, x_ev_extra4);
    return v_ev_id;
end
$$;
comment on function pgque.event_retry_raw(text, text, timestamptz, bigint, timestamptz, integer, text, text, text, text, text, text) is
    'Queues an arbitrary event for retry for one consumer (NULL ev_id: a new id). Returns the event id.';

-- Internal: moves due retry events back into their queues' current tables,
-- oldest due first, at most i_limit (all when NULL), set-based per queue.
create or replace function pgque._move_retry_events(i_limit integer)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q record;
    v_queue pgque.queue;
    v_seq regclass;
    v_moved integer;
    v_total integer := 0;
begin
    -- One mover at a time; producers and event_retry are not blocked.
    lock table pgque.retry_queue in share update exclusive mode;
    -- The txid first, then the current table (see insert_event_raw).
    perform pg_catalog.pg_current_xact_id();

    for q in
        select qu.queue_id, pg_catalog.array_agg(r.ctid) as rows
          from (select rq.ctid, rq.ev_queue from pgque.retry_queue rq
                 where rq.ev_retry_after <= current_timestamp
                   -- A queue closed for inserts keeps its retries until it reopens.
                   and rq.ev_queue in (select queue_id from pgque.queue
                                        where not queue_disable_insert)
                 order by rq.ev_retry_after
                 limit i_limit) r
          join pgque.queue qu on qu.queue_id = r.ev_queue
         group by qu.queue_id
         order by qu.queue_id
    loop
        select * into v_queue from pgque.queue where queue_id = q.queue_id;
        execute 'with moved as (delete from pgque.retry_queue where ctid = any ($1) returning *)'
             || ' insert into ' || pgque._event_table_name(v_queue, v_queue.queue_cur_table)
             || ' (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data,'
             || '  ev_extra1, ev_extra2, ev_extra3, ev_extra4)'
             || ' select ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data,'
             || '  ev_extra1, ev_extra2, ev_extra3, ev_extra4 from moved order by ev_id'
          using q.rows;
        get diagnostics v_moved = row_count;
        -- Advance the event sequence as one insert per event would, so the
        -- ticker notices the activity.
        v_seq := pgque._queue_relation(v_queue, 'event_seq');
        perform pg_catalog.nextval(v_seq) from pg_catalog.generate_series(1, v_moved);
        v_total := v_total + v_moved;
    end loop;
    return v_total;
end
$$;

create or replace function pgque.maint_retry_events()
returns integer
language sql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$ select pgque._move_retry_events(10) $$;
comment on function pgque.maint_retry_events() is
    'Moves at most 10 due retry events back into their queues; call again until it returns 0.';
