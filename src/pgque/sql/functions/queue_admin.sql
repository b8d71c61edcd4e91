-- Creating, configuring and dropping queues.

create or replace function pgque._check_queue_name(i_queue_name text)
returns void
language plpgsql immutable
as $$
begin
    if i_queue_name is null then
        raise exception 'Invalid NULL value' using detail = 'pgque:invalid_argument';
    end if;
    if i_queue_name = '' then
        raise exception 'queue name must not be empty' using detail = 'pgque:invalid_argument';
    end if;
    -- The NOTIFY channel 'pgque_<name>' is an identifier: at most 63 bytes.
    if pg_catalog.octet_length(i_queue_name) > 57 then
        raise exception 'queue name too long: % bytes (max 57). pg_notify channel ''pgque_<queue_name>'' must fit in 63 bytes.',
            pg_catalog.octet_length(i_queue_name)
            using detail = 'pgque:invalid_argument';
    end if;
end
$$;

create or replace function pgque.tune_storage(i_queue_name text)
returns integer
language plpgsql strict
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    q pgque.queue%rowtype;
    i integer;
begin
    select * into q from pgque.queue where queue_name = i_queue_name;
    if not found then
        raise exception 'No such event queue' using detail = 'pgque:queue_not_found';
    end if;
    -- Event tables are emptied by TRUNCATE, never by DELETE: pack them and
    -- keep autovacuum away.
    for i in 0 .. q.queue_ntables - 1 loop
        execute format(
            'alter table %s set (fillfactor = 100, autovacuum_enabled = off, toast.autovacuum_enabled = off)',
            pgque.quote_fqname(q.queue_data_pfx || '_' || i));
    end loop;
    return 1;
end
$$;
comment on function pgque.tune_storage(text) is
    'Sets storage parameters on a queue''s event tables (fillfactor 100, no autovacuum).';

create or replace function pgque.grant_perms(x_queue_name text)
returns integer
language plpgsql strict
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    q pgque.queue%rowtype;
    v_table text;
    i integer;
begin
    select * into q from pgque.queue where queue_name = x_queue_name;
    if not found then
        raise exception 'No such event queue' using detail = 'pgque:queue_not_found';
    end if;
    for i in -1 .. q.queue_ntables - 1 loop
        v_table := pgque.quote_fqname(case when i < 0 then q.queue_data_pfx
                                           else q.queue_data_pfx || '_' || i end);
        execute format('revoke all on %s from public', v_table);
        execute format('grant select on %s to pgque_reader', v_table);
        execute format('grant all on %s to pgque_admin', v_table);
    end loop;
    foreach v_table in array array[q.queue_event_seq, q.queue_tick_seq] loop
        execute format('revoke all on sequence %s from public', pgque.quote_fqname(v_table));
        execute format('grant select on sequence %s to pgque_reader', pgque.quote_fqname(v_table));
        execute format('grant all on sequence %s to pgque_admin', pgque.quote_fqname(v_table));
    end loop;
    return 1;
end
$$;
comment on function pgque.grant_perms(text) is
    'Applies pgque''s role grants to a queue''s event tables and sequences.';

create or replace function pgque.create_queue(i_queue_name text)
returns integer
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_id integer;
    v_base text;
    i integer;
begin
    perform pgque._check_queue_name(i_queue_name);

    -- A concurrent create of the same name waits here and then sees the row.
    insert into pgque.queue (queue_name, queue_data_pfx, queue_event_seq, queue_tick_seq)
    values (i_queue_name, '', '', '')
    on conflict (queue_name) do nothing
    returning queue_id into v_id;
    if v_id is null then
        return 0;
    end if;

    v_base := 'event_' || v_id;
    update pgque.queue
       set queue_data_pfx = 'pgque.' || v_base,
           queue_event_seq = 'pgque.' || v_base || '_id_seq',
           queue_tick_seq = 'pgque.' || v_base || '_tick_seq'
     where queue_id = v_id;

    execute format('create sequence pgque.%I', v_base || '_id_seq');
    execute format('create sequence pgque.%I', v_base || '_tick_seq');
    execute format('create table pgque.%I () inherits (pgque.event_template)', v_base);
    for i in 0 .. 2 loop
        execute format('create table pgque.%I () inherits (pgque.%I)', v_base || '_' || i, v_base);
        execute format('alter table pgque.%I alter column ev_id set default nextval(%L)',
                       v_base || '_' || i, 'pgque.' || v_base || '_id_seq');
        execute format('create index %I on pgque.%I (ev_txid)',
                       v_base || '_' || i || '_txid_idx', v_base || '_' || i);
    end loop;

    perform pgque.grant_perms(i_queue_name);
    perform pgque.tune_storage(i_queue_name);
    perform pgque._rebuild_insert_router();
    perform pgque.log_event('info', 'queue', 'created', jsonb_build_object('queue', i_queue_name));
    -- Tick 1, so consumers can subscribe at once.
    perform pgque._tick(v_id, true);
    return 1;
end
$$;
comment on function pgque.create_queue(text) is
    'Creates a queue with its event tables and first tick. Returns 1, or 0 when it exists.';

create or replace function pgque.drop_queue(x_queue_name text, x_force boolean)
returns integer
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    q pgque.queue%rowtype;
    v_consumer text;
    v_messages text;
begin
    if x_queue_name is null then
        raise exception 'Invalid NULL value' using detail = 'pgque:invalid_argument';
    end if;
    select * into q from pgque.queue where queue_name = x_queue_name for update;
    if not found then
        raise exception 'No such event queue' using detail = 'pgque:queue_not_found';
    end if;

    if coalesce(x_force, false) then
        for v_consumer in
            select c.co_name
              from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
             where s.sub_queue = q.queue_id
             order by c.co_name
        loop
            perform pgque.unregister_consumer(x_queue_name, v_consumer);
        end loop;
    elsif exists (select 1 from pgque.subscription where sub_queue = q.queue_id) then
        raise exception 'cannot drop queue, consumers still attached'
            using detail = 'pgque:consumers_attached';
    end if;

    -- Quietly: DROP ... CASCADE would report each child table as a NOTICE.
    v_messages := pg_catalog.current_setting('client_min_messages');
    perform pg_catalog.set_config('client_min_messages', 'warning', true);
    execute format('drop table %s cascade', pgque.quote_fqname(q.queue_data_pfx));
    perform pg_catalog.set_config('client_min_messages', v_messages, true);
    delete from pgque.retry_queue where ev_queue = q.queue_id;
    delete from pgque.delayed_events where de_queue_name = q.queue_name;
    delete from pgque.tick where tick_queue = q.queue_id;
    execute format('drop sequence %s', pgque.quote_fqname(q.queue_event_seq));
    execute format('drop sequence %s', pgque.quote_fqname(q.queue_tick_seq));
    delete from pgque.queue where queue_id = q.queue_id;
    perform pgque._rebuild_insert_router();
    perform pgque.log_event('info', 'queue', 'dropped',
                            jsonb_build_object('queue', x_queue_name, 'force', coalesce(x_force, false)));
    return 1;
end
$$;
comment on function pgque.drop_queue(text, boolean) is
    'Drops a queue with its events and ticks; with x_force, unregisters its consumers first.';

create or replace function pgque.drop_queue(x_queue_name text)
returns integer
language sql strict
security definer set search_path = pgque, pg_catalog, pg_temp
as $$ select pgque.drop_queue(x_queue_name, false) $$;
comment on function pgque.drop_queue(text) is
    'Drops a queue that has no consumers.';

create or replace function pgque.set_queue_config(
    x_queue_name text, x_param_name text, x_param_value text)
returns integer
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_queue_id integer;
    v_int integer;
    v_interval interval;
begin
    if x_queue_name is null or x_param_name is null then
        raise exception 'Invalid NULL value' using detail = 'pgque:invalid_argument';
    end if;
    select queue_id into v_queue_id from pgque.queue where queue_name = x_queue_name for update;
    if not found then
        raise exception 'No such event queue' using detail = 'pgque:queue_not_found';
    end if;

    -- Each name maps to one column through this fixed list; the value is
    -- cast, never spliced into SQL. NULL puts the column back to its default.
    case x_param_name
    when 'ticker_max_count' then
        v_int := x_param_value::integer;
        if v_int <= 0 then
            raise exception 'set_queue_config: ticker_max_count must be > 0, got %', v_int
                using detail = 'pgque:invalid_argument';
        end if;
        update pgque.queue set queue_ticker_max_count = coalesce(v_int, 500)
         where queue_id = v_queue_id;
    when 'ticker_max_lag' then
        v_interval := x_param_value::interval;
        if v_interval < interval '0' then
            raise exception 'set_queue_config: ticker_max_lag must be >= 0, got %', v_interval
                using detail = 'pgque:invalid_argument';
        end if;
        update pgque.queue set queue_ticker_max_lag = coalesce(v_interval, interval '3 seconds')
         where queue_id = v_queue_id;
    when 'ticker_idle_period' then
        v_interval := x_param_value::interval;
        if v_interval < interval '0' then
            raise exception 'set_queue_config: ticker_idle_period must be >= 0, got %', v_interval
                using detail = 'pgque:invalid_argument';
        end if;
        update pgque.queue set queue_ticker_idle_period = coalesce(v_interval, interval '1 minute')
         where queue_id = v_queue_id;
    when 'rotation_period' then
        v_interval := x_param_value::interval;
        if v_interval < interval '0' then
            raise exception 'set_queue_config: rotation_period must be >= 0, got %', v_interval
                using detail = 'pgque:invalid_argument';
        end if;
        update pgque.queue set queue_rotation_period = coalesce(v_interval, interval '2 hours')
         where queue_id = v_queue_id;
    when 'ticker_paused' then
        update pgque.queue set queue_ticker_paused = coalesce(x_param_value::boolean, false)
         where queue_id = v_queue_id;
    when 'external_ticker' then
        update pgque.queue set queue_external_ticker = coalesce(x_param_value::boolean, false)
         where queue_id = v_queue_id;
    when 'max_retries' then
        v_int := x_param_value::integer;
        if v_int < 0 then
            raise exception 'set_queue_config: max_retries must be >= 0, got %', v_int
                using detail = 'pgque:invalid_argument';
        end if;
        update pgque.queue set queue_max_retries = v_int where queue_id = v_queue_id;
    when 'event_ttl' then
        v_interval := x_param_value::interval;
        if v_interval <= interval '0' then
            raise exception 'set_queue_config: event_ttl must be > 0, got %', v_interval
                using detail = 'pgque:invalid_argument';
        end if;
        update pgque.queue set queue_event_ttl = v_interval where queue_id = v_queue_id;
    else
        -- The trailing "s" is PgQ's own wording, kept for callers matching it.
        raise exception 'cannot change parameter "%s"', x_param_name
            using detail = 'pgque:invalid_argument';
    end case;
    return 1;
end
$$;
comment on function pgque.set_queue_config(text, text, text) is
    'Sets one queue parameter (name without the queue_ prefix). NULL restores the default.';
