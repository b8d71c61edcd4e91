-- The dead letter queue: inspecting, replaying and purging dead letters.

create or replace function pgque.event_dead(
    i_batch_id bigint, i_event_id bigint, i_reason text,
    i_ev_time timestamptz, i_ev_txid xid8, i_ev_retry int4,
    i_ev_type text, i_ev_data text,
    i_ev_extra1 text default null, i_ev_extra2 text default null,
    i_ev_extra3 text default null, i_ev_extra4 text default null)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._refuse_slot_batch(i_batch_id, 'use pgque.dead_letter_partitioned()');
    return pgque._dead_letter(
        i_batch_id,
        row(i_event_id, i_ev_time, i_ev_txid, null, i_ev_retry, i_ev_type, i_ev_data,
            i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4)::pgque.event_template,
        i_reason);
end
$$;
comment on function pgque.event_dead(bigint, bigint, text, timestamptz, xid8, int4, text, text, text, text, text, text) is
    'Admin: records the given event as a dead letter of the open batch''s queue and consumer (idempotent). Returns 1.';

create or replace function pgque.dlq_inspect(i_queue_name text, i_limit_count integer default 100)
returns setof pgque.dead_letter language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if i_queue_name is null then
        raise exception 'dlq_inspect: queue name must not be null'
            using detail = 'pgque:invalid_argument';
    end if;
    if i_limit_count < 0 then
        raise exception 'dlq_inspect: limit_count must be >= 0 (NULL: no limit), got % (queue %)',
            i_limit_count, i_queue_name using detail = 'pgque:invalid_argument';
    end if;
    return query
        select d.* from pgque.dead_letter d
          join pgque.queue q on q.queue_id = d.dl_queue_id
         where q.queue_name = i_queue_name
         order by d.dl_time desc, d.dl_id desc
         limit i_limit_count;
end
$$;
comment on function pgque.dlq_inspect(text, integer) is
    'The queue''s newest dead letters first, at most i_limit_count (NULL: all); no rows for an unknown queue.';

-- Internal: replays one locked dead letter as a new event and deletes it.
create or replace function pgque._dlq_replay_row(i_dl pgque.dead_letter)
returns bigint language plpgsql as $$
declare
    v_queue_name text;
    v_ev_id bigint;
begin
    select queue_name into v_queue_name from pgque.queue where queue_id = i_dl.dl_queue_id;
    v_ev_id := pgque._insert_event(v_queue_name, null, pg_catalog.now(), null, null,
                                   i_dl.ev_type, i_dl.ev_data,
                                   i_dl.ev_extra1, i_dl.ev_extra2, i_dl.ev_extra3, i_dl.ev_extra4);
    delete from pgque.dead_letter where dl_id = i_dl.dl_id;
    return v_ev_id;
end
$$;

create or replace function pgque.dlq_replay(i_dead_letter_id bigint)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_dl pgque.dead_letter;
begin
    -- The row lock makes two concurrent replays of one entry produce one event:
    -- the second waits, then finds the row gone.
    select * into v_dl from pgque.dead_letter where dl_id = i_dead_letter_id for update;
    if not found then
        raise exception 'dead letter entry not found: %', i_dead_letter_id
            using detail = 'pgque:dead_letter_not_found';
    end if;
    return pgque._dlq_replay_row(v_dl);
end
$$;
comment on function pgque.dlq_replay(bigint) is
    'Sends a dead letter''s type, payload and extras again as a new event (new id, retry count reset) and deletes the entry. Returns the new event id.';

create or replace function pgque.dlq_replay_all(
    i_queue_name text, out replayed bigint, out failed bigint, out first_error text)
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_dl pgque.dead_letter;
begin
    if i_queue_name is null then
        raise exception 'dlq_replay_all: queue name must not be null'
            using detail = 'pgque:invalid_argument';
    end if;
    replayed := 0;
    failed := 0;
    -- Entries a concurrent replay holds are skipped, not waited for.
    for v_dl in
        select d.* from pgque.dead_letter d
          join pgque.queue q on q.queue_id = d.dl_queue_id
         where q.queue_name = i_queue_name
         order by d.dl_id
           for update of d skip locked
    loop
        begin
            perform pgque._dlq_replay_row(v_dl);
            replayed := replayed + 1;
        exception when others then
            failed := failed + 1;
            raise warning 'dlq_replay_all: failed to replay dl_id=%, error: %', v_dl.dl_id, sqlerrm;
            first_error := coalesce(first_error, 'dl_id=' || v_dl.dl_id || ': ' || sqlerrm);
        end;
    end loop;
end
$$;
comment on function pgque.dlq_replay_all(text) is
    'Replays every dead letter of the queue; failures are skipped with a WARNING. Returns (replayed, failed, first_error).';

create or replace function pgque.dlq_purge(i_queue_name text, i_older_than interval default '30 days')
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_count integer;
    v_cutoff timestamptz;
begin
    if i_queue_name is null then
        raise exception 'dlq_purge: queue name must not be null'
            using detail = 'pgque:invalid_argument';
    end if;
    if i_older_than is null or i_older_than < interval '0' then
        raise exception 'dlq_purge: older_than must be a non-negative interval, got % (queue %)',
            coalesce(i_older_than::text, 'NULL'), i_queue_name
            using detail = 'pgque:invalid_argument';
    end if;
    -- An age beyond the calendar (timestamptz starts in 4713 BC) purges nothing.
    v_cutoff := case when i_older_than >= interval '6000 years' then '-infinity'::timestamptz
                     else pg_catalog.now() - i_older_than end;
    delete from pgque.dead_letter d
     using pgque.queue q
     where q.queue_id = d.dl_queue_id and q.queue_name = i_queue_name
       and d.dl_time < v_cutoff;
    get diagnostics v_count = row_count;
    return v_count;
end
$$;
comment on function pgque.dlq_purge(text, interval) is
    'Admin: deletes the queue''s dead letters older than i_older_than. Returns how many.';
