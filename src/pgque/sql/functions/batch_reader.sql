-- The batch readers: static, plan-cached queries reading a batch's events.
--
-- A batch's query depends on its queue's event tables and its two ticks'
-- snapshots. Built as SQL text (batch_event_sql), it is parsed and planned
-- on every call: a one-event receive took 0.26 ms of server time that way,
-- 0.19 ms through the readers (measured, PostgreSQL 18). pgque therefore
-- generates PL/pgSQL functions holding a static query per event table, with
-- the snapshots and bounds as parameters; each session plans them once.
--
-- They are reached by static calls, like the insert routers
-- (insert_router.sql), since a call by a name built at run time is a
-- statement parsed and planned on every call too (a send, tick, receive
-- and ack cycle took 519 µs that way, 484 µs through static calls,
-- measured on PostgreSQL 15):
--
--   _read_batch    the router: a branch per leaf for the first 128 leaves
--                  (queue ids below 2,048); above them, a call by name
--   _read_l<k>     leaf k: the events of queues 16k .. 16k+15 between two
--                  snapshots, from the tables given (numbers), each part
--                  ordered by ev_id
--
-- The router's code depends on nothing but the tree's shape: the install
-- writes it. A leaf is written by every create_queue and drop_queue of its
-- queues (through _update_router, under the leaf's lock), and dropped with
-- its last queue. A leaf's name is built from a queue id, in schema pgque,
-- where only pgque's owner creates functions.
--
-- JIT: the event tables are never ANALYZEd (autovacuum is off on them), so
-- a big table's estimate for a batch's txid range is far too high and made
-- PostgreSQL JIT-compile every batch query: 88 ms for 2 ms of reading at
-- 10^8 events, measured. The readers, and the functions that still run a
-- batch's SQL text, turn JIT off. The same estimate made the generic plan a
-- parallel index scan from about 1.6 * 10^7 events on: two workers started
-- and stopped for every batch, halving the drain rate at 10^8 (measured).
-- Batch reads therefore run without parallel workers too.

-- Internal: the readers' parameters and result, as the placeholders
-- {signature} and {result} of their templates.
create or replace function pgque._batch_reader_shape()
returns jsonb language sql immutable as $$
    select pg_catalog.jsonb_build_object(
        'signature', 'i_queue_id integer, i_tables integer[], i_lower xid8, i_upper xid8,'
                     || ' i_s1 pg_snapshot, i_s2 pg_snapshot, i_in_list xid8[], i_owner integer,'
                     || ' i_ttl interval, i_slot integer, i_n integer, i_limit bigint',
        'result', 'table (ev_id bigint, ev_time timestamptz, ev_txid bigint, ev_retry integer,'
                  || ' ev_type text, ev_data text, ev_extra1 text, ev_extra2 text, ev_extra3 text,'
                  || ' ev_extra4 text)')
$$;

-- Internal: the name of leaf reader i_leaf.
-- (text || text: text || integer is only stable, which kept this function
-- from being inlined, so every receive parsed and planned it: 52 µs.)
create or replace function pgque._read_leaf_name(i_leaf integer)
returns text
language sql immutable
as $$ select '_read_l' || i_leaf::text $$;

-- Internal: writes leaf reader i_leaf for the queues that exist now with
-- ids 16k .. 16k+15 (one static query per event table and bound kind, each
-- table proven to be its queue's own), revoked from PUBLIC; drops it when
-- there is none.
create or replace function pgque._write_batch_reader(i_leaf integer)
returns void language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
-- Generated code is not parsed a second time on creation: see _write_router.
set check_function_bodies = off as $$
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
    v_signature constant text := pgque._batch_reader_shape() ->> 'signature';
    -- One event table's part: the events between the snapshots, then those
    -- of the in-progress list (the table's name proven to be the queue's).
    v_table_code constant text := $tpl$            return query select {columns} from {table} e
             where e.ev_txid >= i_lower and e.ev_txid <= i_upper
               and pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s2)
               and not pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s1){filters};
            if i_in_list is not null then
                return query select {columns} from {table} e
                 where e.ev_txid = any (i_in_list){filters};
            end if;$tpl$;
    -- One queue's code: its tables' parts in the batch's table order.
    v_queue_code constant text := $tpl$        foreach t in array i_tables loop
{branches}        end loop;
        return;$tpl$;
    -- A generic plan, planned once per session: never a sequential or bitmap
    -- scan of a table whose statistics (never ANALYZEd) say little, no JIT
    -- and no parallel workers (see the top of this file).
    v_function constant text := $tpl$create or replace function pgque.{name}({signature})
returns {result}
language plpgsql stable
set plan_cache_mode = force_generic_plan set enable_seqscan = off set enable_bitmapscan = off set jit = off set max_parallel_workers_per_gather = 0
as $reader$
declare
    t integer;
begin
{branches}    raise exception 'pgque internal error: no batch reader for queue id %', i_queue_id
        using detail = 'pgque:assertion_failed';
end
$reader$
$tpl$;
    v_ids integer[] := '{}';
    v_codes text[] := '{}';
    v_tables text[];
    v_table text;
    q pgque.queue%rowtype;
    t integer;
begin
    -- By a range of ids, which the primary key finds (a division would read
    -- every queue's row: 10,000 rows on every create_queue at 10,000 queues).
    for q in select * from pgque.queue
              where queue_id between i_leaf * pgque._router_leaf_size()
                                 and (i_leaf + 1) * pgque._router_leaf_size() - 1
              order by queue_id loop
        v_tables := '{}';
        for t in 0 .. q.queue_ntables - 1 loop
            v_table := pgque._event_table_name(q, t);
            v_tables := v_tables || pgque._render(v_table_code, pg_catalog.jsonb_build_object(
                'columns', v_columns, 'table', v_table, 'filters', v_filters));
        end loop;
        v_ids := v_ids || q.queue_id;
        v_codes := v_codes || pgque._render(v_queue_code, pg_catalog.jsonb_build_object(
            'branches', pgque._router_branches('t',
                array(select g from pg_catalog.generate_series(0, q.queue_ntables - 1) g),
                v_tables)));
    end loop;
    if pg_catalog.cardinality(v_ids) = 0 then
        execute pg_catalog.format('drop function if exists pgque.%I(%s)',
                                  pgque._read_leaf_name(i_leaf), v_signature);
        return;
    end if;
    execute pgque._render(v_function, pgque._batch_reader_shape() || pg_catalog.jsonb_build_object(
        'name', pg_catalog.quote_ident(pgque._read_leaf_name(i_leaf)),
        'branches', pgque._router_branches('i_queue_id', v_ids, v_codes)));
    execute pg_catalog.format('revoke all on function pgque.%I(%s) from public',
                              pgque._read_leaf_name(i_leaf), v_signature);
end
$$;

-- Internal: the reader router as the install first writes it, every call
-- by name; _write_batch_read_router gives it its static branches.
create or replace function pgque._read_batch(
    i_queue_id integer, i_tables integer[], i_lower xid8, i_upper xid8,
    i_s1 pg_snapshot, i_s2 pg_snapshot, i_in_list xid8[], i_owner integer, i_ttl interval,
    i_slot integer, i_n integer, i_limit bigint)
returns table (ev_id bigint, ev_time timestamptz, ev_txid bigint, ev_retry integer,
               ev_type text, ev_data text, ev_extra1 text, ev_extra2 text, ev_extra3 text,
               ev_extra4 text)
language plpgsql stable
as $$
begin
    return query execute pg_catalog.format(
        'select * from pgque.%I($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)',
        pgque._read_leaf_name(i_queue_id / pgque._router_leaf_size()))
      using i_queue_id, i_tables, i_lower, i_upper, i_s1, i_s2, i_in_list, i_owner, i_ttl,
            i_slot, i_n, i_limit;
end
$$;

-- Internal: writes the reader router: a static call of leaf k for queue
-- ids 16k .. 16k+15 below 2,048 (the leaves need not exist yet: PL/pgSQL
-- plans a branch when it first runs), a call by name above.
create or replace function pgque._write_batch_read_router()
returns void language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
-- Generated code is not parsed a second time on creation: see _write_router.
set check_function_bodies = off as $$
declare
    v_args constant text := 'i_queue_id, i_tables, i_lower, i_upper, i_s1, i_s2, i_in_list,'
                         || ' i_owner, i_ttl, i_slot, i_n, i_limit';
    v_signature constant text := pgque._batch_reader_shape() ->> 'signature';
    v_leaves constant integer[] :=
        array(select g from pg_catalog.generate_series(0, pgque._router_fanout() - 1) g);
    -- A static call per leaf (k: which 16 queue ids) below 2,048, a call by name above.
    v_function constant text := $tpl$create or replace function pgque._read_batch({signature})
returns {result}
language plpgsql stable
as $router$
declare
    k integer := i_queue_id / {leaf_size};
begin
{branches}    return query execute pg_catalog.format(
        'select * from pgque.%I($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)',
        pgque._read_leaf_name(k))
      using {args};
end
$router$
$tpl$;
    v_leaf_call constant text := $tpl$    return query select * from pgque.{name}({args});
    return;$tpl$;
begin
    execute pgque._render(v_function, pgque._batch_reader_shape() || pg_catalog.jsonb_build_object(
        'leaf_size', pgque._router_leaf_size(), 'args', v_args,
        'branches', pgque._router_branches('k', v_leaves,
            array(select pgque._render(v_leaf_call, pg_catalog.jsonb_build_object(
                             'name', pg_catalog.quote_ident(pgque._read_leaf_name(k)),
                             'args', v_args))
                    from pg_catalog.unnest(v_leaves) k))));
    execute pg_catalog.format('revoke all on function pgque._read_batch(%s) from public',
                              v_signature);
end
$$;

-- Internal: how to read open batch i_batch_id through the readers: the
-- arguments of _read_batch, but the slot, slot count and limit, and
-- whether the parts need merging (more than one table, or a txid list).
create or replace function pgque._batch_read_args(
    i_batch_id bigint,
    out queue_id integer, out tables integer[], out lower_txid xid8, out upper_txid xid8,
    out s1 pg_snapshot, out s2 pg_snapshot, out txid_list xid8[], out owner integer,
    out ttl interval, out merge boolean)
language plpgsql stable
as $$
declare
    b record := pgque._batch_range(i_batch_id);
    r record := pgque._tick_range_bounds(b.s1, b.s2);
begin
    queue_id := (b.queue).queue_id;
    tables := pgque._batch_table_numbers(b.queue, b.s1, b.s2);
    lower_txid := r.lower_txid;
    upper_txid := r.upper_txid;
    s1 := b.s1;
    s2 := b.s2;
    txid_list := r.txid_list;
    owner := b.sub_id;
    ttl := (b.queue).queue_event_ttl;
    merge := pg_catalog.cardinality(tables) > 1 or txid_list is not null;
end
$$;
