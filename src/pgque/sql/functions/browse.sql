-- Browsing: a queue's recent events and a single dead letter, for the CLI and
-- the web console. Every read here is bounded, whatever the queue's size.

create or replace function pgque.recent_events(
    i_queue_name text, i_limit integer default 50, i_type text default null)
returns table (ev_id bigint, ev_time timestamptz, ev_txid bigint, ev_retry integer,
               ev_type text, ev_data text, ev_extra1 text, ev_extra2 text,
               ev_extra3 text, ev_extra4 text)
language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    -- With a type filter, each event table is read back at most this far.
    c_scan_cap constant integer := 10000;
    q pgque.queue%rowtype;
    v_branch text;
    v_branches text[] := '{}';
    i integer;
begin
    if i_queue_name is null then
        raise exception 'recent_events: queue name must not be null'
            using detail = 'pgque:invalid_argument';
    end if;
    if i_limit is null or i_limit < 1 or i_limit > 1000 then
        raise exception 'recent_events: limit must be between 1 and 1000, got % (queue %)',
            coalesce(i_limit::text, 'NULL'), i_queue_name
            using detail = 'pgque:invalid_argument';
    end if;
    q := pgque._queue_row(i_queue_name);
    -- Each event table is indexed on ev_txid only: read each one backwards
    -- along that index with a limit (ordering by ev_id too would sort a
    -- whole transaction's events), then merge the few rows found.
    for i in 0 .. q.queue_ntables - 1 loop
        v_branch := pg_catalog.format(
            'select ev_id, ev_time, ev_txid, ev_retry, ev_type, ev_data,'
            ' ev_extra1, ev_extra2, ev_extra3, ev_extra4 from %s'
            ' order by ev_txid desc limit $3',
            pgque._queue_relation(q, i::text));
        if i_type is not null then
            v_branch := 'select * from (' || v_branch || ') s where ev_type = $1'
                        ' order by ev_txid desc, ev_id desc limit $2';
        end if;
        v_branches := v_branches || ('(' || v_branch || ')');
    end loop;
    return query execute
        'select e.ev_id, e.ev_time, e.ev_txid::text::bigint, e.ev_retry, e.ev_type, e.ev_data,'
        ' e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4 from ('
        || pg_catalog.array_to_string(v_branches, ' union all ')
        || ') e order by e.ev_txid desc, e.ev_id desc limit $2'
        using i_type, i_limit, case when i_type is null then i_limit else c_scan_cap end;
end
$$;
comment on function pgque.recent_events(text, integer, text) is
    'The queue''s newest events first (by transaction, then id), at most i_limit (1 to 1000); with i_type, only that type among the newest 10000 events of each event table.';

create or replace function pgque.dlq_get(i_dl_id bigint)
returns setof pgque.dead_letter language sql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
    select d.* from pgque.dead_letter d where d.dl_id = i_dl_id
$$;
comment on function pgque.dlq_get(bigint) is
    'One dead letter by its id (no row when there is none).';
