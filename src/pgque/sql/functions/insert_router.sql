-- The insert router: static INSERT statements for every queue's event tables.
--
-- Which table an event goes to depends on the queue and its current table,
-- so a single insert would need dynamic SQL, planned again on every call
-- (the PgQ C extension caches one plan per queue instead). pgque generates
-- _insert_routed(): a binary search over queue ids down to one static INSERT
-- per event table, whose plans PL/pgSQL caches per session. create_queue
-- and drop_queue regenerate it; a queue it does not know yet (a router built
-- from an older snapshot) falls through to dynamic SQL, so it is only ever
-- slower, never wrong.

-- Internal: the generic fallback, also the router's body before any queue exists.
create or replace function pgque._insert_routed(
    i_queue_id integer, i_table integer, i_table_name text,
    i_ev_id bigint, i_ev_time timestamptz, i_ev_owner integer, i_ev_retry integer,
    i_ev_type text, i_ev_data text,
    i_ev_extra1 text, i_ev_extra2 text, i_ev_extra3 text, i_ev_extra4 text)
returns void
language plpgsql
as $$
begin
    execute 'insert into ' || pgque.quote_fqname(i_table_name)
         || ' (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data,'
         || ' ev_extra1, ev_extra2, ev_extra3, ev_extra4)'
         || ' values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)'
      using i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data,
            i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4;
end
$$;

-- Internal: the router code for the queues in i_queues (sorted by id).
create or replace function pgque._insert_router_code(i_queues pgque.queue[])
returns text
language plpgsql immutable
as $$
declare
    n integer := coalesce(pg_catalog.cardinality(i_queues), 0);
    half integer;
    q pgque.queue;
    v_code text := '';
    v_tables text;
    i integer;
begin
    if n = 0 then
        return '';
    end if;
    if n > 8 then
        half := n / 2;
        return pg_catalog.format(
            E'if i_queue_id < %s then\n%s\nelse\n%s\nend if;\n',
            i_queues[half + 1].queue_id,
            pgque._insert_router_code(i_queues[1:half]),
            pgque._insert_router_code(i_queues[half + 1:n]));
    end if;
    foreach q in array i_queues loop
        v_tables := '';
        for i in 0 .. q.queue_ntables - 1 loop
            v_tables := v_tables || pg_catalog.format(
                E'%s i_table = %s then\n    insert into %s (ev_id, ev_time, ev_owner, ev_retry,'
                || ' ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)'
                || ' values (i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data,'
                || E' i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);\n    return;\n',
                case when i = 0 then 'if' else 'elsif' end, i,
                pgque.quote_fqname(q.queue_data_pfx || '_' || i));
        end loop;
        v_code := v_code || pg_catalog.format(
            E'%s i_queue_id = %s then\n%send if;\n',
            case when v_code = '' then 'if' else 'elsif' end, q.queue_id, v_tables);
    end loop;
    return v_code || E'end if;\n';
end
$$;

-- Internal: regenerates _insert_routed() for the queues that exist now.
create or replace function pgque._rebuild_insert_router()
returns void
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_queues pgque.queue[];
begin
    -- One rebuild at a time (key 0 of the tick lock class: no queue has id
    -- 0); the next statement then sees the queues the previous one saw.
    perform pg_catalog.pg_advisory_xact_lock(pgque._tick_lock_class(), 0);
    select pg_catalog.array_agg(q order by q.queue_id) into v_queues from pgque.queue q;
    execute pg_catalog.format($ddl$
create or replace function pgque._insert_routed(
    i_queue_id integer, i_table integer, i_table_name text,
    i_ev_id bigint, i_ev_time timestamptz, i_ev_owner integer, i_ev_retry integer,
    i_ev_type text, i_ev_data text,
    i_ev_extra1 text, i_ev_extra2 text, i_ev_extra3 text, i_ev_extra4 text)
returns void
language plpgsql
as $router$
begin
%s
    -- Not routed (a queue newer than this router): plan the insert now.
    execute 'insert into ' || pgque.quote_fqname(i_table_name)
         || ' (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data,'
         || ' ev_extra1, ev_extra2, ev_extra3, ev_extra4)'
         || ' values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)'
      using i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data,
            i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4;
end
$router$
$ddl$, pgque._insert_router_code(v_queues));
end
$$;
