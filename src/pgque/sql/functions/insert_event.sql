-- Producing events: the PgQ primitives every send path goes through.

-- Internal: the one insert path. Callers are SECURITY DEFINER functions.
create or replace function pgque._insert_event(
    i_queue_name text, i_ev_id bigint, i_ev_time timestamptz,
    i_ev_owner integer, i_ev_retry integer, i_ev_type text, i_ev_data text,
    i_ev_extra1 text, i_ev_extra2 text, i_ev_extra3 text, i_ev_extra4 text)
returns bigint language plpgsql as $$
declare
    v_queue_id integer;
    v_cur_table integer;
    v_disabled boolean;
    v_seq_id bigint;
    v_txid xid8;
    v_routed integer;
begin
    -- Take the top-level txid before reading queue_cur_table: a writer that
    -- lands in the old table after a rotation then always has a txid below
    -- the rotation's step 2, which batch table selection relies on. (An
    -- assignment, not PERFORM: PL/pgSQL evaluates it without the executor.)
    v_txid := pg_catalog.pg_current_xact_id();

    -- The sequence advances on every call, explicit ids included: the ticker
    -- watches it to notice activity.
    select q.queue_id, q.queue_cur_table,
           q.queue_disable_insert, pg_catalog.nextval(pgque._queue_sequence(q.queue_id, 'id'))
      into v_queue_id, v_cur_table, v_disabled, v_seq_id
      from pgque.queue q
     where q.queue_name = i_queue_name;
    if not found then
        raise exception 'queue not found: %', i_queue_name using detail = 'pgque:queue_not_found';
    end if;
    if v_disabled and pg_catalog.current_setting('session_replication_role') <> 'replica' then
        raise exception 'Insert into queue disallowed' using detail = 'pgque:insert_disallowed';
    end if;

    -- Queue ids below 2,048 go to their middle router (m0) at once: the top
    -- would only branch to it (insert_router.sql). The bound is constant-folded.
    if v_queue_id < pgque._router_fanout() * pgque._router_leaf_size() then
        v_routed := pgque._route_event_m0(
            v_queue_id, v_cur_table, coalesce(i_ev_id, v_seq_id), coalesce(i_ev_time, pg_catalog.now()),
            i_ev_owner, i_ev_retry, i_ev_type, i_ev_data,
            i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
    else
        v_routed := pgque._route_event(
            v_queue_id, v_cur_table, coalesce(i_ev_id, v_seq_id), coalesce(i_ev_time, pg_catalog.now()),
            i_ev_owner, i_ev_retry, i_ev_type, i_ev_data,
            i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
    end if;
    -- wakeup (latency): _wake's own first test, as a simple expression here,
    -- so that a send costs no executor run while no ticker waits.
    if pg_catalog.pg_sequence_last_value('pgque.ticker_wake_seq'::regclass) = 0 then
        perform pgque._wake(v_queue_id);
    end if;
    return coalesce(i_ev_id, v_seq_id);
end
$$;

create or replace function pgque.insert_event_raw(
    queue_name text, ev_id bigint, ev_time timestamptz,
    ev_owner integer, ev_retry integer, ev_type text, ev_data text,
    ev_extra1 text, ev_extra2 text, ev_extra3 text, ev_extra4 text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._insert_event($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11); end $$;
comment on function pgque.insert_event_raw(text, bigint, timestamptz, integer, integer, text, text, text, text, text, text) is
    'Low-level insert of one event with every field given (NULL ev_id: a new id). Returns the event id.';

create or replace function pgque.insert_event(
    queue_name text, ev_type text, ev_data text,
    ev_extra1 text, ev_extra2 text, ev_extra3 text, ev_extra4 text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._insert_event($1, null, pg_catalog.now(), null, null, $2, $3, $4, $5, $6, $7); end $$;
comment on function pgque.insert_event(text, text, text, text, text, text, text) is
    'Inserts an event with type, data and four extra fields into the queue. Returns the event id.';

create or replace function pgque.insert_event(queue_name text, ev_type text, ev_data text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._insert_event($1, null, pg_catalog.now(), null, null, $2, $3, null, null, null, null); end $$;
comment on function pgque.insert_event(text, text, text) is
    'Inserts an event with type and data into the queue. Returns the event id.';

create or replace function pgque.current_event_table(x_queue_name text)
returns text language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
begin
    -- As in _insert_event: the caller's txid before the current table, so a
    -- COPY into the answer cannot land in a retired table above step 2.
    perform pg_catalog.pg_current_xact_id();
    select * into q from pgque.queue where queue_name = x_queue_name;
    if not found then
        raise exception 'Event queue not found' using detail = 'pgque:queue_not_found';
    end if;
    if q.queue_disable_insert
       and pg_catalog.current_setting('session_replication_role') <> 'replica' then
        raise exception 'Insert into queue disallowed' using detail = 'pgque:insert_disallowed';
    end if;
    return pgque._event_table_name(q, q.queue_cur_table);
end
$$;
comment on function pgque.current_event_table(text) is
    'The event table writers currently fill, for bulk loads with COPY; valid only in the current transaction.';
