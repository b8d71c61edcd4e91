-- The insert routers: static INSERT statements for every queue's event tables.
--
-- Which table an event goes to depends on the queue and its current table,
-- so a single insert would need dynamic SQL, planned again on every call
-- (the PgQ C extension caches one plan per queue instead). pgque generates
-- PL/pgSQL functions holding one static INSERT per event table, whose plans
-- each session caches.
--
-- The routers form a tree of bounded shape, so that no function grows past
-- a fixed size with the number of queues and creating a queue rewrites one
-- small function:
--
--   _route_event            top: a branch per 2,048 queue ids in use
--   _route_event_m<m>       middle m: 128 branches, one per 16 queue ids
--   _route_event_l<k>       leaf k: the queues with ids 16k .. 16k+15,
--                           one static INSERT per event table
--
-- (and _route_batch* alike for send_batch's arrays). A single event of a
-- queue id below 2,048 skips the top: _insert_event calls _route_event_m0
-- itself (1.5 µs of a 35 µs send per transaction, measured). A middle router is
-- written when its first queue is created and never changed after; the top
-- is rewritten then too (once per 2,048 ids), to branch to it; a leaf by
-- every create_queue and drop_queue of its queues. A session therefore
-- compiles three small functions on its first send, and a new queue
-- invalidates only its leaf in other sessions. Each level is called as a
-- plain expression, which PL/pgSQL evaluates without the executor. Queue ids from 262,144 on have no branch and take the dynamic
-- path: only ever slower, never wrong.

-- Internal: the tree's shape.
create or replace function pgque._router_fanout()
returns integer
language sql immutable
as $$ select 128 $$;

create or replace function pgque._router_leaf_size()
returns integer
language sql immutable
as $$ select 16 $$;

-- Internal: i_template with each {name} replaced by i_values->>'name', in
-- one pass (a value is never searched for placeholders). The generators
-- below and in batch_reader.sql keep their code as such templates;
-- tests/engine/generated/ holds what they render for two queues.
create or replace function pgque._render(i_template text, i_values jsonb)
returns text language plpgsql immutable as $$
declare
    v_parts text[] := pg_catalog.regexp_split_to_array(i_template, '\{[a-z0-9_]+\}');
    v_names text[] := array(
        select m[1] from pg_catalog.regexp_matches(i_template, '\{([a-z0-9_]+)\}', 'g') m);
    v_out text := v_parts[1];
    i integer;
begin
    for i in 1 .. coalesce(pg_catalog.cardinality(v_names), 0) loop
        if not i_values ? v_names[i] then
            raise exception 'pgque internal error: no value for {%} in a template', v_names[i]
                using detail = 'pgque:assertion_failed';
        end if;
        v_out := v_out || (i_values ->> v_names[i]) || v_parts[i + 1];
    end loop;
    return v_out;
end
$$;

-- Internal: the parameters, pass-through arguments and per-table INSERT of
-- one router kind: 'event' (one event, every field given) or 'batch'
-- (send_batch's parallel arrays; each array but i_payloads may be NULL,
-- meaning all NULL, and i_type is used where i_types is NULL).
create or replace function pgque._router_kind(
    i_kind text, out params text, out args text, out insert_sql text)
language plpgsql immutable
as $$
begin
    if i_kind = 'event' then
        params := 'i_queue_id integer, i_table integer, i_ev_id bigint, i_ev_time timestamptz,'
               || ' i_ev_owner integer, i_ev_retry integer, i_ev_type text, i_ev_data text,'
               || ' i_ev_extra1 text, i_ev_extra2 text, i_ev_extra3 text, i_ev_extra4 text';
        args := 'i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type,'
             || ' i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4';
        insert_sql := 'insert into {table} (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data,'
                   || ' ev_extra1, ev_extra2, ev_extra3, ev_extra4)'
                   || ' values (i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data,'
                   || ' i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4)';
    elsif i_kind = 'batch' then
        params := 'i_queue_id integer, i_table integer, i_ids bigint[], i_payloads text[],'
               || ' i_types text[], i_type text,'
               || ' i_extra1 text[], i_extra2 text[], i_extra3 text[], i_extra4 text[]';
        args := 'i_queue_id, i_table, i_ids, i_payloads, i_types, i_type,'
             || ' i_extra1, i_extra2, i_extra3, i_extra4';
        -- The multi-array unnest walks the parallel arrays together. It
        -- exists only unqualified: the callers are definer functions with
        -- search_path pinned.
        insert_sql := 'insert into {table} (ev_id, ev_time, ev_type, ev_data,'
                   || ' ev_extra1, ev_extra2, ev_extra3, ev_extra4)'
                   || ' select id, pg_catalog.now(), coalesce(t, i_type), p, e1, e2, e3, e4'
                   || ' from unnest(i_ids, i_payloads, i_types, i_extra1, i_extra2, i_extra3, i_extra4)'
                   || ' as b(id, p, t, e1, e2, e3, e4)';
    else
        raise exception 'pgque internal error: no router kind %', i_kind
            using detail = 'pgque:assertion_failed';
    end if;
end
$$;

-- Internal: the schema-qualified name of event table i_table of queue q (NULL:
-- the parent of its tables), proven to be the queue's own (_queue_relation).
create or replace function pgque._event_table_name(q pgque.queue, i_table integer)
returns text language sql stable as $$
    select pg_catalog.format('pgque.%I', c.relname)
      from pg_catalog.pg_class c
     where c.oid = pgque._queue_relation(q, coalesce(i_table::text, 'data'))
$$;

-- Internal: the dynamic path, for a queue no router branch knows. The table
-- is found by the queue's id and proven to be its own.
create or replace function pgque._insert_dynamic(
    i_queue_id integer, i_table integer, i_ev_id bigint, i_ev_time timestamptz,
    i_ev_owner integer, i_ev_retry integer, i_ev_type text, i_ev_data text,
    i_ev_extra1 text, i_ev_extra2 text, i_ev_extra3 text, i_ev_extra4 text)
returns integer language plpgsql as $$
declare
    q pgque.queue%rowtype;
begin
    select * into strict q from pgque.queue where queue_id = i_queue_id;
    execute 'insert into ' || pgque._event_table_name(q, i_table)
         || ' (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data,'
         || ' ev_extra1, ev_extra2, ev_extra3, ev_extra4)'
         || ' values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)'
      using i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data,
            i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4;
    return 1;
end
$$;

-- Internal: the batch router's dynamic path (see _insert_dynamic).
create or replace function pgque._insert_batch_dynamic(
    i_queue_id integer, i_table integer, i_ids bigint[], i_payloads text[],
    i_types text[], i_type text,
    i_extra1 text[], i_extra2 text[], i_extra3 text[], i_extra4 text[])
returns integer language plpgsql as $$
declare
    q pgque.queue%rowtype;
begin
    select * into strict q from pgque.queue where queue_id = i_queue_id;
    execute 'insert into ' || pgque._event_table_name(q, i_table)
         || ' (ev_id, ev_time, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)'
         || ' select id, pg_catalog.now(), coalesce(t, $4), p, e1, e2, e3, e4'
         || ' from unnest($1, $2, $3, $5, $6, $7, $8) as b(id, p, t, e1, e2, e3, e4)'
      using i_ids, i_payloads, i_types, i_type, i_extra1, i_extra2, i_extra3, i_extra4;
    return 1;
end
$$;

-- Internal: PL/pgSQL code that branches on the integer expression i_var by
-- binary search over i_keys (ascending) and runs i_codes[i] when it equals
-- i_keys[i]; when none matches, control falls through past the code.
create or replace function pgque._router_branches(i_var text, i_keys integer[], i_codes text[])
returns text language plpgsql immutable as $$
declare
    -- Both halves of a search step; one branch of a linear run (keyword
    -- 'if' for the first, 'elsif' after), closed by 'end if;'.
    v_split constant text := $tpl$if {var} < {key} then
{low}
else
{high}
end if;
$tpl$;
    v_branch constant text := $tpl${keyword} {var} = {key} then
{code}
$tpl$;
    n integer := coalesce(pg_catalog.cardinality(i_keys), 0);
    half integer;
    v_code text := '';
    i integer;
begin
    if n = 0 then
        return '';
    end if;
    if n > 4 then
        half := n / 2;
        return pgque._render(v_split, pg_catalog.jsonb_build_object(
            'var', i_var, 'key', i_keys[half + 1],
            'low', pgque._router_branches(i_var, i_keys[1:half], i_codes[1:half]),
            'high', pgque._router_branches(i_var, i_keys[half + 1:n], i_codes[half + 1:n])));
    end if;
    for i in 1 .. n loop
        v_code := v_code || pgque._render(v_branch, pg_catalog.jsonb_build_object(
            'keyword', case when i = 1 then 'if' else 'elsif' end,
            'var', i_var, 'key', i_keys[i], 'code', i_codes[i]));
    end loop;
    return v_code || E'end if;\n';
end
$$;

-- Internal: writes one router function (name, kind, body) of the tree,
-- reachable only by its owner's definer functions.
create or replace function pgque._write_router(i_name text, i_kind text, i_body text)
returns void language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
-- Generated code is not parsed a second time on creation (its first call
-- compiles it; the tests call every kind): a reader leaf of 16 queues took
-- 3.1 ms to write instead of 5.4, an insert leaf 2.1 instead of 2.6.
set check_function_bodies = off as $$
declare
    v_function constant text := $tpl$create or replace function pgque.{name}({params})
returns integer
language plpgsql
as $router$
{body}$router$
$tpl$;
    k record;
begin
    k := pgque._router_kind(i_kind);
    execute pgque._render(v_function, pg_catalog.jsonb_build_object(
        'name', pg_catalog.quote_ident(i_name), 'params', k.params, 'body', i_body));
    execute pg_catalog.format('revoke all on function pgque.%I(%s) from public', i_name, k.params);
end
$$;

-- Internal: the code that hands the call to router i_name, or to the
-- dynamic path when i_name is NULL.
create or replace function pgque._router_call(i_kind text, i_name text)
returns text language sql immutable as $$
    select pgque._render('    return pgque.{function}({args});', pg_catalog.jsonb_build_object(
        'function', case when i_name is not null then pg_catalog.quote_ident(i_name)
                         when i_kind = 'event' then '_insert_dynamic'
                         else '_insert_batch_dynamic' end,
        'args', (pgque._router_kind(i_kind)).args))
$$;

-- Internal: the body of a top or middle router of a kind: a branch per key
-- of i_var (i_queue_id / i_divisor: which middle router, which leaf) that
-- hands the call to router i_targets[i], then the dynamic path.
create or replace function pgque._router_dispatch(
    i_kind text, i_var text, i_divisor integer, i_keys integer[], i_targets text[])
returns text language sql immutable as $$
    select pgque._render($tpl$declare
    {var} integer := i_queue_id / {divisor};
begin
{branches}{fallback}
end
$tpl$, pg_catalog.jsonb_build_object(
        'var', i_var, 'divisor', i_divisor,
        'branches', pgque._router_branches(i_var, i_keys,
            array(select pgque._router_call(i_kind, t.name)
                    from pg_catalog.unnest(i_targets) with ordinality t(name, n) order by t.n)),
        'fallback', pgque._router_call(i_kind, null)))
$$;

-- Internal: writes the top router of a kind with a branch for every middle
-- router there is (the install, and each new middle router, rewrite it).
create or replace function pgque._write_top_router(i_kind text)
returns void language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_middles integer[];
begin
    -- Its callers hold the 'queues' mutex (_update_router, the install): one
    -- writer at a time, which sees the middle routers the previous one wrote.
    v_middles := array(
        select substring(p.proname from '_m([0-9]+)$')::integer as m
          from pg_catalog.pg_proc p
         where p.pronamespace = 'pgque'::regnamespace
           and p.proname ~ ('^_route_' || i_kind || '_m[0-9]+$')
         order by m);
    -- A branch per middle router (m: which 2,048 queue ids).
    perform pgque._write_router('_route_' || i_kind, i_kind, pgque._router_dispatch(
        i_kind, 'm', pgque._router_fanout() * pgque._router_leaf_size(), v_middles,
        array(select '_route_' || i_kind || '_m' || m from pg_catalog.unnest(v_middles) m)));
end
$$;

-- Internal: writes middle router m of a kind unless it exists (its code
-- depends on m only), and then the top anew.
create or replace function pgque._ensure_middle_router(i_kind text, i_middle integer)
returns void language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_name text := '_route_' || i_kind || '_m' || i_middle;
    v_first integer := i_middle * pgque._router_fanout();
begin
    if exists (select 1 from pg_catalog.pg_proc
                where pronamespace = 'pgque'::regnamespace and proname = v_name) then
        return;
    end if;
    -- A branch per leaf (k: which 16 queue ids).
    perform pgque._write_router(v_name, i_kind, pgque._router_dispatch(
        i_kind, 'k', pgque._router_leaf_size(),
        array(select v_first + g from pg_catalog.generate_series(0, pgque._router_fanout() - 1) g),
        array(select '_route_' || i_kind || '_l' || (v_first + g)
                from pg_catalog.generate_series(0, pgque._router_fanout() - 1) g)));
    perform pgque._write_top_router(i_kind);
end
$$;

-- Internal: writes leaf router k of a kind for the queues that exist now
-- with ids 16k .. 16k+15: one static INSERT per event table, each table
-- proven to be its queue's own.
create or replace function pgque._write_leaf_router(i_kind text, i_leaf integer)
returns void language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    -- A branch per queue, and in it one per event table, then the dynamic path.
    v_body constant text := $tpl$begin
{branches}{fallback}
end
$tpl$;
    v_table_code constant text := $tpl$    {insert};
    return 1;$tpl$;
    v_insert text := (pgque._router_kind(i_kind)).insert_sql;
    v_ids integer[];
    v_codes text[];
begin
    select pg_catalog.array_agg(q.queue_id order by q.queue_id),
           pg_catalog.array_agg(pgque._router_branches('i_table',
               array(select t from pg_catalog.generate_series(0, q.queue_ntables - 1) t),
               array(select pgque._render(v_table_code, pg_catalog.jsonb_build_object(
                                'insert', pgque._render(v_insert, pg_catalog.jsonb_build_object(
                                    'table', pgque._event_table_name(q, t)))))
                       from pg_catalog.generate_series(0, q.queue_ntables - 1) t))
               order by q.queue_id)
      into v_ids, v_codes
      from pgque.queue q
     -- By a range of ids, which the primary key finds (see _write_batch_reader).
     where q.queue_id between i_leaf * pgque._router_leaf_size()
                          and (i_leaf + 1) * pgque._router_leaf_size() - 1;
    perform pgque._write_router('_route_' || i_kind || '_l' || i_leaf, i_kind,
        pgque._render(v_body, pg_catalog.jsonb_build_object(
            'branches', pgque._router_branches('i_queue_id', v_ids, v_codes),
            'fallback', pgque._router_call(i_kind, null))));
end
$$;

-- Internal: brings the routers of queue id i_queue_id's leaf, and its batch
-- reader (batch_reader.sql), up to date (create_queue and drop_queue call
-- it in their transaction).
create or replace function pgque._update_router(i_queue_id integer)
returns void language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_kind text;
    v_leaf integer := i_queue_id / pgque._router_leaf_size();
begin
    -- One writer at a time (create_queue and drop_queue took it first, and
    -- the install holds it); the statements after the lock see the queues
    -- the previous writer committed.
    perform pgque._lock_mutex('queues');
    perform pgque._write_batch_reader(v_leaf);
    if v_leaf >= pgque._router_fanout() * pgque._router_fanout() then
        return;  -- beyond the insert routers' tree: their dynamic path
    end if;
    foreach v_kind in array array['event', 'batch'] loop
        perform pgque._ensure_middle_router(v_kind, v_leaf / pgque._router_fanout());
        perform pgque._write_leaf_router(v_kind, v_leaf);
    end loop;
end
$$;

-- Internal: writes every router anew: the tops, the batch reader router
-- and, for the queues that exist, their middle and leaf routers and batch
-- readers (the install runs it, after dropping the routines of the previous
-- build).
create or replace function pgque._rebuild_routers()
returns void language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_kind text;
    v_queue_id integer;
begin
    perform pgque._write_batch_read_router();  -- batch_reader.sql
    foreach v_kind in array array['event', 'batch'] loop
        perform pgque._write_top_router(v_kind);
    end loop;
    for v_queue_id in
        select pg_catalog.min(queue_id) from pgque.queue
         group by queue_id / pgque._router_leaf_size() order by 1
    loop
        perform pgque._update_router(v_queue_id);
    end loop;
end
$$;

-- The tops before the install writes them (so that the grants cover the
-- names): every call takes the dynamic path.
create or replace function pgque._route_event(
    i_queue_id integer, i_table integer, i_ev_id bigint, i_ev_time timestamptz,
    i_ev_owner integer, i_ev_retry integer, i_ev_type text, i_ev_data text,
    i_ev_extra1 text, i_ev_extra2 text, i_ev_extra3 text, i_ev_extra4 text)
returns integer
language sql
as $$ select pgque._insert_dynamic($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) $$;

create or replace function pgque._route_batch(
    i_queue_id integer, i_table integer, i_ids bigint[], i_payloads text[],
    i_types text[], i_type text,
    i_extra1 text[], i_extra2 text[], i_extra3 text[], i_extra4 text[])
returns integer
language sql
as $$ select pgque._insert_batch_dynamic($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) $$;
