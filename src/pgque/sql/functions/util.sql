-- Small utilities shared by the engine.

create or replace function pgque.version()
returns text
language sql immutable
set search_path = pgque, pg_catalog, pg_temp
as $$ select '0.1.0'::text $$;
comment on function pgque.version() is
    'The installed pgque version.';

create or replace function pgque.quote_fqname(i_name text)
returns text language sql immutable strict set search_path = pgque, pg_catalog, pg_temp as $$
    -- The first dot splits schema from name; an unqualified name is in public.
    select case
        when pg_catalog.strpos(i_name, '.') > 0 then
            pg_catalog.quote_ident(pg_catalog.split_part(i_name, '.', 1)) || '.'
            || pg_catalog.quote_ident(pg_catalog.substr(i_name, pg_catalog.strpos(i_name, '.') + 1))
        else 'public.' || pg_catalog.quote_ident(i_name)
    end
$$;
comment on function pgque.quote_fqname(text) is
    'Quotes a possibly schema-qualified name (the first dot splits; no schema means public).';

-- seq_getval and seq_setval run with the caller's rights, as PgQ's do: they
-- take any sequence name, so a definer version would reach other users'
-- sequences. pgque's own callers are definer functions and pass names
-- proven by _queue_relation().
create or replace function pgque.seq_getval(i_seq_name text)
returns bigint language plpgsql strict security invoker
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_value bigint;
begin
    -- last_value read from the sequence relation itself: non-transactional,
    -- never advances the sequence, and ignores is_called, as PgQ does.
    execute 'select last_value from ' || pgque.quote_fqname(i_seq_name) into v_value;
    return v_value;
end
$$;
comment on function pgque.seq_getval(text) is
    'The last value of a sequence, without advancing it.';

create or replace function pgque.seq_setval(i_seq_name text, i_new_value bigint)
returns bigint language plpgsql strict security invoker
set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_current bigint;
begin
    v_current := pgque.seq_getval(i_seq_name);
    if i_new_value > v_current then
        perform pg_catalog.setval(pgque.quote_fqname(i_seq_name)::regclass, i_new_value);
        return i_new_value;
    end if;
    return v_current;
end
$$;
comment on function pgque.seq_setval(text, bigint) is
    'Moves a sequence forward to the given value; never moves it back. Returns the resulting value.';

-- Internal: seq_setval for a sequence a definer function has proven to be
-- pgque's own (see _queue_relation): moves it forward, never back.
create or replace function pgque._seq_forward(i_seq regclass, i_new_value bigint)
returns bigint language plpgsql strict as $$
declare
    v_current bigint;
begin
    execute pg_catalog.format('select last_value from %s', i_seq) into v_current;
    if i_new_value > v_current then
        perform pg_catalog.setval(i_seq, i_new_value);
        return i_new_value;
    end if;
    return v_current;
end
$$;

create or replace function pgque.log_event(
    i_level text, i_component text, i_message text, i_attrs jsonb default '{}')
returns void language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if i_level is null or i_level not in ('debug', 'info', 'notice', 'warning', 'error') then
        raise exception 'log_event: level must be one of debug, info, notice, warning, error, got %',
            coalesce(i_level, 'NULL') using detail = 'pgque:invalid_argument';
    end if;
    -- Structured: a fixed prefix to grep for, the attributes as JSON in DETAIL.
    raise log 'pgque [%] %: %', i_level, i_component, i_message
        using detail = coalesce(i_attrs, '{}')::text;
end
$$;
comment on function pgque.log_event(text, text, text, jsonb) is
    'Writes a structured pgque event to the server log (RAISE LOG; attributes as JSON in DETAIL).';

-- Internal: queue i_queue_id's event sequence ('id') or tick sequence
-- ('tick'). The name follows from the id, in schema pgque where only
-- pgque's owner creates objects; never from the queue row's stored names.
create or replace function pgque._queue_sequence(i_queue_id integer, i_kind text)
returns regclass language sql stable as $$
    select pg_catalog.to_regclass(pg_catalog.format('pgque.%I',
               'event_' || i_queue_id || '_' || i_kind || '_seq'))
$$;

-- Internal: a queue's event sequence now, read as the ticker reads it.
create or replace function pgque._event_seq_now(i_queue_id integer)
returns bigint language sql stable as $$
    select coalesce(pg_catalog.pg_sequence_last_value(pgque._queue_sequence(i_queue_id, 'id')), 1)
$$;

-- Internal: the error for a NULL argument of a call on a queue:
-- invalid_argument '<caller>: <what> must not be null (queue <name>)'.
create or replace function pgque._refuse_null(i_caller text, i_what text, i_queue_name text)
returns void language plpgsql as $$
begin
    raise exception '%: % must not be null (queue %)', i_caller, i_what, i_queue_name
        using detail = 'pgque:invalid_argument';
end
$$;

-- Internal: the queue row by name, or queue_not_found ('queue not found:
-- <name>'; a NULL name is written as i_null_as).
create or replace function pgque._queue_row(i_queue_name text, i_null_as text default '<NULL>')
returns pgque.queue language plpgsql stable as $$
declare
    q pgque.queue;
begin
    select * into q from pgque.queue where queue_name = i_queue_name;
    if not found then
        raise exception 'queue not found: %', coalesce(i_queue_name, i_null_as)
            using detail = 'pgque:queue_not_found';
    end if;
    return q;
end
$$;

-- Internal: waits for a row of pgque.mutex ('install', 'queues'), held until
-- commit. A row lock on pgque's own table: no other login can take it, as it
-- could an advisory lock key (docs/development.md, "Coordination").
create or replace function pgque._lock_mutex(i_name text)
returns void language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform 1 from pgque.mutex where mutex_name = i_name for update;
    if not found then
        raise exception 'pgque.mutex has no row %: install pgque again', i_name
            using detail = 'pgque:invalid_state';
    end if;
end
$$;
comment on function pgque._lock_mutex(text) is
    'Internal: locks a row of pgque.mutex (the install''s, or the queue DDL''s) until commit.';
