-- The batch readers: static, plan-cached queries reading a batch's events.
--
-- A batch's query depends on its queue's event tables and its two ticks'
-- snapshots. Built as SQL text (batch_event_sql), it is parsed and planned
-- on every call: a one-event receive took 0.26 ms of server time that way,
-- 0.19 ms through the readers (measured, PostgreSQL 18). pgque therefore
-- generates, for each queue, one PL/pgSQL function holding a static query
-- per event table, with the snapshots and bounds as parameters; each
-- session plans it once.
--
-- JIT: the event tables are never ANALYZEd (autovacuum is off on them), so
-- a big table's estimate for a batch's txid range is far too high and made
-- PostgreSQL JIT-compile every batch query: 88 ms for 2 ms of reading at
-- 10^8 events, measured. The readers, and the functions that still run a
-- batch's SQL text, turn JIT off. The same estimate made the generic plan a
-- parallel index scan from about 1.6 * 10^7 events on: two workers started
-- and stopped for every batch, halving the drain rate at 10^8 (measured).
-- Batch reads therefore run without parallel workers too.
--
--   _read_q<id>    the events of queue <id> between two snapshots, from the
--                  tables given (numbers), each part ordered by ev_id
--
-- create_queue writes it, drop_queue drops it (both through _update_router),
-- the install writes every queue's anew. Its name is built from the queue's
-- id in schema pgque, where only pgque's owner creates functions.

-- Internal: the reader's parameters and result columns.
create or replace function pgque._batch_reader_signature()
returns text
language sql immutable
as $$
    select 'i_tables integer[], i_lower xid8, i_upper xid8, i_s1 pg_snapshot, i_s2 pg_snapshot,'
        || ' i_in_list xid8[], i_owner integer, i_ttl interval, i_slot integer, i_n integer,'
        || ' i_limit bigint'
$$;

-- Internal: the name of queue i_queue_id's reader.
-- (text || text: text || integer is only stable, which kept this function
-- from being inlined, so every receive parsed and planned it: 52 µs.)
create or replace function pgque._batch_reader_name(i_queue_id integer)
returns text
language sql immutable
as $$ select '_read_q' || i_queue_id::text $$;

-- Internal: writes queue i_queue's reader (one static query per event table and
-- bound kind, each table proven to be the queue's own), revoked from PUBLIC.
create or replace function pgque._write_batch_reader(i_queue pgque.queue)
returns void
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    -- The columns of get_batch_events, and the filters of every part: the
    -- consumer's own retry copies (ev_owner), the queue's event_ttl and a
    -- partition slot.
    v_columns constant text := pgque._event_columns('e.');
    v_filters constant text :=
        ' and (e.ev_owner is null or e.ev_owner = i_owner)'
        || ' and (i_ttl is null or e.ev_time >= pg_catalog.now() - i_ttl)'
        || ' and (i_n is null or pgque._partition_slot(e.ev_extra1, i_n) = i_slot)'
        || ' order by e.ev_id limit i_limit';
    v_codes text[] := '{}';
    v_table text;
    t integer;
begin
    for t in 0 .. i_queue.queue_ntables - 1 loop
        v_table := pgque._event_table_name(i_queue, t);
        v_codes := v_codes || pg_catalog.format(
            E'    return query select %s from %s e\n'
            || E'     where e.ev_txid >= i_lower and e.ev_txid <= i_upper\n'
            || E'       and pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s2)\n'
            || E'       and not pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s1)%s;\n'
            || E'    if i_in_list is not null then\n'
            || E'        return query select %s from %s e\n'
            || E'         where e.ev_txid = any (i_in_list)%s;\n'
            || E'    end if;',
            v_columns, v_table, v_filters, v_columns, v_table, v_filters);
    end loop;
    -- A generic plan, planned once per session: never a sequential or bitmap
    -- scan of a table whose statistics (never ANALYZEd) say little, no JIT
    -- and no parallel workers (see the top of this file).
    execute pg_catalog.format(
        E'create or replace function pgque.%I(%s)\n'
        || E'returns table (ev_id bigint, ev_time timestamptz, ev_txid bigint, ev_retry integer,'
        || E' ev_type text, ev_data text, ev_extra1 text, ev_extra2 text, ev_extra3 text,'
        || E' ev_extra4 text)\nlanguage plpgsql stable\n'
        || E'set plan_cache_mode = force_generic_plan set enable_seqscan = off'
        || E' set enable_bitmapscan = off set jit = off set max_parallel_workers_per_gather = 0\n'
        || E'as $reader$\ndeclare\n    t integer;\nbegin\n'
        || E'    foreach t in array i_tables loop\n%s\n    end loop;\nend\n$reader$',
        pgque._batch_reader_name(i_queue.queue_id), pgque._batch_reader_signature(),
        pgque._router_branches('t',
            array(select g from pg_catalog.generate_series(0, i_queue.queue_ntables - 1) g), v_codes));
    execute pg_catalog.format('revoke all on function pgque.%I(%s) from public',
                              pgque._batch_reader_name(i_queue.queue_id), pgque._batch_reader_signature());
end
$$;

-- Internal: brings queue id i_queue_id's reader up to date: written when
-- the queue exists, dropped when it does not.
create or replace function pgque._update_batch_reader(i_queue_id integer)
returns void
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    q pgque.queue%rowtype;
begin
    select * into q from pgque.queue where queue_id = i_queue_id;
    if found then
        perform pgque._write_batch_reader(q);
    else
        execute pg_catalog.format('drop function if exists pgque.%I(%s)',
                                  pgque._batch_reader_name(i_queue_id),
                                  pgque._batch_reader_signature());
    end if;
end
$$;

-- Internal: how to read open batch i_batch_id through its queue's reader:
-- the SQL of the call, whose parameters $1 .. $7 are this record's fields
-- from tables to owner, $8 the ttl (this record's, or NULL), $9 and $10 a
-- partition slot and slot count, $11 a limit. The caller runs it with RETURN QUERY EXECUTE, so
-- the rows are copied once on the way (a function returning them would copy
-- them again). Each part is ordered and limited: one part needs no more.
create or replace function pgque._read_batch_args(
    i_batch_id bigint,
    out sql text, out tables integer[], out lower_txid xid8, out upper_txid xid8,
    out s1 pg_snapshot, out s2 pg_snapshot, out txid_list xid8[], out owner integer,
    out ttl interval)
language plpgsql stable
as $$
declare
    b record := pgque._batch_range(i_batch_id);
    r record := pgque._tick_range_bounds(b.s1, b.s2);
begin
    tables := pgque._batch_table_numbers(b.queue, b.s1, b.s2);
    lower_txid := r.lower_txid;
    upper_txid := r.upper_txid;
    s1 := b.s1;
    s2 := b.s2;
    txid_list := r.txid_list;
    owner := b.sub_id;
    ttl := (b.queue).queue_event_ttl;
    -- The reader's name comes from the queue's id, in schema pgque.
    sql := pg_catalog.format('select * from pgque.%I($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) r',
                        pgque._batch_reader_name((b.queue).queue_id))
        || case when pg_catalog.cardinality(tables) > 1 or txid_list is not null
                then ' order by r.ev_id limit $11' else '' end;
end
$$;

-- Internal: writes every queue's reader anew (the install).
create or replace function pgque._rebuild_batch_readers()
returns void
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    q pgque.queue%rowtype;
begin
    for q in select * from pgque.queue order by queue_id loop
        perform pgque._write_batch_reader(q);
    end loop;
end
$$;
