-- Producing events: the one insert path (_insert_event), PgQ's insert_event
-- family and current_event_table, then the modern API built on it: send,
-- send_batch, insert_event_bulk.

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

-- --------------------------------------------------------------------------
-- The modern API.
--
-- text payloads are stored verbatim (untyped literals choose the text
-- overloads); jsonb payloads are validated by their type and stored as
-- canonical JSON text. Storage is ev_data text either way. A send is
-- visible to consumers once its transaction commits and a later tick
-- covers it.

create or replace function pgque.send(queue_name text, type_name text, payload text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._insert_event($1, null, pg_catalog.now(), null, null, $2, $3, null, null, null, null); end $$;
comment on function pgque.send(text, text, text) is
    'Sends one message with the given type; the text payload is stored verbatim. Returns the event id.';

create or replace function pgque.send(queue_name text, type_name text, payload jsonb)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._insert_event($1, null, pg_catalog.now(), null, null, $2, $3::text, null, null, null, null); end $$;
comment on function pgque.send(text, text, jsonb) is
    'Sends one JSON message with the given type, stored as canonical JSON text. Returns the event id.';

create or replace function pgque.send(queue_name text, payload text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._insert_event($1, null, pg_catalog.now(), null, null, 'default', $2, null, null, null, null); end $$;
comment on function pgque.send(text, text) is
    'Sends one message of type ''default''; the text payload is stored verbatim. Returns the event id.';

create or replace function pgque.send(queue_name text, payload jsonb)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._insert_event($1, null, pg_catalog.now(), null, null, 'default', $2::text, null, null, null, null); end $$;
comment on function pgque.send(text, jsonb) is
    'Sends one JSON message of type ''default''. Returns the event id.';

create or replace function pgque.send(
    queue_name text, type_name text, payload text,
    extra1 text, extra2 text, extra3 text, extra4 text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._insert_event($1, null, pg_catalog.now(), null, null, $2, $3, $4, $5, $6, $7); end $$;
comment on function pgque.send(text, text, text, text, text, text, text) is
    'Sends one message with type, verbatim text payload and the four extra fields (ev_extra1..4). Returns the event id.';

create or replace function pgque.send(
    queue_name text, type_name text, payload jsonb,
    extra1 text, extra2 text, extra3 text, extra4 text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._insert_event($1, null, pg_catalog.now(), null, null, $2, $3::text, $4, $5, $6, $7); end $$;
comment on function pgque.send(text, text, jsonb, text, text, text, text) is
    'Sends one JSON message with type and the four extra fields (ev_extra1..4). Returns the event id.';


-- With a partition key, stored in ev_extra1 (see partition.sql).
create or replace function pgque.send(i_queue text, i_type text, i_payload jsonb, i_partition_key text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._insert_event(i_queue, null, pg_catalog.now(), null, null, i_type, i_payload::text, i_partition_key, null, null, null); end $$;
comment on function pgque.send(text, text, jsonb, text) is
    'Sends a JSON message with a partition key (ev_extra1). Returns the event id.';

create or replace function pgque.send(i_queue text, i_type text, i_payload text, i_partition_key text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._insert_event(i_queue, null, pg_catalog.now(), null, null, i_type, i_payload, i_partition_key, null, null, null); end $$;
comment on function pgque.send(text, text, text, text) is
    'Sends a verbatim text message with a partition key (ev_extra1). Returns the event id.';

-- Internal: inserts many events into one queue with one statement. Every
-- array but i_payloads may be NULL (all NULL) or must have its length;
-- i_type is used where i_types is NULL. Returns the ids in input order.
create or replace function pgque._send_batch(
    i_queue_name text, i_type text, i_types text[], i_payloads text[],
    i_extra1 text[], i_extra2 text[], i_extra3 text[], i_extra4 text[])
returns bigint[] language plpgsql as $$
declare
    n integer;
    q pgque.queue%rowtype;
    v_ids bigint[];
    v_seq regclass;
    v_extra text[];
    v_name text;
    i integer := 0;
begin
    if i_payloads is null then
        raise exception 'payloads must not be null' using detail = 'pgque:invalid_argument';
    end if;
    n := pg_catalog.cardinality(i_payloads);
    if n = 0 then
        return '{}';
    end if;
    foreach v_name in array array['types', 'extra1', 'extra2', 'extra3', 'extra4'] loop
        i := i + 1;
        v_extra := case i when 1 then i_types when 2 then i_extra1 when 3 then i_extra2
                          when 4 then i_extra3 else i_extra4 end;
        if v_extra is not null and pg_catalog.cardinality(v_extra) <> n then
            raise exception 'send_batch: % has % elements, payloads has %; parallel arrays must have the same length',
                v_name, pg_catalog.cardinality(v_extra), n
                using detail = 'pgque:invalid_argument';
        end if;
    end loop;

    -- The txid first, then the current table (see _insert_event).
    perform pg_catalog.pg_current_xact_id();
    select * into q from pgque.queue where queue_name = i_queue_name;
    if not found then
        raise exception 'queue not found: %', i_queue_name using detail = 'pgque:queue_not_found';
    end if;
    if q.queue_disable_insert
       and pg_catalog.current_setting('session_replication_role') <> 'replica' then
        raise exception 'Insert into queue disallowed' using detail = 'pgque:insert_disallowed';
    end if;

    -- Ids in input order, then one INSERT ... SELECT for the whole batch,
    -- through the router's static statement for the queue's current table.
    -- The sequence is looked up once: a cast in the query ran per row.
    v_seq := pgque._queue_sequence(q.queue_id, 'id');
    v_ids := array(select pg_catalog.nextval(v_seq) from pg_catalog.generate_series(1, n));
    i := pgque._route_batch(q.queue_id, q.queue_cur_table,
        v_ids, i_payloads, i_types, i_type, i_extra1, i_extra2, i_extra3, i_extra4);
    perform pgque._wake(q.queue_id);  -- wakeup (latency)
    return v_ids;
end
$$;

create or replace function pgque.send_batch(queue_name text, type_name text, payloads text[])
returns bigint[] language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._send_batch($1, $2, null, $3, null, null, null, null); end $$;
comment on function pgque.send_batch(text, text, text[]) is
    'Sends many verbatim text messages of one type in one statement; NULL elements become NULL payloads. Returns the ids in input order.';

create or replace function pgque.send_batch(queue_name text, type_name text, payloads jsonb[])
returns bigint[] language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._send_batch($1, $2, null, $3::text[], null, null, null, null); end $$;
comment on function pgque.send_batch(text, text, jsonb[]) is
    'Sends many JSON messages of one type in one statement. Returns the ids in input order.';

create or replace function pgque.send_batch(queue_name text, payloads text[])
returns bigint[] language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._send_batch($1, 'default', null, $2, null, null, null, null); end $$;
comment on function pgque.send_batch(text, text[]) is
    'Sends many verbatim text messages of type ''default''. Returns the ids in input order.';

create or replace function pgque.send_batch(queue_name text, payloads jsonb[])
returns bigint[] language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._send_batch($1, 'default', null, $2::text[], null, null, null, null); end $$;
comment on function pgque.send_batch(text, jsonb[]) is
    'Sends many JSON messages of type ''default''. Returns the ids in input order.';

create or replace function pgque.send_batch(
    queue_name text, type_names text[], payloads text[],
    extra1 text[], extra2 text[], extra3 text[], extra4 text[])
returns bigint[] language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._send_batch($1, 'default', $2, $3, $4, $5, $6, $7); end $$;
comment on function pgque.send_batch(text, text[], text[], text[], text[], text[], text[]) is
    'Sends many verbatim text messages with per-message type and extras (parallel arrays of one length; a NULL array means all NULL; a NULL type means ''default''). Returns the ids in input order.';

create or replace function pgque.send_batch(
    queue_name text, type_names text[], payloads jsonb[],
    extra1 text[], extra2 text[], extra3 text[], extra4 text[])
returns bigint[] language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._send_batch($1, 'default', $2, $3::text[], $4, $5, $6, $7); end $$;
comment on function pgque.send_batch(text, text[], jsonb[], text[], text[], text[], text[]) is
    'Sends many JSON messages with per-message type and extras (parallel arrays). Returns the ids in input order.';

create or replace function pgque.insert_event_bulk(
    queue_name text, ev_type text, ev_data_list text[])
returns bigint[] language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._send_batch($1, $2, null, $3, null, null, null, null); end $$;
comment on function pgque.insert_event_bulk(text, text, text[]) is
    'Owner only: inserts many events of one type in one statement. Returns the ids in input order.';
