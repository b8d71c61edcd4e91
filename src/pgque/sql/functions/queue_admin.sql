-- Creating, configuring and dropping queues.

-- Internal: a new queue's or consumer's name (i_what: 'queue', 'consumer'):
-- not empty, and, since a name is shown in tables, log lines and URLs, no
-- line breaks or other control characters, no spaces at either end (names
-- that look alike).
create or replace function pgque._check_name(i_what text, i_name text)
returns void language plpgsql immutable as $$
begin
    if coalesce(i_name, '') = '' then
        raise exception '% name must not be empty', i_what using detail = 'pgque:invalid_argument';
    end if;
    if i_name ~ '[[:cntrl:]]' then
        raise exception '% name % must not contain control characters (newline, tab, ...)',
            i_what, pg_catalog.to_json(i_name) using detail = 'pgque:invalid_argument';
    end if;
    if i_name ~ '^[[:space:]]|[[:space:]]$' then
        raise exception '% name % must not begin or end with a space',
            i_what, pg_catalog.to_json(i_name) using detail = 'pgque:invalid_argument';
    end if;
end
$$;

create or replace function pgque._check_queue_name(i_queue_name text)
returns void language plpgsql immutable as $$
begin
    if i_queue_name is null then
        raise exception 'Invalid NULL value' using detail = 'pgque:invalid_argument';
    end if;
    perform pgque._check_name('queue', i_queue_name);
    -- The NOTIFY channel 'pgque_<name>' is an identifier: at most 63 bytes.
    if pg_catalog.octet_length(i_queue_name) > 57 then
        raise exception 'queue name too long: % bytes (max 57). pg_notify channel ''pgque_<queue_name>'' must fit in 63 bytes.',
            pg_catalog.octet_length(i_queue_name)
            using detail = 'pgque:invalid_argument';
    end if;
end
$$;

-- Internal: an object of queue q, proven to be the queue's own before any
-- definer function drops, truncates, locks, alters or moves it. i_part is
-- 'data' (the parent event table), '0'..'n-1' (a child table), 'event_seq'
-- or 'tick_seq'. The name is derived from the queue id, never taken from a
-- stored string, and the object found must be in schema pgque (by OID) and
-- of the right kind; tables must descend from pgque.event_template.
create or replace function pgque._queue_relation(q pgque.queue, i_part text)
returns regclass language plpgsql stable set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_name text := 'event_' || q.queue_id::text;
    v_kind "char" := 'r';
    v_parent regclass := 'pgque.event_template'::regclass;
    v_rel regclass;
begin
    case
    when i_part = 'data' then
        null;
    when i_part = 'event_seq' then
        v_name := v_name || '_id_seq';
        v_kind := 'S';
    when i_part = 'tick_seq' then
        v_name := v_name || '_tick_seq';
        v_kind := 'S';
    when i_part ~ '^[0-9]+$' and i_part::integer < q.queue_ntables then
        v_name := v_name || '_' || i_part;
        v_parent := pgque._queue_relation(q, 'data');
    else
        raise exception 'pgque internal error: no queue object %', i_part
            using detail = 'pgque:assertion_failed';
    end case;
    select c.oid into v_rel
      from pg_catalog.pg_class c
     where c.relnamespace = 'pgque'::regnamespace and c.relname = v_name and c.relkind = v_kind
       -- The parents of this one table (by inhrelid: event_template has a
       -- child per queue, so a lookup by parent would grow with the queues).
       and (v_kind = 'S' or v_parent = any (array(
            select i.inhparent from pg_catalog.pg_inherits i where i.inhrelid = c.oid)));
    if v_rel is null then
        raise exception 'pgque corruption: queue % has no % object pgque.%',
            q.queue_name, i_part, v_name using detail = 'pgque:corruption';
    end if;
    return v_rel;
end
$$;

create or replace function pgque.tune_storage(i_queue_name text)
returns integer language plpgsql strict
security definer set search_path = pgque, pg_catalog, pg_temp as $$
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
        execute pg_catalog.format(
            'alter table %s set (fillfactor = 100, autovacuum_enabled = off, toast.autovacuum_enabled = off)',
            pgque._queue_relation(q, i::text));
    end loop;
    return 1;
end
$$;
comment on function pgque.tune_storage(text) is
    'Sets storage parameters on a queue''s event tables (fillfactor 100, no autovacuum).';

create or replace function pgque.grant_perms(x_queue_name text)
returns integer language plpgsql strict
security definer set search_path = pgque, pg_catalog, pg_temp as $$
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
        v_table := pgque._queue_relation(q, case when i < 0 then 'data' else i::text end);
        execute pg_catalog.format('revoke all on %s from public, pgque_reader, pgque_writer, pgque_admin',
                       v_table);
        execute pg_catalog.format('grant select on %s to pgque_reader, pgque_admin', v_table);
    end loop;
    foreach v_table in array array[pgque._queue_relation(q, 'event_seq')::text,
                                   pgque._queue_relation(q, 'tick_seq')::text] loop
        execute pg_catalog.format('revoke all on sequence %s from public, pgque_reader, pgque_writer, pgque_admin',
                       v_table);
        execute pg_catalog.format('grant select on sequence %s to pgque_reader, pgque_admin', v_table);
    end loop;
    return 1;
end
$$;
comment on function pgque.grant_perms(text) is
    'Applies pgque''s role grants to a queue''s event tables and sequences.';

create or replace function pgque.create_queue(i_queue_name text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_id integer;
    v_base text;
    i integer;
begin
    perform pgque._check_queue_name(i_queue_name);
    -- Queue DDL and the install take this first, so they never deadlock
    -- (each rewrites the routers).
    perform pgque._lock_mutex('queues');

    -- A concurrent create of the same name waits here and then sees the row.
    -- The object names follow from the id (a CHECK constraint holds them to it).
    v_id := pg_catalog.nextval(pg_catalog.pg_get_serial_sequence('pgque.queue', 'queue_id')::regclass);
    v_base := 'event_' || v_id;
    insert into pgque.queue (queue_id, queue_name, queue_data_pfx, queue_event_seq, queue_tick_seq)
    values (v_id, i_queue_name, 'pgque.' || v_base, 'pgque.' || v_base || '_id_seq',
            'pgque.' || v_base || '_tick_seq')
    on conflict (queue_name) do nothing;
    if not found then
        return 0;
    end if;
    insert into pgque.tick_lock (tl_queue) values (v_id);

    execute pg_catalog.format('create sequence pgque.%I', v_base || '_id_seq');
    execute pg_catalog.format('create sequence pgque.%I', v_base || '_tick_seq');
    execute pg_catalog.format('create table pgque.%I () inherits (pgque.event_template)', v_base);
    for i in 0 .. 2 loop
        execute pg_catalog.format('create table pgque.%I () inherits (pgque.%I)', v_base || '_' || i, v_base);
        execute pg_catalog.format('alter table pgque.%I alter column ev_id set default pg_catalog.nextval(%L)',
                       v_base || '_' || i, 'pgque.' || v_base || '_id_seq');
        execute pg_catalog.format('create index %I on pgque.%I (ev_txid)',
                       v_base || '_' || i || '_txid_idx', v_base || '_' || i);
    end loop;

    perform pgque.grant_perms(i_queue_name);
    perform pgque.tune_storage(i_queue_name);
    perform pgque._update_router(v_id);
    perform pgque.log_event('info', 'queue', 'created', pg_catalog.jsonb_build_object('queue', i_queue_name));
    -- Tick 1, so consumers can subscribe at once.
    perform pgque._tick(v_id, true);
    return 1;
end
$$;
comment on function pgque.create_queue(text) is
    'Creates a queue with its event tables and first tick. Returns 1, or 0 when it exists.';


create or replace function pgque.create_queue(i_queue text, i_options jsonb)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_created integer;
    v_key text;
    v_value jsonb;
begin
    if i_options is not null and pg_catalog.jsonb_typeof(i_options) <> 'object' then
        raise exception 'create_queue: options must be a JSON object, got % (queue %)',
            pg_catalog.jsonb_typeof(i_options), i_queue using detail = 'pgque:invalid_argument';
    end if;
    v_created := pgque.create_queue(i_queue);
    -- Each option goes through set_queue_config in this transaction: a bad
    -- one raises, and the queue is not created either.
    for v_key, v_value in select * from pg_catalog.jsonb_each(coalesce(i_options, '{}')) loop
        if pg_catalog.jsonb_typeof(v_value) not in ('string', 'number', 'boolean', 'null') then
            raise exception 'create_queue: option % of queue % must be a string, number or boolean, got %',
                v_key, i_queue, pg_catalog.jsonb_typeof(v_value)
                using detail = 'pgque:invalid_argument';
        end if;
        perform pgque.set_queue_config(i_queue, v_key, v_value #>> '{}');
    end loop;
    return v_created;
end
$$;
comment on function pgque.create_queue(text, jsonb) is
    'Creates a queue and applies each option (set_queue_config names, e.g. {"max_retries": 3}) in the same transaction. Returns 1, or 0 when it existed.';

create or replace function pgque.pause_queue(i_queue text)
returns void language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque.set_queue_config(i_queue, 'ticker_paused', 'true');
end
$$;
comment on function pgque.pause_queue(text) is
    'Stops ticking the queue: sends still succeed, consumers get nothing new until resume_queue().';

create or replace function pgque.resume_queue(i_queue text)
returns void language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque.set_queue_config(i_queue, 'ticker_paused', 'false');
end
$$;
comment on function pgque.resume_queue(text) is
    'Resumes ticking a paused queue.';

create or replace function pgque.drop_queue(x_queue_name text, x_force boolean)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue%rowtype;
    v_consumer text;
    v_messages text;
begin
    if x_queue_name is null then
        raise exception 'Invalid NULL value' using detail = 'pgque:invalid_argument';
    end if;
    -- First, as create_queue and the install do (they never deadlock).
    perform pgque._lock_mutex('queues');
    -- The queue's tick lock before its row, in _tick()'s order (a tick locks
    -- pgque.tick_lock, then its insert key-shares the queue row).
    perform 1 from pgque.tick_lock
     where tl_queue = (select queue_id from pgque.queue where queue_name = x_queue_name)
       for update;
    select * into q from pgque.queue where queue_name = x_queue_name for update;
    if not found then
        raise exception 'No such event queue' using detail = 'pgque:queue_not_found';
    end if;

    if coalesce(x_force, false) then
        -- Cooperative members before their group's main consumer (which
        -- refuses to go while members remain); a member's open batch is
        -- closed through the nack policy, whose rows go with the queue.
        for v_consumer in
            select c.co_name
              from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
             where s.sub_queue = q.queue_id
             order by s.sub_role = 'coop_member' desc, c.co_name
        loop
            if pg_catalog.strpos(v_consumer, '.') > 0 and exists (
                select 1 from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
                 where s.sub_queue = q.queue_id and c.co_name = v_consumer
                   and s.sub_role = 'coop_member')
            then
                perform pgque.unregister_subconsumer(
                    x_queue_name, pg_catalog.split_part(v_consumer, '.', 1),
                    pg_catalog.split_part(v_consumer, '.', 2), 1);
            else
                perform pgque.unregister_consumer(x_queue_name, v_consumer);
            end if;
        end loop;
    elsif exists (select 1 from pgque.subscription where sub_queue = q.queue_id) then
        raise exception 'cannot drop queue, consumers still attached'
            using detail = 'pgque:consumers_attached';
    end if;

    -- Quietly: DROP ... CASCADE would report each child table as a NOTICE.
    v_messages := pg_catalog.current_setting('client_min_messages');
    perform pg_catalog.set_config('client_min_messages', 'warning', true);
    execute pg_catalog.format('drop table %s cascade', pgque._queue_relation(q, 'data'));
    perform pg_catalog.set_config('client_min_messages', v_messages, true);
    delete from pgque.retry_queue where ev_queue = q.queue_id;
    delete from pgque.delayed_events where de_queue_name = q.queue_name;
    delete from pgque.tick where tick_queue = q.queue_id;
    execute pg_catalog.format('drop sequence %s, %s', pgque._queue_relation(q, 'event_seq'),
                   pgque._queue_relation(q, 'tick_seq'));
    delete from pgque.queue where queue_id = q.queue_id;
    perform pgque._update_router(q.queue_id);
    perform pgque.log_event('info', 'queue', 'dropped',
                            pg_catalog.jsonb_build_object('queue', x_queue_name, 'force', coalesce(x_force, false)));
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
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_queue_id integer;
    v_int integer;
    v_interval interval;
    v_bool boolean;
    v_functions text[];
    v_function text;
begin
    if x_queue_name is null or x_param_name is null then
        raise exception 'Invalid NULL value' using detail = 'pgque:invalid_argument';
    end if;
    select queue_id into v_queue_id from pgque.queue where queue_name = x_queue_name for update;
    if not found then
        raise exception 'No such event queue' using detail = 'pgque:queue_not_found';
    end if;

    -- A value is cast and checked by its kind, then each name maps to one
    -- column through this fixed list; never spliced into SQL. NULL puts the
    -- column back to its default.
    if x_param_name in ('ticker_max_lag', 'ticker_idle_period', 'rotation_period', 'event_ttl') then
        v_interval := x_param_value::interval;
        if v_interval <= interval '0' then
            raise exception 'set_queue_config: % must be > 0, got %', x_param_name, v_interval
                using detail = 'pgque:invalid_argument';
        end if;
    elsif x_param_name in ('ticker_max_count', 'max_retries') then
        v_int := x_param_value::integer;
        if v_int < 0 or (v_int = 0 and x_param_name = 'ticker_max_count') then
            raise exception 'set_queue_config: % must be %, got %', x_param_name,
                case x_param_name when 'max_retries' then '>= 0' else '> 0' end, v_int
                using detail = 'pgque:invalid_argument';
        end if;
    elsif x_param_name in ('ticker_paused', 'external_ticker', 'disable_insert') then
        v_bool := coalesce(x_param_value::boolean, false);
    end if;
    case x_param_name
    when 'ticker_max_count' then
        update pgque.queue set queue_ticker_max_count = coalesce(v_int, 500) where queue_id = v_queue_id;
    when 'ticker_max_lag' then
        update pgque.queue set queue_ticker_max_lag = coalesce(v_interval, interval '3 seconds')
         where queue_id = v_queue_id;
    when 'ticker_paused' then
        update pgque.queue set queue_ticker_paused = v_bool where queue_id = v_queue_id;
    when 'ticker_idle_period' then
        update pgque.queue set queue_ticker_idle_period = coalesce(v_interval, interval '1 minute')
         where queue_id = v_queue_id;
    when 'external_ticker' then
        update pgque.queue set queue_external_ticker = v_bool where queue_id = v_queue_id;
    when 'rotation_period' then
        update pgque.queue set queue_rotation_period = coalesce(v_interval, interval '2 hours')
         where queue_id = v_queue_id;
    when 'max_retries' then
        update pgque.queue set queue_max_retries = v_int where queue_id = v_queue_id;
    when 'disable_insert' then
        update pgque.queue set queue_disable_insert = v_bool where queue_id = v_queue_id;
    when 'event_ttl' then
        update pgque.queue set queue_event_ttl = v_interval where queue_id = v_queue_id;
    when 'extra_maint' then
        -- A text[] literal of function names; each must be one maint() may run.
        v_functions := x_param_value::text[];
        select f into v_function from pg_catalog.unnest(v_functions) f
         where f is null or pgque._allowed_maint_function(f) is null
         limit 1;
        if found then
            raise exception 'set_queue_config: extra_maint: % is not pgque''s own maint_* function nor one registered with pgque.register_maint_function()',
                coalesce(v_function, 'NULL')
                using detail = 'pgque:invalid_argument',
                      hint = 'The database owner allows a function f(text) returning integer with select pgque.register_maint_function(''f(text)'').';
        end if;
        update pgque.queue set queue_extra_maint = v_functions where queue_id = v_queue_id;
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
