-- Small utilities shared by the engine.

create or replace function pgque.version()
returns text
language sql immutable
as $$ select '0.1.0'::text $$;
comment on function pgque.version() is
    'The installed pgque version.';

create or replace function pgque.quote_fqname(i_name text)
returns text
language sql immutable strict
as $$
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

create or replace function pgque.seq_getval(i_seq_name text)
returns bigint
language plpgsql strict
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
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
returns bigint
language plpgsql strict
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
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

-- Internal: the xid8 value as bigint (txids fit in 63 bits).
create or replace function pgque._xid8_to_int8(i_xid xid8)
returns bigint
language sql immutable strict parallel safe
as $$ select i_xid::text::bigint $$;

create or replace function pgque.log_event(
    i_level text, i_component text, i_message text, i_attrs jsonb default '{}')
returns void
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
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
