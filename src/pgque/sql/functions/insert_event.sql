-- Producing events: the PgQ primitives every send path goes through.

create or replace function pgque.insert_event_raw(
    queue_name text, ev_id bigint, ev_time timestamptz,
    ev_owner integer, ev_retry integer, ev_type text, ev_data text,
    ev_extra1 text, ev_extra2 text, ev_extra3 text, ev_extra4 text)
returns bigint
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_table text;
    v_disabled boolean;
    v_seq_id bigint;
begin
    -- Take the top-level txid before reading queue_cur_table: a writer that
    -- lands in the old table after a rotation then always has a txid below
    -- the rotation's step 2, which batch table selection relies on.
    perform pg_catalog.pg_current_xact_id();

    -- The sequence advances on every call, explicit ids included: the ticker
    -- watches it to notice activity.
    select q.queue_data_pfx || '_' || q.queue_cur_table,
           q.queue_disable_insert,
           pg_catalog.nextval(q.queue_event_seq::regclass)
      into v_table, v_disabled, v_seq_id
      from pgque.queue q
     where q.queue_name = insert_event_raw.queue_name;
    if not found then
        raise exception 'queue not found: %', insert_event_raw.queue_name
            using detail = 'pgque:queue_not_found';
    end if;
    if v_disabled and pg_catalog.current_setting('session_replication_role') <> 'replica' then
        raise exception 'Insert into queue disallowed' using detail = 'pgque:insert_disallowed';
    end if;

    execute 'insert into ' || pgque.quote_fqname(v_table)
         || ' (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data,'
         || '  ev_extra1, ev_extra2, ev_extra3, ev_extra4)'
         || ' values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)'
      using coalesce(insert_event_raw.ev_id, v_seq_id), coalesce(insert_event_raw.ev_time, now()),
            insert_event_raw.ev_owner, insert_event_raw.ev_retry,
            insert_event_raw.ev_type, insert_event_raw.ev_data,
            insert_event_raw.ev_extra1, insert_event_raw.ev_extra2,
            insert_event_raw.ev_extra3, insert_event_raw.ev_extra4;
    return coalesce(insert_event_raw.ev_id, v_seq_id);
end
$$;
comment on function pgque.insert_event_raw(text, bigint, timestamptz, integer, integer, text, text, text, text, text, text) is
    'Low-level insert of one event with every field given (NULL ev_id: a new id). Returns the event id.';

create or replace function pgque.insert_event(
    queue_name text, ev_type text, ev_data text,
    ev_extra1 text, ev_extra2 text, ev_extra3 text, ev_extra4 text)
returns bigint
language sql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
    select pgque.insert_event_raw(queue_name, null, now(), null, null,
                                  ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
$$;
comment on function pgque.insert_event(text, text, text, text, text, text, text) is
    'Inserts an event with type, data and four extra fields into the queue. Returns the event id.';

create or replace function pgque.insert_event(queue_name text, ev_type text, ev_data text)
returns bigint
language sql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
    select pgque.insert_event(queue_name, ev_type, ev_data, null, null, null, null)
$$;
comment on function pgque.insert_event(text, text, text) is
    'Inserts an event with type and data into the queue. Returns the event id.';

create or replace function pgque.current_event_table(x_queue_name text)
returns text
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_table text;
    v_disabled boolean;
begin
    select queue_data_pfx || '_' || queue_cur_table, queue_disable_insert
      into v_table, v_disabled
      from pgque.queue where queue_name = x_queue_name;
    if not found then
        raise exception 'Event queue not found' using detail = 'pgque:queue_not_found';
    end if;
    if v_disabled and pg_catalog.current_setting('session_replication_role') <> 'replica' then
        raise exception 'Insert into queue disallowed' using detail = 'pgque:insert_disallowed';
    end if;
    return v_table;
end
$$;
comment on function pgque.current_event_table(text) is
    'The event table writers currently fill, for bulk loads with COPY; valid only in the current transaction.';
