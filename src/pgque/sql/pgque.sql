-- pgque 0.1.0: install script. GENERATED FILE, DO NOT EDIT.
-- Built from src/pgque/sql/install.sql and the files it includes;
-- regenerate with: python tools/build_sql.py
-- Safe to run again: installs or upgrades in one transaction.

-- file: install.sql
-- pgque install manifest.
--
-- `psql -f src/pgque/sql/install.sql` installs straight from the source tree;
-- tools/build_sql.py inlines every `\ir` below, in this order, into pgque.sql,
-- the single file the Python installer and `psql -f pgque.sql` run.
-- This manifest is the only place that decides the order.

-- file: structure/begin.sql
-- Everything runs in one transaction, serialized per database, so two
-- installers never interleave and a failed install changes nothing.
--
-- The install serializes on a row of pgque.mutex, locked FOR UPDATE: only
-- the installing role (the owner) may lock those rows, so no other login can
-- hold the install up, as it could a well-known advisory lock key
-- (docs/development.md, "Coordination"). The first install of a database has
-- no row to lock yet: two of them meet at CREATE SCHEMA, where the second
-- waits for the first to commit and then finds the schema there.
begin;
set local client_min_messages = warning;
do $lock$
begin
    begin
        create schema pgque;
    exception when duplicate_schema or unique_violation then
        null;  -- installed already, or by the install we just waited for
    end;
    begin
        create table pgque.mutex (
            mutex_name text primary key
        );
    exception when duplicate_table or unique_violation then
        null;
    end;
    insert into pgque.mutex (mutex_name) values ('install'), ('queues')
        on conflict (mutex_name) do nothing;
    perform 1 from pgque.mutex where mutex_name = 'install' for update;
    -- Queue DDL (create_queue, drop_queue) rewrites the routers the install
    -- rewrites too: both take this row first, so they never deadlock.
    perform 1 from pgque.mutex where mutex_name = 'queues' for update;
end
$lock$;

-- file: structure/roles.sql
-- The three NOLOGIN roles pgque grants to. Roles are cluster-wide, so two
-- databases of one cluster may install at the same moment: the advisory
-- lock of begin.sql is per database and does not serialize them, and the
-- loser of a concurrent CREATE ROLE sees duplicate_object or, while the
-- winner's transaction is still open, unique_violation. Either means the
-- role exists, which is all we need.
do $roles$
declare
    v_role text;
begin
    foreach v_role in array array['pgque_reader', 'pgque_writer', 'pgque_admin'] loop
        if not exists (select 1 from pg_catalog.pg_roles where rolname = v_role) then
            begin
                execute pg_catalog.format('create role %I nologin', v_role);
            exception when duplicate_object or unique_violation then
                null;
            end;
        end if;
    end loop;

    -- pgque_admin may do everything a reader or a writer may.
    foreach v_role in array array['pgque_reader', 'pgque_writer'] loop
        if not pg_catalog.pg_has_role('pgque_admin', v_role, 'member') then
            begin
                execute pg_catalog.format('grant %I to pgque_admin', v_role);
            exception when duplicate_object or unique_violation then
                null;
            end;
        end if;
    end loop;
end
$roles$;

-- file: structure/schema.sql
-- One schema holds every pgque object. Nothing else in the database is
-- touched, so pgque coexists with PgQ (schema pgq) and with applications.
create schema if not exists pgque;
comment on schema pgque is
    'pgque: PgQ''s queue design (snapshot batches, ticks, rotated event tables) in plain SQL';

-- file: structure/tables.sql
-- Tables, sequences and the config singleton.
--
-- Names and columns follow PgQ, so operators' queries keep working; txids are
-- xid8 and snapshots pg_snapshot. Every statement is guarded (if not exists),
-- so re-running the install keeps all data; column additions of later
-- versions go to upgrade.sql.

-- One row per queue: its configuration and its rotation state.
create table if not exists pgque.queue (
    queue_id                  serial primary key,
    queue_name                text not null unique,
    queue_ntables             integer not null default 3,
    queue_cur_table           integer not null default 0,
    queue_rotation_period     interval default '2 hours',
    queue_switch_step1        xid8 not null default pg_catalog.pg_current_xact_id(),
    queue_switch_step2        xid8 default pg_catalog.pg_current_xact_id(),
    queue_switch_time         timestamptz not null default now(),
    queue_external_ticker     boolean not null default false,
    queue_disable_insert      boolean not null default false,
    queue_ticker_paused       boolean not null default false,
    queue_ticker_max_count    integer not null default 500,
    queue_ticker_max_lag      interval not null default '3 seconds',
    queue_ticker_idle_period  interval not null default '1 minute',
    queue_data_pfx            text not null,
    queue_event_seq           text not null,
    queue_tick_seq            text not null,
    queue_extra_maint         text[],
    queue_max_retries         integer,
    queue_event_ttl           interval
);

-- The ticks of every queue: a snapshot plus the event sequence at that moment.
-- Two consecutive ticks of a queue cut one batch.
create table if not exists pgque.tick (
    tick_queue      integer not null references pgque.queue (queue_id),
    tick_id         bigint not null,
    tick_time       timestamptz not null default now(),
    tick_snapshot   pg_snapshot not null default pg_catalog.pg_current_snapshot(),
    tick_event_seq  bigint not null,
    primary key (tick_queue, tick_id)
);

-- Consumer names; one name may subscribe to several queues.
create table if not exists pgque.consumer (
    co_id    serial primary key,
    co_name  text not null unique
);

-- One row per (queue, consumer): the consumer's position and, while a batch
-- is open, the batch itself (there is no batch table).
create table if not exists pgque.subscription (
    sub_id         serial not null,
    sub_queue      integer not null references pgque.queue (queue_id),
    sub_consumer   integer not null references pgque.consumer (co_id),
    sub_last_tick  bigint,
    sub_active     timestamptz not null default now(),
    sub_batch      bigint unique,
    sub_next_tick  bigint,
    sub_role       text not null default 'normal'
                   check (sub_role in ('normal', 'coop_main', 'coop_member')),
    primary key (sub_queue, sub_consumer)
) with (fillfactor = 50);

-- Column template and parent of every event table; it holds no rows.
create table if not exists pgque.event_template (
    ev_id      bigint not null,
    ev_time    timestamptz not null,
    ev_txid    xid8 not null default pg_catalog.pg_current_xact_id(),
    ev_owner   integer,
    ev_retry   integer,
    ev_type    text,
    ev_data    text,
    ev_extra1  text,
    ev_extra2  text,
    ev_extra3  text,
    ev_extra4  text
);

-- Events waiting to be put back into their queue for one consumer.
create table if not exists pgque.retry_queue (
    ev_retry_after  timestamptz not null,
    ev_queue        integer not null references pgque.queue (queue_id),
    ev_id           bigint not null,
    ev_time         timestamptz not null,
    ev_txid         xid8,
    ev_owner        integer not null,
    ev_retry        integer,
    ev_type         text,
    ev_data         text,
    ev_extra1       text,
    ev_extra2       text,
    ev_extra3       text,
    ev_extra4       text,
    primary key (ev_owner, ev_id)
);
create index if not exists rq_retry_idx on pgque.retry_queue (ev_retry_after);

-- Events that failed too often (or were dead-lettered on purpose), per
-- queue and consumer. One row per (queue, consumer, event): dead-lettering
-- is idempotent. Rows go with their queue or consumer.
create table if not exists pgque.dead_letter (
    dl_id           bigserial primary key,
    dl_queue_id     integer not null references pgque.queue (queue_id) on delete cascade,
    dl_consumer_id  integer not null references pgque.consumer (co_id) on delete cascade,
    dl_time         timestamptz not null default now(),
    dl_reason       text,
    ev_id           bigint not null,
    ev_time         timestamptz not null,
    ev_txid         xid8,
    ev_retry        integer,
    ev_type         text,
    ev_data         text,
    ev_extra1       text,
    ev_extra2       text,
    ev_extra3       text,
    ev_extra4       text
);
create index if not exists dl_queue_time_idx on pgque.dead_letter (dl_queue_id, dl_time);
create unique index if not exists dl_queue_consumer_event_idx
    on pgque.dead_letter (dl_queue_id, dl_consumer_id, ev_id);

-- Events sent for later delivery; maint_deliver_delayed() moves due rows
-- into their queue.
create table if not exists pgque.delayed_events (
    de_id          bigserial primary key,
    de_queue_name  text not null,
    de_deliver_at  timestamptz not null,
    de_type        text,
    de_data        text,
    de_extra1      text,
    de_extra2      text,
    de_extra3      text,
    de_extra4      text
);
create index if not exists de_deliver_at_idx on pgque.delayed_events (de_deliver_at);

-- Idempotency keys of send_idem(): one claimed event per (queue, key) until
-- the key expires. No application role may read or write it.
create table if not exists pgque.idem (
    queue_id    integer not null references pgque.queue (queue_id) on delete cascade,
    idem_key    text not null,
    event_id    bigint not null,
    expires_at  timestamptz not null,
    primary key (queue_id, idem_key)
);
create index if not exists idem_expires_idx on pgque.idem (expires_at);

-- Partitioned consumers: the slot count N each (queue, consumer) is pinned
-- to, and one lease per slot (worker, expiry, fencing epoch).
create table if not exists pgque.partition_consumer (
    queue_id  integer not null references pgque.queue (queue_id) on delete cascade,
    co_name   text not null,
    n         integer not null check (n >= 1),
    primary key (queue_id, co_name)
);
create table if not exists pgque.partition_slot (
    queue_id     integer not null,
    co_name      text not null,
    slot         integer not null check (slot >= 0),
    lease_owner  text,
    lease_until  timestamptz,
    lease_ttl    interval,
    epoch        bigint not null default 0,
    primary key (queue_id, co_name, slot),
    foreign key (queue_id, co_name)
        references pgque.partition_consumer (queue_id, co_name) on delete cascade
);

-- Functions an owner allowed in queue_extra_maint besides pgque's own
-- pgque.maint_*(text): maint() runs only these (register_maint_function()).
-- Stored as schema-qualified names and resolved to OIDs at every use.
create table if not exists pgque.maint_function (
    mf_function       text primary key,
    mf_registered_at  timestamptz not null default now()
);

-- The Spark sinks' tables (functions/spark.sql).
-- Rows staged by Spark tasks, published or discarded by the driver. Unlogged:
-- after a crash the table is empty, and spark_publish refuses a write whose
-- staged row counts do not match what its tasks reported.
create unlogged table if not exists pgque.spark_staging (
    write_id   text not null,
    stage_id   text not null,
    seq        bigint not null,
    ev_type    text,
    ev_data    text not null,
    ev_extra1  text,
    ev_extra2  text,
    ev_extra3  text,
    ev_extra4  text,
    staged_at  timestamptz not null default now()
);
create index if not exists spark_staging_stage_idx
    on pgque.spark_staging (write_id, stage_id, seq);

-- Micro-batches a streaming sink has published: one row per (query, batch).
create table if not exists pgque.spark_commits (
    query_id      text not null,
    batch_id      bigint not null,
    queue_name    text not null,
    events        bigint not null,
    committed_at  timestamptz not null default now(),
    primary key (query_id, batch_id)
);

-- Batch ids are global.
create sequence if not exists pgque.batch_id_seq;

-- The ticker's wakeup: 0 while a ticker waits for producers (functions/wakeup.sql).
create sequence if not exists pgque.ticker_wake_seq minvalue 0 start with 1;

-- Installation-wide settings; exactly one row.
create table if not exists pgque.config (
    singleton       boolean primary key default true check (singleton),
    ticker_job_id   bigint,
    maint_job_id    bigint,
    scheduler       text check (scheduler in ('pg_cron', 'pg_timetable')),
    tick_period_ms  integer not null default 100
                    check (tick_period_ms between 1 and 1000 and 1000 % tick_period_ms = 0),
    installed_at    timestamptz not null default clock_timestamp()
);
insert into pgque.config (singleton) values (true) on conflict do nothing;

-- Coordination (docs/development.md, "Coordination"). pgque's sessions
-- serialize on rows of its own tables, locked FOR UPDATE, which takes the
-- UPDATE privilege no pgque role holds: no other login can take these
-- locks, as it could an advisory lock key. pgque.mutex (begin.sql) holds
-- the install's and the queue DDL's rows.

-- One row per queue: the lock every tick of the queue takes first (_tick).
create table if not exists pgque.tick_lock (
    tl_queue integer primary key references pgque.queue (queue_id) on delete cascade
);
insert into pgque.tick_lock (tl_queue)
select queue_id from pgque.queue
on conflict (tl_queue) do nothing;

-- Periodic schedules (functions/schedule.sql): an event to send to a queue
-- at every occurrence of a cron expression; sc_next_run is the next one.
create table if not exists pgque.schedule (
    sc_queue      integer not null references pgque.queue (queue_id) on delete cascade,
    sc_name       text not null,
    sc_cron       text not null,
    sc_time_zone  text not null default 'UTC',
    sc_type       text,
    sc_payload    text not null,
    sc_next_run   timestamptz not null,
    sc_last_run   timestamptz,
    sc_last_event bigint,
    primary key (sc_queue, sc_name)
);
create index if not exists schedule_next_run_idx on pgque.schedule (sc_next_run);

-- The ticker lease: who leads ticking (the SDK Ticker, ticker_loop, a
-- scheduler job) until when. A leader renews it as it ticks; one that
-- vanishes, or sits idle in a pooled session, loses it when it expires.
create table if not exists pgque.ticker_leader (
    singleton        boolean primary key default true check (singleton),
    holder           text,
    pid              integer,
    application_name text,
    client_addr      inet,
    since            timestamptz,
    renewed          timestamptz,
    expires          timestamptz not null default '-infinity'
);
insert into pgque.ticker_leader (singleton) values (true) on conflict do nothing;

-- file: structure/upgrade.sql
-- In-place upgrades. The install file runs over any earlier pgque: tables
-- are created only when missing (tables.sql), and upgrade_schema() brings
-- existing ones up to date, so every queue, event, position and setting
-- survives. Each fix checks the catalog first, so running it again changes
-- nothing.

create or replace function pgque.upgrade_schema()
returns integer
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_fixes integer := 0;
    v_fix record;
begin
    -- Columns added after the first release: (table, column, definition).
    for v_fix in
        select * from (values
            ('queue', 'queue_max_retries', 'integer'),
            ('queue', 'queue_extra_maint', 'text[]'),
            ('queue', 'queue_event_ttl', 'interval'),
            ('subscription', 'sub_role',
             'text not null default ''normal'''
             || ' check (sub_role in (''normal'', ''coop_main'', ''coop_member''))'),
            ('config', 'scheduler', 'text check (scheduler in (''pg_cron'', ''pg_timetable''))'),
            ('config', 'tick_period_ms',
             'integer not null default 100'
             || ' check (tick_period_ms between 1 and 1000 and 1000 % tick_period_ms = 0)')
        ) as f(table_name, column_name, definition)
    loop
        if not exists (
            select 1 from pg_catalog.pg_attribute
             where attrelid = ('pgque.' || v_fix.table_name)::regclass
               and attname = v_fix.column_name and not attisdropped)
        then
            execute pg_catalog.format('alter table pgque.%I add column %I %s',
                           v_fix.table_name, v_fix.column_name, v_fix.definition);
            v_fixes := v_fixes + 1;
        end if;
    end loop;

    -- The names of a queue's objects follow from its id, so no stored name
    -- can point a definer function at another object (a queue row that
    -- breaks this was changed by hand: the install stops on it).
    if not exists (
        select 1 from pg_catalog.pg_constraint
         where conrelid = 'pgque.queue'::regclass and conname = 'queue_objects_follow_id')
    then
        alter table pgque.queue add constraint queue_objects_follow_id check (
            queue_data_pfx = 'pgque.event_' || queue_id::text
            and queue_event_seq = queue_data_pfx || '_id_seq'
            and queue_tick_seq = queue_data_pfx || '_tick_seq');
        v_fixes := v_fixes + 1;
    end if;

    -- Idempotency keys are stored as their digest only now (idem.sql;
    -- _idem_stored_key inlined: it may not exist yet), so that claims made
    -- under an earlier version keep matching. Earlier versions stored a key
    -- as given unless it was over 512 bytes or started with the digests'
    -- prefix: a row not of a digest's exact form is a key as given.
    update pgque.idem
       set idem_key = pg_catalog.chr(1) || 'sha256:' || pg_catalog.encode(
               pg_catalog.sha256(pg_catalog.convert_to(idem_key, 'UTF8')), 'hex')
     where idem_key !~ ('^' || pg_catalog.chr(1) || 'sha256:[0-9a-f]{64}$');
    if found then
        v_fixes := v_fixes + 1;
    end if;

    -- Routines whose result type changed, which CREATE OR REPLACE cannot
    -- change: dropped here (nothing depends on them), written again by the
    -- function files. _refuse_slot_batch returned void before it said
    -- whether the batch is open.
    if exists (
        select 1 from pg_catalog.pg_proc
         where oid = pg_catalog.to_regprocedure('pgque._refuse_slot_batch(bigint, text)')
           and prorettype = 'pg_catalog.void'::pg_catalog.regtype)
    then
        drop function pgque._refuse_slot_batch(bigint, text);
        v_fixes := v_fixes + 1;
    end if;

    -- PgQ lets a consumer be registered before its first tick.
    if exists (
        select 1 from pg_catalog.pg_attribute
         where attrelid = 'pgque.subscription'::regclass
           and attname = 'sub_last_tick' and attnotnull)
    then
        alter table pgque.subscription alter column sub_last_tick drop not null;
        v_fixes := v_fixes + 1;
    end if;
    return v_fixes;
end
$$;
comment on function pgque.upgrade_schema() is
    'Brings tables of an earlier pgque install up to date; idempotent. Returns the number of fixes applied.';

do $upgrade$ begin perform pgque.upgrade_schema(); end $upgrade$;

-- file: structure/types.sql
-- Types of the modern API.

-- One message as receive() returns it and nack() takes it.
do $types$
begin
    if pg_catalog.to_regtype('pgque.message') is null then
        create type pgque.message as (
            msg_id       bigint,       -- ev_id
            batch_id     bigint,       -- the batch to ack
            type         text,         -- ev_type
            payload      text,         -- ev_data
            retry_count  integer,      -- NULL on first delivery, then 1, 2, ...
            created_at   timestamptz,  -- ev_time: start of the sending transaction
            extra1       text,
            extra2       text,
            extra3       text,
            extra4       text
        );
    end if;
end
$types$;
comment on type pgque.message is
    'A message as receive() returns it: event id, batch id, type, payload, retry count, time and extras.';

-- file: structure/views.sql
-- Views over the tables (created after upgrade.sql, so every column they
-- read exists).

-- Partition slots (functions/partition.sql) at a glance.
-- Replaced only when its definition changed: CREATE OR REPLACE VIEW takes
-- an ACCESS EXCLUSIVE lock, which would wait for any reader's transaction
-- that read the view, and stall the install behind it. The new definition
-- is written as a scratch view first and compared as PostgreSQL prints both.
do $view$
declare
    v_select constant text := $select$
select q.queue_name, pc.co_name as consumer, k.slot, pc.n,
       -- An expired lease has no owner any more (lease_until keeps its value).
       case when ps.lease_until > pg_catalog.clock_timestamp() then ps.lease_owner end as lease_owner,
       ps.lease_until, coalesce(ps.epoch, 0) as epoch,
       s.sub_last_tick as last_tick,
       greatest(coalesce(last.tick_event_seq - t.tick_event_seq, 0), 0) as pending_events
  from pgque.partition_consumer pc
  join pgque.queue q on q.queue_id = pc.queue_id
  cross join lateral pg_catalog.generate_series(0, pc.n - 1) as k(slot)
  left join pgque.partition_slot ps
         on ps.queue_id = pc.queue_id and ps.co_name = pc.co_name and ps.slot = k.slot
  left join pgque.consumer c on c.co_name = pc.co_name || '#' || k.slot || '/' || pc.n
  left join pgque.subscription s on s.sub_queue = pc.queue_id and s.sub_consumer = c.co_id
  left join pgque.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
  left join lateral (
      select lt.tick_event_seq from pgque.tick lt
       where lt.tick_queue = pc.queue_id order by lt.tick_id desc limit 1) last on true
$select$;
begin
    execute 'create view pgque._view_candidate as ' || v_select;
    if pg_catalog.pg_get_viewdef(pg_catalog.to_regclass('pgque.partition_slot_status'))
       is distinct from pg_catalog.pg_get_viewdef(pg_catalog.to_regclass('pgque._view_candidate')) then
        execute 'create or replace view pgque.partition_slot_status as ' || v_select;
    end if;
    drop view pgque._view_candidate;
end
$view$;
comment on view pgque.partition_slot_status is
    'Every slot 0..n-1 of each partitioned consumer: its live lease (expired owners masked), epoch, position and pending events (never NULL or negative).';

-- file: functions/util.sql
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

-- file: functions/queue_admin.sql
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

-- file: functions/wakeup.sql
-- Wakeups: producers wake a waiting ticker at commit, one NOTIFY per wait.
--
-- A ticker with nothing to do arms the wakeup (_ticker_arm_wake: the
-- sequence pgque.ticker_wake_seq set to 0) and waits on channel
-- pgque_ticker_wake; so does an SDK consumer that ticks its own queue
-- (_consumer_tick), before every poll. Every insert path calls _wake after its routed insert:
-- while the sequence reads 0, the first caller to draw 1 from it queues a
-- NOTIFY, delivered when its transaction commits; every other caller, and
-- every caller while the ticker is busy, only reads the sequence. A burst
-- therefore costs one notification, and a ticker that polls nothing costs
-- the producers one sequence read per event. nextval is atomic across
-- sessions and not rolled back, so exactly one caller per arming draws 1.
-- If that caller's transaction rolls back, no NOTIFY is sent: the ticker's
-- slow safety poll finds the other events.

-- Internal: the producers' half, after every routed insert (one read of
-- the sequence; a nextval and a NOTIFY once per arming).
create or replace function pgque._wake(i_queue_id integer)
returns void language plpgsql as $$
begin
    -- Simple expressions: PL/pgSQL evaluates them without the executor.
    if pg_catalog.pg_sequence_last_value('pgque.ticker_wake_seq'::regclass) = 0
       and pg_catalog.nextval('pgque.ticker_wake_seq'::regclass) = 1 then
        -- A wakeup only: the payload is empty, since any role that can
        -- connect may LISTEN (docs/operations.md, "Security model").
        perform pg_catalog.pg_notify('pgque_ticker_wake', '');
    end if;
end
$$;

-- Internal: the ticker's half. Arms the wakeup, then reads every queue's
-- event sequence (through _ticker_sequences: the queue's own, by id) and
-- its last tick's, in that order: an event the ticker does not see here
-- draws its number after the arming, so it (or an event of the same
-- arming) notifies at commit. A sequence never drawn from reads
-- 0 (PgQ's gauge reads 1 both before and after a queue's first event).
create or replace function pgque._ticker_arm_wake()
returns table (queue_name text, event_seq bigint, tick_event_seq bigint) language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pg_catalog.setval('pgque.ticker_wake_seq'::regclass, 0, true);
    return query select s.queue_name, s.event_seq, s.tick_event_seq from pgque._ticker_sequences() s;
end
$$;

-- Internal: the SDK consumer's tick before a poll, while its process leads
-- the ticking. Arms the wakeup (a write only when a producer took it),
-- then ticks as ticker_eager does, which reads the queue's event sequence
-- after the arming: an event it does not see notifies at commit, so a
-- consumer that found nothing may wait on pgque_ticker_wake and is woken
-- by the next commit itself, not by the ticker's next round.
create or replace function pgque._consumer_tick(i_queue_name text, i_max_wait interval)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if pg_catalog.pg_sequence_last_value('pgque.ticker_wake_seq'::regclass) is distinct from 0 then
        perform pg_catalog.setval('pgque.ticker_wake_seq'::regclass, 0, true);
    end if;
    -- The queue's due periodic schedules (schedule.sql), for a consumer
    -- that ticks its queue with no other ticker running.
    if exists (select 1 from pgque.schedule s join pgque.queue q on q.queue_id = s.sc_queue
                where q.queue_name = i_queue_name and s.sc_next_run <= pg_catalog.now()) then
        perform pgque._fire_schedules(
            (select q.queue_id from pgque.queue q where q.queue_name = i_queue_name));
    end if;
    return pgque.ticker_eager(i_queue_name, i_max_wait);
end
$$;

-- Internal: every tickable queue's event sequence (0: never drawn from) and
-- the sequence value its last tick recorded (NULL: no tick yet). The
-- sequence's name follows from the queue id, in schema pgque (as in
-- _queues_due), never from the stored queue_event_seq.
create or replace function pgque._ticker_sequences()
returns table (queue_name text, event_seq bigint, tick_event_seq bigint) language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off as $$
begin
    -- PL/pgSQL keeps the plan for the session; a SQL function's statement is
    -- planned on every call (half its time, measured on PostgreSQL 15).
    return query
    select q.queue_name,
           coalesce(pg_catalog.pg_sequence_last_value(pgque._queue_sequence(q.queue_id, 'id')), 0),
           (select t.tick_event_seq from pgque.tick t
             where t.tick_queue = q.queue_id order by t.tick_id desc limit 1)
      from pgque.queue q
     where not q.queue_ticker_paused and not q.queue_external_ticker;
end
$$;

-- Internal: stragglers of a queue's last tick. A producer whose transaction
-- was still running when the tick was taken drew its event id before it, so
-- the tick's sequence value covers the event while its snapshot does not;
-- when that producer commits it may wake nobody (the wakeup was taken). Ticks
-- the queue when such a transaction (one in the tick's xip list) has
-- committed and left events. Returns 1 when it ticked, 2 while some of those
-- transactions still run (look again later), 0 when there is nothing to do.
create or replace function pgque._tick_stragglers(i_queue_name text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue%rowtype;
    v_snapshot pg_snapshot;
    v_xid xid8;
    v_status text;
    v_running boolean := false;
    v_found boolean := false;
    i integer;
begin
    select * into q from pgque.queue where queue_name = i_queue_name;
    if not found or q.queue_ticker_paused or q.queue_external_ticker then
        return 0;
    end if;
    select tick_snapshot into v_snapshot from pgque.tick
     where tick_queue = q.queue_id order by tick_id desc limit 1;
    for v_xid in select x from pg_catalog.pg_snapshot_xip(v_snapshot) x loop
        v_status := pg_catalog.pg_xact_status(v_xid);
        if v_status = 'in progress' then
            v_running := true;
        elsif v_status = 'committed' then
            for i in 0 .. q.queue_ntables - 1 loop
                -- The queue's own event table, proven by OID and namespace.
                execute pg_catalog.format(
                            'select exists (select 1 from %s where ev_txid = $1)',
                            pgque._queue_relation(q, i::text))
                   into v_found using v_xid;
                exit when v_found;
            end loop;
            exit when v_found;
        end if;
    end loop;
    if v_found then
        perform pgque._tick(q.queue_id, true);
        return 1;
    end if;
    return case when v_running then 2 else 0 end;
end
$$;

-- file: functions/insert_router.sql
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

-- file: functions/send.sql
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

-- file: functions/ticker.sql
-- The ticker: records a queue's position in transaction history.
--
-- A tick stores the snapshot of the statement that inserts it. Consecutive
-- ticks of a queue cut batches, so their snapshots must never go backwards:
-- every tick of a queue is inserted by _tick(), which first locks the
-- queue's row of pgque.tick_lock and only then, in a later statement, reads
-- the latest tick and inserts the new one. In READ COMMITTED that statement's
-- snapshot is taken after the lock, so it sees the previous tick's commit.
-- Racing callers from several sessions therefore queue up and never
-- duplicate or reorder ticks. The lock is a row lock on a table of pgque's
-- own, which no other login can take (docs/development.md, "Coordination").

create or replace function pgque._require_read_committed(i_caller text)
returns void language plpgsql stable as $$
begin
    if pg_catalog.current_setting('transaction_isolation') <> 'read committed' then
        raise exception '%: must run in READ COMMITTED (transaction isolation is %)',
            i_caller, pg_catalog.current_setting('transaction_isolation')
            using detail = 'pgque:wrong_isolation',
                  hint = 'A tick taken under an older snapshot could overlap the previous batch.';
    end if;
end
$$;

-- Internal: insert a tick for the queue when due, or unconditionally with
-- i_always (a queue's first tick). Returns the new tick id or NULL.
create or replace function pgque._tick(i_queue_id integer, i_always boolean)
returns bigint language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off as $$
declare
    q pgque.queue%rowtype;
    v_last pgque.tick%rowtype;
    v_prev_time timestamptz;
    v_seq bigint;
    v_new bigint;
    v_lag interval;
    v_tick_id bigint;
begin
    perform pgque._require_read_committed('pgque.ticker');
    -- The queue's tick lock, held until commit.
    perform 1 from pgque.tick_lock where tl_queue = i_queue_id for update;
    if not found then
        return null;  -- dropped while we waited for the lock
    end if;

    -- From here on every statement sees the ticks committed before the lock.
    select * into q from pgque.queue where queue_id = i_queue_id;
    if not found then
        return null;  -- dropped while we waited for the lock
    end if;
    select * into v_last from pgque.tick
     where tick_queue = i_queue_id order by tick_id desc limit 1;

    v_seq := coalesce(pg_catalog.pg_sequence_last_value(pgque._queue_sequence(i_queue_id, 'id')), 1);

    if v_last.tick_id is not null then
        if pg_catalog.pg_snapshot_xmin(v_last.tick_snapshot) > pg_catalog.pg_current_xact_id() then
            raise exception 'Invalid PgQ state: queue % has a tick from the future (txid counter went backwards?)',
                q.queue_name using detail = 'pgque:invalid_state';
        end if;
        if not i_always then
            v_new := v_seq - v_last.tick_event_seq;
            v_lag := pg_catalog.now() - v_last.tick_time;
            if v_new < 0 then
                perform pgque.log_event('warning', 'ticker', 'event sequence below the last tick',
                    pg_catalog.jsonb_build_object('queue', q.queue_name, 'sequence', v_seq,
                                       'tick_event_seq', v_last.tick_event_seq));
            end if;
            if v_new > 0 then
                -- Events arrived: wait for enough of them or for max_lag.
                if v_new < q.queue_ticker_max_count and v_lag < q.queue_ticker_max_lag then
                    return null;
                end if;
            else
                -- Idle: back off geometrically up to ticker_idle_period.
                select tick_time into v_prev_time from pgque.tick
                 where tick_queue = i_queue_id and tick_id < v_last.tick_id
                 order by tick_id desc limit 1;
                if found then
                    if v_lag < q.queue_ticker_max_lag / 2 then
                        return null;
                    end if;
                    if v_lag < 2 * (v_last.tick_time - v_prev_time)
                       and v_lag < q.queue_ticker_idle_period then
                        return null;
                    end if;
                end if;
            end if;
        end if;
    end if;

    insert into pgque.tick (tick_queue, tick_id, tick_event_seq)
    values (i_queue_id, pg_catalog.nextval(pgque._queue_sequence(i_queue_id, 'tick')), v_seq)
    returning tick_id into v_tick_id;

    -- A wake-up only: the payload is empty, since any role that can connect
    -- may LISTEN (docs/operations.md, "Security model").
    perform pg_catalog.pg_notify('pgque_' || q.queue_name, '');
    return v_tick_id;
end
$$;

create or replace function pgque.ticker(i_queue_name text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue%rowtype;
begin
    select * into q from pgque.queue where queue_name = i_queue_name;
    if not found then
        raise exception 'no such queue' using detail = 'pgque:queue_not_found';
    end if;
    if q.queue_external_ticker then
        raise exception 'This queue has external tick source.' using detail = 'pgque:external_ticker';
    end if;
    if q.queue_ticker_paused then
        raise exception 'Ticker has been paused for this queue' using detail = 'pgque:ticker_paused';
    end if;
    return pgque._tick(q.queue_id, false);
end
$$;
comment on function pgque.ticker(text) is
    'Ticks the queue when due (enough new events, max_lag passed, or idle back-off elapsed). Returns the new tick id or NULL.';

-- Internal: the queues pgque.ticker() may have to tick now, found in one
-- statement: _tick()'s tests on the queue's last tick, its previous tick
-- (looked up only for an idle queue, and only when the time test needs it)
-- and its event sequence. An idle queue costs an index probe on pgque.tick
-- and one sequence read; only the queues found go through _tick(), which
-- decides again under the queue's tick lock.
create or replace function pgque._queues_due(
    out queue_id integer, out queue_name text, out since_tick interval)
returns setof record language plpgsql stable
set search_path = pgque, pg_catalog, pg_temp
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off as $$
begin
    -- PL/pgSQL keeps the plan for the session (see _ticker_sequences).
    return query
    select q.queue_id, q.queue_name, v.lag
      from pgque.queue q
      left join lateral (
            select t.tick_id, t.tick_time, t.tick_event_seq
              from pgque.tick t
             where t.tick_queue = q.queue_id
             order by t.tick_id desc limit 1) l on true
      cross join lateral (
            -- The sequence's name follows from the id, in schema pgque.
            select coalesce(pg_catalog.pg_sequence_last_value(
                       pgque._queue_sequence(q.queue_id, 'id')), 1) as seq,
                   pg_catalog.now() - l.tick_time as lag) v
     where not q.queue_ticker_paused and not q.queue_external_ticker
       and (l.tick_id is null
            or case
               when v.seq > l.tick_event_seq then
                    -- Events arrived: enough of them, or max_lag passed.
                    v.seq - l.tick_event_seq >= q.queue_ticker_max_count
                    or v.lag >= q.queue_ticker_max_lag
               when v.lag >= q.queue_ticker_max_lag / 2 then
                    -- Idle: the geometric back-off up to ticker_idle_period.
                    v.lag >= q.queue_ticker_idle_period
                    or coalesce(v.lag >= 2 * (l.tick_time - (
                           select p.tick_time from pgque.tick p
                            where p.tick_queue = q.queue_id and p.tick_id < l.tick_id
                            order by p.tick_id desc limit 1)), true)
               else
                    -- A queue's second tick does not wait for the back-off.
                    not exists (select 1 from pgque.tick p
                                 where p.tick_queue = q.queue_id and p.tick_id < l.tick_id)
               end);
end
$$;

create or replace function pgque.ticker()
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_queue_id integer;
    v_count bigint := 0;
begin
    -- At most 1,000 queues per call, the longest waiting first: each tick
    -- holds a lock until commit, and PostgreSQL's lock table is shared and
    -- bounded (the rest tick in the next call). Then name order, so that
    -- concurrent callers take the queues' tick locks in one order.
    for v_queue_id in
        select d.queue_id
          from (select * from pgque._queues_due() d0
                 order by d0.since_tick desc nulls first limit 1000) d
         order by d.queue_name
    loop
        if pgque._tick(v_queue_id, false) is not null then
            v_count := v_count + 1;
        end if;
    end loop;
    -- Due periodic schedules (schedule.sql): their events go out with this
    -- transaction and into the next tick.
    if exists (select 1 from pgque.schedule where sc_next_run <= pg_catalog.now()) then
        perform pgque._fire_schedules(null);
    end if;
    return v_count;
end
$$;
comment on function pgque.ticker() is
    'Ticks the queues that are due (neither paused nor externally ticked), at most 1,000 per call, the longest waiting first. Returns how many got a tick.';

create or replace function pgque.ticker(
    i_queue_name text, i_tick_id bigint, i_orig_timestamp timestamptz, i_event_seq bigint)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue%rowtype;
    v_last pgque.tick%rowtype;
begin
    perform pgque._require_read_committed('pgque.ticker');
    q := pgque._queue_row(i_queue_name);
    if q.queue_ticker_paused then
        raise exception 'queue % is paused (queue_ticker_paused = true)', i_queue_name
            using detail = 'pgque:ticker_paused';
    end if;
    if not q.queue_external_ticker then
        raise exception 'queue % is not configured for external ticker (queue_external_ticker = false); use pgque.ticker(queue) instead',
            i_queue_name using detail = 'pgque:not_external_ticker';
    end if;

    perform 1 from pgque.tick_lock where tl_queue = q.queue_id for update;
    if not found then
        raise exception 'queue not found: %', i_queue_name using detail = 'pgque:queue_not_found';
    end if;
    select * into v_last from pgque.tick
     where tick_queue = q.queue_id order by tick_id desc limit 1;
    if v_last.tick_id is not null then
        if i_tick_id <= v_last.tick_id then
            raise exception 'external ticker tick_id must be strictly greater than current max (% <= %)',
                i_tick_id, v_last.tick_id using detail = 'pgque:invalid_argument';
        end if;
        if i_event_seq < v_last.tick_event_seq then
            raise exception 'external ticker event_seq must be >= previous tick (% < %)',
                i_event_seq, v_last.tick_event_seq using detail = 'pgque:invalid_argument';
        end if;
    end if;

    insert into pgque.tick (tick_queue, tick_id, tick_time, tick_event_seq)
    values (q.queue_id, i_tick_id, i_orig_timestamp, i_event_seq);
    perform pgque._seq_forward(pgque._queue_relation(q, 'tick_seq'), i_tick_id);
    perform pgque._seq_forward(pgque._queue_relation(q, 'event_seq'), i_event_seq);
    perform pg_catalog.pg_notify('pgque_' || q.queue_name, '');
    return i_tick_id;
end
$$;
comment on function pgque.ticker(text, bigint, timestamptz, bigint) is
    'Inserts a tick copied from another source into an external-ticker queue. Returns the tick id.';

create or replace function pgque.force_tick(i_queue_name text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue%rowtype;
    v_last_tick bigint;
    v_seq regclass;
begin
    q := pgque._queue_row(i_queue_name);
    -- Upstream PgQue raises here where PgQ returns the last tick silently.
    if q.queue_ticker_paused then
        raise exception 'queue % is paused (queue_ticker_paused = true)', i_queue_name
            using detail = 'pgque:ticker_paused';
    end if;
    if q.queue_external_ticker then
        raise exception 'queue % is configured for external ticker; force_tick is meaningless — push ticks via pgque.ticker(queue, tick_id, ts, event_seq)',
            i_queue_name using detail = 'pgque:external_ticker';
    end if;
    select tick_id into v_last_tick from pgque.tick
     where tick_queue = q.queue_id order by tick_id desc limit 1;
    -- No tick here: make the next ticker() call see "many new events".
    v_seq := pgque._queue_relation(q, 'event_seq');
    perform pg_catalog.setval(v_seq, pg_catalog.nextval(v_seq) + 2 * q.queue_ticker_max_count + 1000);
    return v_last_tick;
end
$$;
comment on function pgque.force_tick(text) is
    'Makes the next ticker() call tick the queue at once. Returns the latest tick id; ticks nothing itself. Raises for a paused or externally ticked queue.';

create or replace function pgque.force_next_tick(i_queue_name text)
returns bigint
language sql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$ select pgque.force_tick(i_queue_name) $$;
comment on function pgque.force_next_tick(text) is
    'Another name of force_tick.';

-- Internal: PgQ's event gauge reads a sequence's last_value, which is 1 both
-- before and after the queue's very first event, so that event moves no
-- gauge. True when that first event exists and the last tick does not see it.
create or replace function pgque._first_event_unticked(
    q pgque.queue, i_seq bigint, i_last pgque.tick)
returns boolean language plpgsql stable as $$
declare
    v_txid xid8;
    i integer;
begin
    if i_seq <> 1 or i_last.tick_event_seq <> 1
       or pg_catalog.pg_sequence_last_value(pgque._queue_sequence(q.queue_id, 'id')) is null then
        return false;
    end if;
    for i in 0 .. q.queue_ntables - 1 loop
        -- The queue's own event table, proven by OID and namespace.
        execute pg_catalog.format('select ev_txid from %s where ev_id = 1 and ev_owner is null',
                                  pgque._queue_relation(q, i::text))
           into v_txid;
        if v_txid is not null then
            return not pg_catalog.pg_visible_in_snapshot(v_txid, i_last.tick_snapshot);
        end if;
    end loop;
    return false;
end
$$;

create or replace function pgque.ticker_eager(
    i_queue_name text, i_max_wait interval default '5 milliseconds')
returns bigint language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off as $$
declare
    q constant pgque.queue := pgque._queue_row(i_queue_name);
    v_last pgque.tick%rowtype;
    v_seq bigint;
begin
    select * into v_last from pgque.tick
     where tick_queue = q.queue_id order by tick_id desc limit 1;
    if q.queue_ticker_paused or q.queue_external_ticker then
        return v_last.tick_id;
    end if;
    if v_last.tick_id is not null then
        v_seq := coalesce(pg_catalog.pg_sequence_last_value(pgque._queue_sequence(q.queue_id, 'id')), 1);
        if v_seq <= v_last.tick_event_seq
           and not pgque._first_event_unticked(q, v_seq, v_last) then
            return v_last.tick_id;  -- nothing new: covered by the last tick
        end if;
        -- Tick at once when every consumer has taken the last tick (it waits
        -- for this one); otherwise let the batch grow for up to i_max_wait.
        if exists (select 1 from pgque.subscription s
                    where s.sub_queue = q.queue_id and s.sub_role <> 'coop_member'
                      and s.sub_last_tick < v_last.tick_id
                      and coalesce(s.sub_next_tick, 0) < v_last.tick_id)
           and pg_catalog.clock_timestamp() - v_last.tick_time < i_max_wait then
            return null;
        end if;
    end if;
    return pgque._tick(q.queue_id, true);
end
$$;
comment on function pgque.ticker_eager(text, interval) is
    'The SDK ticker''s rule: tick as soon as new events exist and every consumer took the last tick, else once the last tick is i_max_wait old. Returns the new tick id, the last tick id when nothing is new, or NULL while waiting (call again).';

-- file: functions/consumer.sql
-- Registering and unregistering consumers.

-- Internal: the id of the queue a consumer registers on, or the error for a
-- missing one: PgQ's text (clients match it), with the queue's name appended
-- when i_named (the modern API) and always in the HINT.
create or replace function pgque._registration_queue(i_queue text, i_named boolean)
returns integer language plpgsql stable as $$
declare
    v_queue_id integer;
begin
    select queue_id into v_queue_id from pgque.queue where queue_name = i_queue;
    if not found then
        raise exception '%', 'Event queue not created yet'
                             || case when i_named then ': ' || coalesce(i_queue, '<NULL>') else '' end
            using detail = 'pgque:queue_not_found',
                  hint = 'There is no queue ' || coalesce(pg_catalog.quote_literal(i_queue), 'NULL')
                         || '; create it with pgque.create_queue(), or check the name.';
    end if;
    return v_queue_id;
end
$$;

-- Internal: refuses a consumer name of pgque's own: one with '#' (a partition
-- slot's subscription is named '<consumer>#<slot>/<n>', see partition.sql).
-- The public functions that register, open, close or move a consumer call
-- it; pgque's own code reaches its subscriptions through the internal
-- functions (_register_consumer_at, _next_batch_custom, _finish_batch ...).
-- A slot's name with i_hint (what to use instead) is partition_slot; any
-- other name with '#', or a slot's with a NULL hint, is invalid_argument.
create or replace function pgque._refuse_reserved_name(i_consumer text, i_hint text)
returns void language plpgsql as $$
begin
    if coalesce(pg_catalog.strpos(i_consumer, '#'), 0) = 0 then
        return;
    elsif i_hint is not null and pgque._is_slot_consumer(i_consumer) then
        raise exception 'consumer % is a partition slot consumer; %', i_consumer, i_hint
            using detail = 'pgque:partition_slot';
    end if;
    raise exception 'consumer name must not contain the reserved character #: %', i_consumer
        using detail = 'pgque:invalid_argument',
              hint = 'Names with # are reserved for the subscriptions of partition slots.';
end
$$;

create or replace function pgque.register_consumer_at(
    x_queue_name text, x_consumer_name text, x_tick_pos bigint)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    -- A missing queue is reported first, as before names were checked.
    perform pgque._registration_queue(x_queue_name, false);
    perform pgque._refuse_reserved_name(x_consumer_name, null);
    return pgque._register_consumer_at(x_queue_name, x_consumer_name, x_tick_pos);
end
$$;
comment on function pgque.register_consumer_at(text, text, bigint) is
    'Subscribes a consumer at the given tick, or moves an existing one there (dropping its open batch). Returns 1 when new, else 0.';

-- Internal: register_consumer_at for any name, pgque's own (a slot's) too.
create or replace function pgque._register_consumer_at(
    i_queue text, i_consumer text, i_tick_pos bigint)
returns integer language plpgsql as $$
declare
    v_queue_id integer;
    v_co_id integer;
    v_tick_id bigint;
begin
    v_queue_id := pgque._registration_queue(i_queue, false);
    perform pgque._check_name('consumer', i_consumer);

    -- The consumer row is locked, so an unregister elsewhere cannot delete it
    -- under us and two registrations of one name run one after the other.
    insert into pgque.consumer (co_name) values (i_consumer) on conflict (co_name) do nothing;
    select co_id into v_co_id from pgque.consumer where co_name = i_consumer for update;

    if i_tick_pos is not null then
        perform 1 from pgque.tick where tick_queue = v_queue_id and tick_id = i_tick_pos;
        if not found then
            raise exception 'cannot reposition, tick not found: %', i_tick_pos
                using detail = 'pgque:tick_not_found';
        end if;
    end if;

    perform 1 from pgque.subscription
     where sub_queue = v_queue_id and sub_consumer = v_co_id for update;
    if found then
        if i_tick_pos is not null then
            -- Repositioning drops the open batch, if any.
            update pgque.subscription
               set sub_last_tick = i_tick_pos, sub_batch = null, sub_next_tick = null,
                   sub_active = pg_catalog.now()
             where sub_queue = v_queue_id and sub_consumer = v_co_id;
        end if;
        return 0;
    end if;

    if i_tick_pos is null then
        select tick_id into v_tick_id from pgque.tick
         where tick_queue = v_queue_id order by tick_id desc limit 1;
        if not found then
            raise exception 'No ticks for this queue.  Please run ticker on database.'
                using detail = 'pgque:no_ticks';
        end if;
    else
        v_tick_id := i_tick_pos;
    end if;

    insert into pgque.subscription (sub_queue, sub_consumer, sub_last_tick)
    values (v_queue_id, v_co_id, v_tick_id);
    perform pgque.log_event('info', 'consumer', 'registered', pg_catalog.jsonb_build_object(
        'queue', i_queue, 'consumer', i_consumer, 'tick', v_tick_id));
    return 1;
end
$$;

create or replace function pgque.register_consumer(x_queue_name text, x_consumer_id text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque.register_consumer_at(x_queue_name, x_consumer_id, null); end $$;
comment on function pgque.register_consumer(text, text) is
    'Subscribes a consumer (the second argument is its name) at the latest tick. Returns 1 when new, 0 when already subscribed.';

create or replace function pgque.unregister_consumer(x_queue_name text, x_consumer_name text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_slot text[];
begin
    -- A partition slot's subscription goes as unsubscribe_slot removes it,
    -- with its lease row (drop_queue's force path comes here too). Names
    -- with '#' that are no slot's (earlier versions let register_consumer
    -- make them) can still be removed.
    if pgque._is_slot_consumer(x_consumer_name) then
        v_slot := pg_catalog.regexp_match(x_consumer_name, '^(.*)#([0-9]+)/([0-9]+)$');
        perform 1
           from pgque.queue q
           join pgque.partition_slot ps on ps.queue_id = q.queue_id
           join pgque.partition_consumer pc on pc.queue_id = ps.queue_id and pc.co_name = ps.co_name
           join pgque.subscription s on s.sub_queue = q.queue_id
           join pgque.consumer c on c.co_id = s.sub_consumer
          where q.queue_name = x_queue_name and c.co_name = x_consumer_name
            and ps.co_name = v_slot[1] and ps.slot::text = v_slot[2] and pc.n::text = v_slot[3];
        if found then
            perform pgque.unsubscribe_slot(x_queue_name, v_slot[1], v_slot[2]::integer);
            return 1;
        end if;
    end if;
    return pgque._unregister_consumer(x_queue_name, x_consumer_name);
end
$$;
comment on function pgque.unregister_consumer(text, text) is
    'Removes a subscription and its pending retries (a partition slot''s as unsubscribe_slot does). Returns 1, or 0 when it did not exist.';

-- Internal: unregister_consumer for any name, a slot's subscription alone too.
create or replace function pgque._unregister_consumer(i_queue text, i_consumer text)
returns integer language plpgsql as $$
declare
    v_sub record;
begin
    select s.sub_id, s.sub_queue, s.sub_consumer, s.sub_role into v_sub
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
     where q.queue_name = i_queue and c.co_name = i_consumer
       for update of s, c;
    if not found then
        return 0;
    end if;
    if v_sub.sub_role = 'coop_main' then
        raise exception 'cannot unregister cooperative main consumer with registered subconsumers'
            using detail = 'pgque:cooperative_consumer';
    elsif v_sub.sub_role = 'coop_member' then
        -- Retries belong to the whole group (shared sub_id): keep them.
        return pgque.unregister_subconsumer(
            i_queue, pg_catalog.split_part(i_consumer, '.', 1),
            pg_catalog.substr(i_consumer, pg_catalog.strpos(i_consumer, '.') + 1), 0);
    end if;

    -- Pending retries belong to this registration only.
    delete from pgque.retry_queue where ev_owner = v_sub.sub_id and ev_queue = v_sub.sub_queue;
    delete from pgque.subscription
     where sub_queue = v_sub.sub_queue and sub_consumer = v_sub.sub_consumer;
    delete from pgque.consumer c
     where c.co_id = v_sub.sub_consumer
       and not exists (select 1 from pgque.subscription s where s.sub_consumer = c.co_id);
    perform pgque.log_event('info', 'consumer', 'unregistered', pg_catalog.jsonb_build_object(
        'queue', i_queue, 'consumer', i_consumer));
    return 1;
end
$$;

-- file: functions/batch.sql
-- Batches: opening, reading and finishing them.
--
-- A batch is the set of events whose producing transaction is visible in the
-- end tick's snapshot and not in the start tick's. The subscription row holds
-- the open batch (sub_batch, sub_next_tick); there is no batch table.

create or replace function pgque.find_tick_helper(
    i_queue_id int4, i_prev_tick_id int8, i_prev_tick_time timestamptz,
    i_prev_tick_seq int8, i_min_count int8, i_min_interval interval,
    out next_tick_id int8, out next_tick_time timestamptz, out next_tick_seq int8)
language plpgsql stable security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_ok boolean := false;
    v_too_far boolean := false;
begin
    -- Start from the newest tick after the position.
    select tick_id, tick_time, tick_event_seq
      into next_tick_id, next_tick_time, next_tick_seq
      from pgque.tick
     where tick_queue = i_queue_id and tick_id > i_prev_tick_id
     order by tick_id desc limit 1;
    if not found then
        return;
    end if;

    if i_min_count is not null then
        v_ok := v_ok or next_tick_seq - i_prev_tick_seq >= i_min_count;
        v_too_far := v_too_far or next_tick_seq - i_prev_tick_seq > 2 * i_min_count;
    end if;
    if i_min_interval is not null then
        v_ok := v_ok or next_tick_time - i_prev_tick_time >= i_min_interval;
        v_too_far := v_too_far or next_tick_time - i_prev_tick_time > 2 * i_min_interval;
    end if;

    -- The newest tick overshoots a threshold by more than 2x: take the first
    -- tick that reaches one instead, so batches stay near the asked size.
    if v_too_far then
        select tick_id, tick_time, tick_event_seq
          into next_tick_id, next_tick_time, next_tick_seq
          from pgque.tick
         where tick_queue = i_queue_id and tick_id > i_prev_tick_id
           and ((i_min_count is not null and tick_event_seq - i_prev_tick_seq >= i_min_count)
             or (i_min_interval is not null and tick_time - i_prev_tick_time >= i_min_interval))
         order by tick_id limit 1;
    end if;

    if not v_ok then
        next_tick_id := null;
        next_tick_time := null;
        next_tick_seq := null;
    end if;
end
$$;
comment on function pgque.find_tick_helper(int4, int8, timestamptz, int8, int8, interval) is
    'Finds the end tick of a batch from the given position under min_count / min_interval.';

create or replace function pgque.next_batch_custom(
    i_queue_name text, i_consumer_name text,
    i_min_lag interval, i_min_count int4, i_min_interval interval,
    out batch_id bigint,
    out cur_tick_id bigint, out prev_tick_id bigint,
    out cur_tick_time timestamptz, out prev_tick_time timestamptz,
    out cur_tick_event_seq bigint, out prev_tick_event_seq bigint)
language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if pg_catalog.strpos(i_consumer_name, '#') > 0 then
        perform pgque._refuse_reserved_name(i_consumer_name, 'use pgque.receive_partitioned()');
    end if;
    select * into batch_id, cur_tick_id, prev_tick_id, cur_tick_time, prev_tick_time,
                  cur_tick_event_seq, prev_tick_event_seq
      from pgque._next_batch_custom(i_queue_name, i_consumer_name,
                                    i_min_lag, i_min_count, i_min_interval);
end
$$;
comment on function pgque.next_batch_custom(text, text, interval, int4, interval) is
    'Opens the consumer''s next batch under min_lag / min_count / min_interval, or returns the open one. All NULL when there is none.';

-- Internal: next_batch_custom for any consumer, a partition slot's too
-- (receive_partitioned), the body of the legacy next_batch forms.
create or replace function pgque._next_batch_custom(
    i_queue_name text, i_consumer_name text,
    i_min_lag interval, i_min_count int4, i_min_interval interval,
    out batch_id bigint,
    out cur_tick_id bigint, out prev_tick_id bigint,
    out cur_tick_time timestamptz, out prev_tick_time timestamptz,
    out cur_tick_event_seq bigint, out prev_tick_event_seq bigint)
language plpgsql
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off as $$
declare
    s record;
    v_last record;
    v_next record;
begin
    -- The row lock makes a concurrent caller wait and then get the same batch.
    -- The row is locked by a query of that table alone: after waiting, the
    -- lock returns the row's latest version (a caller that waited while the
    -- batch was finished then starts at the new position), and its last tick
    -- is read after. Each row is found by its whole key, the two ids by their
    -- names first, whatever the statistics say: as one join, a plan made
    -- while the queue and consumer tables had been VACUUMed with one row each
    -- (the Ticker's maintenance does so when it starts) walked every
    -- subscription and merged it with every tick of its queue, and a session
    -- keeps its plan (0.3 ms per batch after a few thousand ticks, measured).
    select sub.sub_queue, sub.sub_consumer, sub.sub_id, sub.sub_batch, sub.sub_last_tick,
           sub.sub_next_tick, sub.sub_role
      into s
      from pgque.subscription sub
     where sub.sub_queue = (select q.queue_id from pgque.queue q where q.queue_name = i_queue_name)
       and sub.sub_consumer = (select c.co_id from pgque.consumer c where c.co_name = i_consumer_name)
       for no key update of sub;
    if not found then
        raise exception 'Not subscriber to queue: %/%',
            coalesce(i_queue_name, 'NULL'), coalesce(i_consumer_name, 'NULL')
            using detail = 'pgque:consumer_not_found',
                  hint = 'Subscribe the consumer first: select pgque.subscribe('
                         || coalesce(pg_catalog.quote_literal(i_queue_name), 'NULL') || ', '
                         || coalesce(pg_catalog.quote_literal(i_consumer_name), 'NULL') || ');';
    end if;
    -- Cooperative groups hand out batches through their own functions. A
    -- group without members gets no batch here (all NULL): its main row
    -- never holds one. Upstream returns a batch id it records nowhere.
    if s.sub_role = 'coop_main' then
        perform 1 from pgque.subscription m
         where m.sub_queue = s.sub_queue and m.sub_id = s.sub_id and m.sub_role = 'coop_member';
        if found then
            raise exception 'consumer % on queue % is a cooperative main consumer; use cooperative receive/next_batch with a subconsumer',
                i_consumer_name, i_queue_name using detail = 'pgque:cooperative_consumer';
        end if;
        prev_tick_id := null;
        prev_tick_time := null;
        prev_tick_event_seq := null;
        return;
    elsif s.sub_role = 'coop_member' then
        raise exception 'consumer % on queue % is a cooperative subconsumer; use receive_coop / next_batch (cooperative form) instead of the legacy 5-arg next_batch_custom',
            i_consumer_name, i_queue_name using detail = 'pgque:cooperative_consumer';
    end if;
    select t.tick_id, t.tick_time, t.tick_event_seq into v_last
      from pgque.tick t
     where t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick;
    if not found then
        raise exception 'pgque corruption: consumer % on queue % points at missing tick %',
            i_consumer_name, i_queue_name, s.sub_last_tick using detail = 'pgque:corruption';
    end if;

    prev_tick_id := v_last.tick_id;
    prev_tick_time := v_last.tick_time;
    prev_tick_event_seq := v_last.tick_event_seq;

    -- An open batch is returned again unchanged, whatever the arguments.
    if s.sub_batch is not null then
        select tick_id, tick_time, tick_event_seq into v_next
          from pgque.tick where tick_queue = s.sub_queue and tick_id = s.sub_next_tick;
        if not found then
            raise exception 'pgque corruption: batch % of consumer % on queue % ends at missing tick %',
                s.sub_batch, i_consumer_name, i_queue_name, s.sub_next_tick
                using detail = 'pgque:corruption';
        end if;
        batch_id := s.sub_batch;
        cur_tick_id := v_next.tick_id;
        cur_tick_time := v_next.tick_time;
        cur_tick_event_seq := v_next.tick_event_seq;
        return;
    end if;

    if i_min_count is null and i_min_interval is null then
        select tick_id, tick_time, tick_event_seq into v_next
          from pgque.tick
         where tick_queue = s.sub_queue and tick_id > v_last.tick_id
         order by tick_id limit 1;
    else
        select h.next_tick_id as tick_id, h.next_tick_time as tick_time,
               h.next_tick_seq as tick_event_seq
          into v_next
          from pgque.find_tick_helper(s.sub_queue, v_last.tick_id, v_last.tick_time,
                                      v_last.tick_event_seq, i_min_count, i_min_interval) h;
    end if;

    if v_next.tick_id is null
       or (i_min_lag is not null and v_next.tick_time > pg_catalog.now() - i_min_lag) then
        prev_tick_id := null;
        prev_tick_time := null;
        prev_tick_event_seq := null;
        return;
    end if;

    batch_id := pg_catalog.nextval('pgque.batch_id_seq');
    cur_tick_id := v_next.tick_id;
    cur_tick_time := v_next.tick_time;
    cur_tick_event_seq := v_next.tick_event_seq;
    update pgque.subscription
       set sub_batch = batch_id, sub_next_tick = cur_tick_id, sub_active = pg_catalog.now()
     where sub_queue = s.sub_queue and sub_consumer = s.sub_consumer;
end
$$;

create or replace function pgque.next_batch_info(
    i_queue_name text, i_consumer_name text,
    out batch_id bigint,
    out cur_tick_id bigint, out prev_tick_id bigint,
    out cur_tick_time timestamptz, out prev_tick_time timestamptz,
    out cur_tick_event_seq bigint, out prev_tick_event_seq bigint)
language sql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ select * from pgque.next_batch_custom(i_queue_name, i_consumer_name, null, null, null) $$;
comment on function pgque.next_batch_info(text, text) is
    'Opens the consumer''s next batch (or returns the open one) with its tick ids, times and event sequence values.';

create or replace function pgque.next_batch(i_queue_name text, i_consumer_name text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if pg_catalog.strpos(i_consumer_name, '#') > 0 then
        perform pgque._refuse_reserved_name(i_consumer_name, 'use pgque.receive_partitioned()');
    end if;
    return (pgque._next_batch_custom(i_queue_name, i_consumer_name, null, null, null)).batch_id;
end
$$;
comment on function pgque.next_batch(text, text) is
    'Opens the consumer''s next batch, or returns the open one. Returns its id, or NULL when there is no new tick.';


-- The cooperative forms, for one subconsumer of a group (see coop.sql).
create or replace function pgque.next_batch_custom(
    i_queue text, i_consumer text, i_subconsumer text,
    i_min_lag interval, i_min_count int4, i_min_interval interval,
    i_dead_interval interval default null,
    out batch_id bigint, out prev_tick_id bigint, out next_tick_id bigint)
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_member_name text := pgque._coop_member_name(i_queue, i_consumer, i_subconsumer);
    v_member record;
    v_main record;
    v_dead record;
    v_next record;
begin
    if pg_catalog.strpos(v_member_name, '#') > 0 then
        perform pgque._refuse_reserved_name(i_consumer, null);
        perform pgque._refuse_reserved_name(i_subconsumer, null);
    end if;
    if i_dead_interval < interval '0' then
        raise exception 'dead_interval must be a non-negative interval or NULL, got % (consumer % on queue %)',
            i_dead_interval, v_member_name, i_queue using detail = 'pgque:invalid_argument';
    end if;
    -- By key, as in the plain next_batch_custom above.
    select s.sub_queue, s.sub_consumer, s.sub_id, s.sub_batch, s.sub_last_tick, s.sub_next_tick
      into v_member
      from pgque.subscription s
     where s.sub_queue = (select q.queue_id from pgque.queue q where q.queue_name = i_queue)
       and s.sub_consumer = (select c.co_id from pgque.consumer c where c.co_name = v_member_name)
       and s.sub_role = 'coop_member'
       for no key update of s;
    if not found then
        raise exception 'Not subscriber to queue: %/%', i_queue, v_member_name
            using detail = 'pgque:consumer_not_found';
    end if;

    -- The member's open batch again; the call doubles as a heartbeat.
    if v_member.sub_batch is not null then
        update pgque.subscription set sub_active = pg_catalog.now()
         where sub_queue = v_member.sub_queue and sub_consumer = v_member.sub_consumer;
        batch_id := v_member.sub_batch;
        prev_tick_id := v_member.sub_last_tick;
        next_tick_id := v_member.sub_next_tick;
        return;
    end if;

    -- One member of the group at a time from here: the main row is the cursor.
    -- Locked by a query of that row alone: after waiting for another member,
    -- the lock returns the row's latest version (a join would re-check the
    -- old tick against the moved position and find nothing).
    select m.sub_consumer, m.sub_last_tick into v_main
      from pgque.subscription m
     where m.sub_queue = v_member.sub_queue and m.sub_id = v_member.sub_id
       and m.sub_role = 'coop_main'
       for no key update of m;
    if not found then
        raise exception 'pgque corruption: cooperative consumer % on queue % has no main position',
            i_consumer, i_queue using detail = 'pgque:corruption';
    end if;
    select v_main.sub_consumer as sub_consumer, v_main.sub_last_tick as sub_last_tick,
           t.tick_time, t.tick_event_seq into v_main
      from pgque.tick t
     where t.tick_queue = v_member.sub_queue and t.tick_id = v_main.sub_last_tick;
    if not found then
        raise exception 'pgque corruption: cooperative consumer % on queue % has no main position',
            i_consumer, i_queue using detail = 'pgque:corruption';
    end if;

    -- A member silent for longer than i_dead_interval loses its batch to us,
    -- under a new batch id, so its late ack or nack fails.
    if i_dead_interval is not null then
        select s.sub_consumer, s.sub_batch, s.sub_last_tick, s.sub_next_tick into v_dead
          from pgque.subscription s
         where s.sub_queue = v_member.sub_queue and s.sub_id = v_member.sub_id
           and s.sub_role = 'coop_member' and s.sub_batch is not null
           and pg_catalog.now() - s.sub_active > i_dead_interval  -- no overflow for any interval
         order by s.sub_active
         limit 1
           for no key update skip locked;
        if found then
            update pgque.subscription
               set sub_batch = null, sub_last_tick = null, sub_next_tick = null
             where sub_queue = v_member.sub_queue and sub_consumer = v_dead.sub_consumer;
            batch_id := pg_catalog.nextval('pgque.batch_id_seq');
            prev_tick_id := v_dead.sub_last_tick;
            next_tick_id := v_dead.sub_next_tick;
            update pgque.subscription
               set sub_batch = batch_id, sub_last_tick = prev_tick_id,
                   sub_next_tick = next_tick_id, sub_active = pg_catalog.now()
             where sub_queue = v_member.sub_queue and sub_consumer = v_member.sub_consumer;
            perform pgque.log_event('warning', 'consumer', 'batch taken over', pg_catalog.jsonb_build_object(
                'queue', i_queue, 'consumer', i_consumer, 'subconsumer', i_subconsumer,
                'batch', batch_id, 'old_batch', v_dead.sub_batch));
            return;
        end if;
    end if;

    if i_min_count is null and i_min_interval is null then
        select tick_id, tick_time into v_next from pgque.tick
         where tick_queue = v_member.sub_queue and tick_id > v_main.sub_last_tick
         order by tick_id limit 1;
    else
        select h.next_tick_id as tick_id, h.next_tick_time as tick_time into v_next
          from pgque.find_tick_helper(v_member.sub_queue, v_main.sub_last_tick, v_main.tick_time,
                                      v_main.tick_event_seq, i_min_count, i_min_interval) h;
    end if;
    if v_next.tick_id is null
       or (i_min_lag is not null and v_next.tick_time > pg_catalog.now() - i_min_lag) then
        return;
    end if;

    batch_id := pg_catalog.nextval('pgque.batch_id_seq');
    prev_tick_id := v_main.sub_last_tick;
    next_tick_id := v_next.tick_id;
    update pgque.subscription
       set sub_batch = batch_id, sub_last_tick = prev_tick_id, sub_next_tick = next_tick_id,
           sub_active = pg_catalog.now()
     where sub_queue = v_member.sub_queue and sub_consumer = v_member.sub_consumer;
    update pgque.subscription set sub_last_tick = next_tick_id, sub_active = pg_catalog.now()
     where sub_queue = v_member.sub_queue and sub_consumer = v_main.sub_consumer;
end
$$;
comment on function pgque.next_batch_custom(text, text, text, interval, int4, interval, interval) is
    'Cooperative form: the subconsumer''s open batch, a dead member''s batch (taken over under a new id), or the group''s next batch under the thresholds.';

create or replace function pgque.next_batch(
    i_queue text, i_consumer text, i_subconsumer text, i_dead_interval interval default null)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return (pgque.next_batch_custom(i_queue, i_consumer, i_subconsumer, null, null, null, i_dead_interval)).batch_id; end $$;
comment on function pgque.next_batch(text, text, text, interval) is
    'Cooperative form of next_batch for one subconsumer. Returns the batch id or NULL.';

-- Internal: which event tables (numbers) can hold events of a batch from
-- snapshot i_s1 to i_s2, given the queue's rotation state. At most two: the
-- rotation rule guarantees no batch reaches the table before the previous one.
create or replace function pgque._batch_table_numbers(
    i_queue pgque.queue, i_s1 pg_snapshot, i_s2 pg_snapshot)
returns integer[] language plpgsql stable as $$
declare
    v_prev integer := (i_queue.queue_cur_table + i_queue.queue_ntables - 1) % i_queue.queue_ntables;
begin
    if pg_catalog.pg_snapshot_xmax(i_s2) < i_queue.queue_switch_step1 then
        -- Cut entirely before the last rotation.
        return array[v_prev];
    elsif i_queue.queue_switch_step2 is not null
          and pg_catalog.pg_snapshot_xmin(i_s1) > i_queue.queue_switch_step2 then
        -- Started after every writer could see the rotation.
        return array[i_queue.queue_cur_table];
    end if;
    return array[i_queue.queue_cur_table, v_prev];
end
$$;

-- Internal: the names of those tables (_batch_table_numbers).
create or replace function pgque._batch_tables(q pgque.queue, i_s1 pg_snapshot, i_s2 pg_snapshot)
returns text[] language sql stable as $$
    select pg_catalog.array_agg(pgque._event_table_name(q, t) order by o)
      from pg_catalog.unnest(pgque._batch_table_numbers(q, i_s1, i_s2)) with ordinality u(t, o)
$$;

-- Internal: an open batch's queue row, its consumer's sub_id and the
-- snapshots of its two ticks; batch_not_found when the batch is not open.
create or replace function pgque._batch_range(
    i_batch_id bigint,
    out queue pgque.queue, out sub_id integer, out s1 pg_snapshot, out s2 pg_snapshot)
language plpgsql stable
as $$
declare
    v_queue_id integer;
begin
    -- Each tick by its whole key (two joins to pgque.tick let the planner
    -- look the second one up by the queue alone: every tick the queue kept).
    select s.sub_queue, s.sub_id,
           (select t.tick_snapshot from pgque.tick t
             where t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick),
           (select t.tick_snapshot from pgque.tick t
             where t.tick_queue = s.sub_queue and t.tick_id = s.sub_next_tick)
      into v_queue_id, sub_id, s1, s2
      from pgque.subscription s
     where s.sub_batch = i_batch_id;
    if v_queue_id is null or s1 is null or s2 is null then
        raise exception 'batch not found' using detail = 'pgque:batch_not_found';
    end if;
    select * into queue from pgque.queue q where q.queue_id = v_queue_id;
end
$$;

create or replace function pgque.batch_event_tables(x_batch_id bigint)
returns setof text language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    b record := pgque._batch_range(x_batch_id);
begin
    return query select pgque.quote_fqname(t)
                   from pg_catalog.unnest(pgque._batch_tables(b.queue, b.s1, b.s2)) t;
end
$$;
comment on function pgque.batch_event_tables(bigint) is
    'The event tables the batch''s events can be in.';

-- Internal: the bounds of the events between snapshots i_s1 and i_s2: those
-- whose txid is from lower_txid to upper_txid and visible in i_s2 but not
-- in i_s1, and those of txid_list (running at i_s1, finished at i_s2, too
-- far below the range to fold into it). NULL txid_list: none.
create or replace function pgque._tick_range_bounds(
    i_s1 pg_snapshot, i_s2 pg_snapshot,
    out lower_txid xid8, out upper_txid xid8, out txid_list xid8[])
language plpgsql immutable
as $$
declare
    v_lower bigint := pg_catalog.pg_snapshot_xmax(i_s1)::text::bigint;
    v_xid bigint;
    v_list bigint[] := '{}';
begin
    upper_txid := pg_catalog.pg_snapshot_xmax(i_s2);
    -- Nothing was running at s1 (its xmin is its xmax): no txid of (b) below,
    -- and no query to run (the usual case of a quiet moment).
    if pg_catalog.pg_snapshot_xmin(i_s1) = pg_catalog.pg_snapshot_xmax(i_s1) then
        lower_txid := pg_catalog.pg_snapshot_xmax(i_s1);
        return;
    end if;
    -- Membership: visible in s2, not visible in s1. Such txids are either
    -- (a) from xmax(s1) up to xmax(s2), checked against both snapshots, or
    -- (b) running at s1 and no longer at s2: xip(s1) minus xip(s2), matched
    -- exactly. Txids of (b) close below the range's lower bound are folded
    -- into the range (which re-checks visibility), keeping the list short.
    for v_xid in
        select x::text::bigint from pg_catalog.pg_snapshot_xip(i_s1) x
        except
        select x::text::bigint from pg_catalog.pg_snapshot_xip(i_s2) x
        order by 1 desc
    loop
        if v_xid >= v_lower - 100 then
            v_lower := v_xid;
        else
            v_list := v_list || v_xid;
        end if;
    end loop;
    lower_txid := v_lower::text::xid8;
    if pg_catalog.cardinality(v_list) > 0 then
        txid_list := v_list::text[]::xid8[];
    end if;
end
$$;

-- Internal: the event columns of a query over event tables, written once:
-- get_batch_events' result, in PgQ's order, each column prefixed with
-- i_prefix (a table alias and a dot, or '').
create or replace function pgque._event_columns(i_prefix text)
returns text language sql immutable as $$
    select pg_catalog.format(
        '%1$sev_id, %1$sev_time, %1$sev_txid::text::int8 as ev_txid, %1$sev_retry, %1$sev_type,'
        || ' %1$sev_data, %1$sev_extra1, %1$sev_extra2, %1$sev_extra3, %1$sev_extra4', i_prefix)
$$;

-- Internal: the SQL selecting the events of queue i_queue whose transaction is
-- visible in snapshot i_s2 and not in i_s1 (the events between two ticks),
-- unordered, with i_filter (SQL starting with ' and ') added to each part.
-- The one builder of a tick range's query: batch_event_sql (batches) and
-- spark_range_sql (the Spark reader) differ only in their filter.
create or replace function pgque._tick_range_sql(
    i_queue pgque.queue, i_s1 pg_snapshot, i_s2 pg_snapshot, i_filter text)
returns text language plpgsql stable as $$
declare
    r record := pgque._tick_range_bounds(i_s1, i_s2);
    v_parts text[] := '{}';
    v_table text;
    v_columns constant text := pgque._event_columns('');
begin
    foreach v_table in array pgque._batch_tables(i_queue, i_s1, i_s2) loop
        v_parts := v_parts || pg_catalog.format(
            'select %s from %s where ev_txid >= %L::xid8 and ev_txid <= %L::xid8'
            ' and pg_catalog.pg_visible_in_snapshot(ev_txid, %L::pg_snapshot)'
            ' and not pg_catalog.pg_visible_in_snapshot(ev_txid, %L::pg_snapshot)%s',
            v_columns, pgque.quote_fqname(v_table), r.lower_txid, r.upper_txid, i_s2, i_s1, i_filter);
        if r.txid_list is not null then
            v_parts := v_parts || pg_catalog.format(
                'select %s from %s where ev_txid = any (%L::xid8[])%s',
                v_columns, pgque.quote_fqname(v_table), r.txid_list, i_filter);
        end if;
    end loop;
    return pg_catalog.array_to_string(v_parts, ' union all ');
end
$$;

create or replace function pgque.batch_event_sql(x_batch_id bigint)
returns text language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    b record := pgque._batch_range(x_batch_id);
begin
    -- The consumer's own retry copies (ev_owner) are part of its batches.
    return pgque._tick_range_sql(
               b.queue, b.s1, b.s2,
               pg_catalog.format(' and (ev_owner is null or ev_owner = %s)', b.sub_id))
        || ' order by 1';
end
$$;
comment on function pgque.batch_event_sql(bigint) is
    'The SQL that reads the batch''s events.';

create or replace function pgque.get_batch_events(
    x_batch_id bigint,
    out ev_id bigint, out ev_time timestamptz, out ev_txid bigint, out ev_retry int4,
    out ev_type text, out ev_data text,
    out ev_extra1 text, out ev_extra2 text, out ev_extra3 text, out ev_extra4 text)
returns setof record language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off as $$
declare
    a record;
begin
    perform pgque._refuse_slot_batch(x_batch_id, 'use pgque.receive_partitioned()');
    a := pgque._batch_read_args(x_batch_id);
    -- Through the batch readers (batch_reader.sql): cached plans.
    if a.merge then
        return query
        select * from pgque._read_batch(a.queue_id, a.tables, a.lower_txid, a.upper_txid,
                                        a.s1, a.s2, a.txid_list, a.owner, null, null, null, null) r
         order by r.ev_id;
    else
        return query
        select * from pgque._read_batch(a.queue_id, a.tables, a.lower_txid, a.upper_txid,
                                        a.s1, a.s2, a.txid_list, a.owner, null, null, null, null);
    end if;
end
$$;
comment on function pgque.get_batch_events(bigint) is
    'All events of the open batch, ordered by ev_id.';

create or replace function pgque.finish_batch(x_batch_id bigint)
returns integer language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off
-- ack (receive.sql) is the same: not a partition slot's batch
-- (ack_partitioned closes those, under the slot's lease), nor a cooperative main's.
as $$
begin
    return pgque.ack(x_batch_id);
end
$$;
comment on function pgque.finish_batch(bigint) is
    'Closes the batch and moves the consumer to its end tick. Returns 1, or 0 with a WARNING when the batch is not open.';

-- Internal: finish_batch for any batch, a partition slot's too.
create or replace function pgque._finish_batch(i_batch_id bigint)
returns integer language plpgsql
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off as $$
begin
    -- A cooperative member has no position of its own (the group's main row
    -- holds it): between batches it points nowhere, holding back no rotation.
    -- (ack closes the usual batch the same way itself: keep the two alike.)
    update pgque.subscription
       set sub_active = pg_catalog.now(),
           sub_last_tick = case when sub_role = 'coop_member' then null else sub_next_tick end,
           sub_next_tick = null, sub_batch = null
     where sub_batch = i_batch_id and sub_role <> 'coop_main';
    if not found then
        if exists (select 1 from pgque.subscription where sub_batch = i_batch_id) then
            raise exception 'cannot finish cooperative main consumer batch % as normal active consumer',
                i_batch_id using detail = 'pgque:cooperative_consumer';
        end if;
        -- Finishing twice is not an error.
        raise warning 'finish_batch: batch % not found', i_batch_id;
        return 0;
    end if;
    return 1;
end
$$;

create or replace function pgque.get_batch_info(
    x_batch_id bigint,
    out queue_name text, out consumer_name text,
    out batch_start timestamptz, out batch_end timestamptz,
    out prev_tick_id bigint, out tick_id bigint, out lag interval,
    out seq_start bigint, out seq_end bigint)
language sql stable
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
    select q.queue_name, c.co_name, t1.tick_time, t2.tick_time,
           t1.tick_id, t2.tick_id, pg_catalog.now() - t2.tick_time,
           t1.tick_event_seq, t2.tick_event_seq
      from (select 1) one
      left join pgque.subscription s on s.sub_batch = x_batch_id
      left join pgque.queue q on q.queue_id = s.sub_queue
      left join pgque.consumer c on c.co_id = s.sub_consumer
      -- Each tick by its whole key (offset 0 keeps the subqueries apart: two
      -- plain joins let the planner find the second tick by the queue alone).
      left join lateral (select * from pgque.tick t
                          where t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
                         offset 0) t1 on true
      left join lateral (select * from pgque.tick t
                          where t.tick_queue = s.sub_queue and t.tick_id = s.sub_next_tick
                         offset 0) t2 on true
$$;
comment on function pgque.get_batch_info(bigint) is
    'Queue, consumer, ticks, times and lag of a batch; all NULL for an unknown batch.';

-- file: functions/batch_reader.sql
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

-- file: functions/retry.sql
-- Retries: an event a consumer could not process goes to retry_queue and
-- comes back later for that consumer only (ev_owner = its sub_id), with the
-- same ev_id and ev_retry + 1.

-- Internal: the events of an open batch with the given ids (all when NULL),
-- read through the batch query so only events of the batch qualify.
create or replace function pgque._batch_events_by_id(i_batch_id bigint, i_event_ids bigint[])
returns setof pgque.event_template language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
-- JIT and parallel workers: see batch_reader.sql.
set jit = off set max_parallel_workers_per_gather = 0 as $$
begin
    return query execute
        'select b.ev_id, b.ev_time, b.ev_txid::text::xid8, null::integer, b.ev_retry,'
        || ' b.ev_type, b.ev_data, b.ev_extra1, b.ev_extra2, b.ev_extra3, b.ev_extra4'
        || ' from (' || pgque.batch_event_sql(i_batch_id) || ') b'
        || ' where $1 is null or b.ev_id = any ($1)'
        using i_event_ids;
end
$$;

-- Internal: copies events of an open batch into retry_queue for the batch's
-- consumer. Events already queued for that consumer are left alone.
create or replace function pgque._retry_batch_events(
    i_batch_id bigint, i_event_ids bigint[], i_retry_time timestamptz)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_count integer;
begin
    insert into pgque.retry_queue
        (ev_retry_after, ev_queue, ev_id, ev_time, ev_txid, ev_owner, ev_retry,
         ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
    select i_retry_time, s.sub_queue, e.ev_id, e.ev_time, null, s.sub_id,
           coalesce(e.ev_retry, 0) + 1, e.ev_type, e.ev_data,
           e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4
      from pgque._batch_events_by_id(i_batch_id, i_event_ids) e
      join pgque.subscription s on s.sub_batch = i_batch_id
    on conflict (ev_owner, ev_id) do nothing;
    get diagnostics v_count = row_count;
    return v_count;
end
$$;

create or replace function pgque.event_retry(
    x_batch_id bigint, x_event_id bigint, x_retry_time timestamptz)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if pgque._refuse_slot_batch(x_batch_id, 'use pgque.nack_partitioned()') then
        if pgque._retry_batch_events(x_batch_id, array[x_event_id], x_retry_time) > 0 then
            return 1;
        end if;
        -- Nothing inserted: either queued already, or not in this batch.
        perform 1 from pgque._batch_events_by_id(x_batch_id, array[x_event_id]);
        if found then
            return 0;
        end if;
    end if;
    raise exception 'event not found' using detail = 'pgque:event_not_found';
end
$$;
comment on function pgque.event_retry(bigint, bigint, timestamptz) is
    'Queues an event of the open batch for retry at the given time, for this consumer only. Returns 1, or 0 when already queued.';

create or replace function pgque.event_retry(
    x_batch_id bigint, x_event_id bigint, x_retry_seconds integer)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque.event_retry(x_batch_id, x_event_id, current_timestamp + x_retry_seconds * interval '1 second'); end $$;
comment on function pgque.event_retry(bigint, bigint, integer) is
    'Queues an event of the open batch for retry after the given seconds. Returns 1, or 0 when already queued.';

create or replace function pgque.batch_retry(i_batch_id bigint, i_retry_seconds integer)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if not pgque._refuse_slot_batch(i_batch_id, 'use pgque.nack_partitioned()') then
        raise exception 'batch_retry: batch % not found', i_batch_id
            using detail = 'pgque:batch_not_found';
    end if;
    return pgque._retry_batch_events(i_batch_id, null,
                                     current_timestamp + i_retry_seconds * interval '1 second');
end
$$;
comment on function pgque.batch_retry(bigint, integer) is
    'Queues every event of the open batch for retry after the given seconds. Returns how many were queued.';

create or replace function pgque.event_retry_raw(
    x_queue text, x_consumer text, x_retry_after timestamptz,
    x_ev_id bigint, x_ev_time timestamptz, x_ev_retry integer,
    x_ev_type text, x_ev_data text,
    x_ev_extra1 text, x_ev_extra2 text, x_ev_extra3 text, x_ev_extra4 text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_sub record;
    v_ev_id bigint;
begin
    perform pgque._refuse_reserved_name(x_consumer, null);
    select s.sub_id, s.sub_queue into v_sub
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
     where q.queue_name = x_queue and c.co_name = x_consumer;
    if not found then
        raise exception 'Not subscriber to queue: %/%',
            coalesce(x_queue, 'NULL'), coalesce(x_consumer, 'NULL')
            using detail = 'pgque:consumer_not_found';
    end if;
    v_ev_id := coalesce(x_ev_id, pg_catalog.nextval(pgque._queue_sequence(v_sub.sub_queue, 'id')));
    insert into pgque.retry_queue
        (ev_retry_after, ev_queue, ev_id, ev_time, ev_owner, ev_retry,
         ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
    values (x_retry_after, v_sub.sub_queue, v_ev_id, x_ev_time, v_sub.sub_id, x_ev_retry,
            x_ev_type, x_ev_data, x_ev_extra1, x_ev_extra2, x_ev_extra3, x_ev_extra4);
    return v_ev_id;
end
$$;
comment on function pgque.event_retry_raw(text, text, timestamptz, bigint, timestamptz, integer, text, text, text, text, text, text) is
    'Queues an arbitrary event for retry for one consumer (NULL ev_id: a new id). Returns the event id.';

-- Internal: moves due retry events back into their queues' current tables,
-- oldest due first, at most i_limit (all when NULL), set-based per queue.
create or replace function pgque._move_retry_events(i_limit integer)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q record;
    v_queue pgque.queue;
    v_seq regclass;
    v_moved integer;
    v_total integer := 0;
begin
    -- One mover at a time; producers and event_retry are not blocked.
    lock table pgque.retry_queue in share update exclusive mode;
    -- The txid first, then the current table (see insert_event_raw).
    perform pg_catalog.pg_current_xact_id();

    for q in
        select qu.queue_id, pg_catalog.array_agg(r.ctid) as rows
          from (select rq.ctid, rq.ev_queue from pgque.retry_queue rq
                 where rq.ev_retry_after <= current_timestamp
                   -- A queue closed for inserts keeps its retries until it reopens.
                   and rq.ev_queue in (select queue_id from pgque.queue
                                        where not queue_disable_insert)
                 order by rq.ev_retry_after
                 limit i_limit) r
          join pgque.queue qu on qu.queue_id = r.ev_queue
         group by qu.queue_id
         order by qu.queue_id
    loop
        select * into v_queue from pgque.queue where queue_id = q.queue_id;
        execute 'with moved as (delete from pgque.retry_queue where ctid = any ($1) returning *)'
             || ' insert into ' || pgque._event_table_name(v_queue, v_queue.queue_cur_table)
             || ' (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data,'
             || '  ev_extra1, ev_extra2, ev_extra3, ev_extra4)'
             || ' select ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data,'
             || '  ev_extra1, ev_extra2, ev_extra3, ev_extra4 from moved order by ev_id'
          using q.rows;
        get diagnostics v_moved = row_count;
        -- Advance the event sequence as one insert per event would, so the
        -- ticker notices the activity.
        v_seq := pgque._queue_relation(v_queue, 'event_seq');
        perform pg_catalog.nextval(v_seq) from pg_catalog.generate_series(1, v_moved);
        v_total := v_total + v_moved;
    end loop;
    return v_total;
end
$$;

create or replace function pgque.maint_retry_events()
returns integer
language sql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$ select pgque._move_retry_events(10) $$;
comment on function pgque.maint_retry_events() is
    'Moves at most 10 due retry events back into their queues; call again until it returns 0.';

-- file: functions/maint.sql
-- Maintenance: table rotation, retry moves and the maint() round.
--
-- Rotation recycles a queue's oldest event table with TRUNCATE, so events
-- are never deleted one by one. It runs in two steps in two transactions:
-- step 1 switches writers to the next (emptied) table and records its txid
-- in queue_switch_step1; step 2, in a later transaction, records a txid
-- assigned after step 1 committed in queue_switch_step2. Batches that end
-- before step 1 read only the previous table, batches that start after
-- step 2 only the current one, the rest both.

create or replace function pgque.maint_rotate_tables_step1(i_queue_name text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue%rowtype;
    v_oldest_xmin xid8;
    v_oldest_tick bigint;
    v_next_table text;
begin
    -- Never wait: a transaction that received or acked may hold the queue's
    -- row (a key-share lock, through a foreign key) until it ends. Step 1
    -- changes no key column, so it does not conflict with those; any other
    -- holder makes this round skip the queue, and the next round retries
    -- (queue_health's rotation_health warns when that lasts).
    select * into q from pgque.queue
     where queue_name = i_queue_name
       and queue_rotation_period is not null
       and queue_switch_step2 is not null
       and queue_switch_time + queue_rotation_period < current_timestamp
       for no key update skip locked;
    if not found then
        return 0;
    end if;
    if pg_catalog.pg_current_xact_id() < q.queue_switch_step1 then
        raise exception 'Invalid PgQ state: queue % was rotated by a future txid (txid counter went backwards?)',
            i_queue_name using detail = 'pgque:invalid_state';
    end if;

    -- The table about to be emptied was last written before the previous
    -- step 2: rotate only when every consumer's position is past it.
    select sub_last_tick into v_oldest_tick from pgque.subscription
     where sub_queue = q.queue_id and sub_last_tick is not null
     order by sub_last_tick limit 1;
    if found then
        select pg_catalog.pg_snapshot_xmin(tick_snapshot) into v_oldest_xmin
          from pgque.tick where tick_queue = q.queue_id and tick_id = v_oldest_tick;
        if not found then
            raise exception 'pgque corruption: queue % has a consumer at missing tick %',
                i_queue_name, v_oldest_tick using detail = 'pgque:corruption';
        end if;
        if v_oldest_xmin <= q.queue_switch_step2 then
            return 0;
        end if;
    end if;

    v_next_table := pgque._queue_relation(
        q, ((q.queue_cur_table + 1) % q.queue_ntables)::text);
    begin
        execute 'lock table ' || v_next_table || ' in access exclusive mode nowait';
    exception when lock_not_available then
        -- Someone (pg_dump, a long reader) holds the table: try next round.
        return 0;
    end;
    execute 'truncate ' || v_next_table;

    update pgque.queue
       set queue_cur_table = (queue_cur_table + 1) % queue_ntables,
           queue_switch_time = current_timestamp,
           queue_switch_step1 = pg_catalog.pg_current_xact_id(),
           queue_switch_step2 = null
     where queue_id = q.queue_id;

    perform pgque.log_event('info', 'rotation', 'step 1', pg_catalog.jsonb_build_object(
        'queue', i_queue_name, 'table', (q.queue_cur_table + 1) % q.queue_ntables));
    -- Ticks below the previous step 2 can no longer start a batch.
    delete from pgque.tick
     where tick_queue = q.queue_id
       and pg_catalog.pg_snapshot_xmin(tick_snapshot) < q.queue_switch_step2;
    return 0;
end
$$;
comment on function pgque.maint_rotate_tables_step1(text) is
    'Rotates the queue''s event tables when due and no consumer needs the oldest one. Returns 0.';

create or replace function pgque.maint_rotate_tables_step2()
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    -- Only rotations committed by an earlier transaction: step 2 in the
    -- same transaction as step 1 would lose events of racing writers.
    -- Rows another transaction holds are skipped, not waited for.
    update pgque.queue
       set queue_switch_step2 = pg_catalog.pg_current_xact_id()
     where queue_id in (
            select queue_id from pgque.queue
             where queue_switch_step2 is null
               and queue_switch_step1 < pg_catalog.pg_current_xact_id()
               for no key update skip locked);
    if found then
        perform pgque.log_event('info', 'rotation', 'step 2', '{}');
    end if;
    return 0;
end
$$;
comment on function pgque.maint_rotate_tables_step2() is
    'Completes rotations whose step 1 committed in an earlier transaction. Returns 0.';

create or replace function pgque.maint_tables_to_vacuum()
returns setof text language sql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
    -- The bookkeeping tables churn with every batch and tick; they are listed
    -- even with autovacuum on, whose naptime is too slow for them.
    select t from pg_catalog.unnest(array[
        'pgque.subscription', 'pgque.consumer', 'pgque.queue',
        'pgque.tick', 'pgque.retry_queue', 'pgque.delayed_events', 'pgque.dead_letter']) t
     where pg_catalog.to_regclass(t) is not null
$$;
comment on function pgque.maint_tables_to_vacuum() is
    'The hot bookkeeping tables to VACUUM regularly (in separate statements: VACUUM cannot run in a function).';

-- Internal: the queues whose rotation is due (step 1), by name.
create or replace function pgque._rotation_due()
returns setof text language sql stable as $$
    select queue_name from pgque.queue
     where queue_rotation_period is not null
       and queue_switch_step2 is not null
       and queue_switch_time + queue_rotation_period < current_timestamp
     order by queue_name
$$;

-- Internal: every queue's extra maintenance functions (queue_extra_maint),
-- by queue name, each queue's in its order.
create or replace function pgque._extra_maint(out queue_name text, out maint_function text)
returns setof record language sql stable as $$
    select q.queue_name, f.maint_function
      from pgque.queue q,
           pg_catalog.unnest(q.queue_extra_maint) with ordinality as f(maint_function, n)
     where q.queue_extra_maint is not null
     order by q.queue_name, f.n
$$;

create or replace function pgque.maint_operations(out func_name text, out func_arg text)
returns setof record language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_queue text;
    v_rotation_due boolean := false;
    v_func text;
begin
    for v_queue in select pgque._rotation_due() loop
        func_name := 'pgque.maint_rotate_tables_step1';
        func_arg := v_queue;
        v_rotation_due := true;
        return next;
    end loop;

    if v_rotation_due or exists (select 1 from pgque.queue where queue_switch_step2 is null) then
        func_name := 'pgque.maint_rotate_tables_step2';
        func_arg := null;
        return next;
    end if;

    -- Only what maint() itself would run: a daemon runs these as it is.
    return query
        select e.maint_function, e.queue_name from pgque._extra_maint() e
         where pgque._allowed_maint_function(e.maint_function) is not null;

    for v_func in select t from pgque.maint_tables_to_vacuum() t loop
        func_name := 'vacuum';
        func_arg := v_func;
        return next;
    end loop;
end
$$;
comment on function pgque.maint_operations() is
    'What a maintenance daemon should run, each call in its own transaction: (func_name, func_arg) rows.';

-- Internal: the function a queue_extra_maint entry names, when maint() may
-- run it: pgque's own pgque.maint_*(text), or one an owner registered with
-- register_maint_function(). Compared by OID, never by name. NULL otherwise.
create or replace function pgque._allowed_maint_function(i_function text)
returns regprocedure language plpgsql stable set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_proc regprocedure;
begin
    begin
        v_proc := pg_catalog.to_regprocedure(i_function || '(text)');
    exception when others then
        return null;  -- not a function name at all
    end;
    if v_proc is null then
        return null;
    end if;
    if exists (select 1 from pg_catalog.pg_proc p
                where p.oid = v_proc and p.pronamespace = 'pgque'::regnamespace
                  and p.proname like 'maint\_%')
       or exists (select 1 from pgque.maint_function m
                   where pg_catalog.to_regprocedure(m.mf_function || '(text)') = v_proc)
    then
        return v_proc;
    end if;
    return null;
end
$$;

-- Internal: runs one queue_extra_maint function, when it is allowed to.
create or replace function pgque._run_extra_maint(i_function text, i_queue_name text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_proc regprocedure := pgque._allowed_maint_function(i_function);
    v_result integer;
begin
    if v_proc is null then
        raise warning 'pgque.maint: skipping % for queue %: not pgque''s own maint_* function and not registered with pgque.register_maint_function()',
            i_function, i_queue_name;
        return 0;
    end if;
    execute pg_catalog.format('select %s($1)', v_proc::regproc) into v_result using i_queue_name;
    return coalesce(v_result, 0);
end
$$;

create or replace function pgque.register_maint_function(i_function regprocedure)
returns integer language plpgsql strict
security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_proc record;
begin
    select n.nspname, p.proname, p.pronargs, p.proargtypes, p.prorettype, p.prokind
      into v_proc
      from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
     where p.oid = i_function;
    if v_proc.prokind <> 'f' or v_proc.pronargs <> 1
       or v_proc.proargtypes[0] <> 'pg_catalog.text'::regtype
       or v_proc.prorettype not in ('pg_catalog.int4'::regtype, 'pg_catalog.int8'::regtype)
    then
        raise exception 'register_maint_function: % must be a function taking one text argument (the queue name) and returning integer',
            i_function using detail = 'pgque:invalid_argument';
    end if;
    insert into pgque.maint_function (mf_function)
    values (pg_catalog.quote_ident(v_proc.nspname) || '.' || pg_catalog.quote_ident(v_proc.proname))
    on conflict do nothing;
    return case when found then 1 else 0 end;
end
$$;
comment on function pgque.register_maint_function(regprocedure) is
    'Owner only: allows a function f(queue text) returning integer in queue_extra_maint (set with set_queue_config(queue, ''extra_maint'', ...)); maint() runs it as pgque''s owner. Returns 1, or 0 when already allowed.';

create or replace function pgque.unregister_maint_function(i_function regprocedure)
returns integer language plpgsql strict
security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    delete from pgque.maint_function m
     where pg_catalog.to_regprocedure(m.mf_function || '(text)') = i_function;
    return case when found then 1 else 0 end;
end
$$;
comment on function pgque.unregister_maint_function(regprocedure) is
    'Owner only: withdraws a register_maint_function() permission; maint() skips the function from then on. Returns 1, or 0 when it was not registered.';

create or replace function pgque.maint()
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q record;
    v_queue text;
    v_total integer := 0;
begin
    -- 1. Complete rotations begun by an earlier maint() (or step 1 call).
    v_total := v_total + pgque.maint_rotate_tables_step2();
    -- 2. Every due retry, set-based, no cap; then due delayed messages.
    v_total := v_total + pgque._move_retry_events(null);
    v_total := v_total + pgque.maint_deliver_delayed();
    -- 3. Rotation step 1 where due; step 2 follows in the next round.
    for v_queue in select pgque._rotation_due() loop
        v_total := v_total + pgque.maint_rotate_tables_step1(v_queue);
    end loop;
    -- 4. Per-queue extra maintenance functions.
    for q in select * from pgque._extra_maint() loop
        v_total := v_total + pgque._run_extra_maint(q.maint_function, q.queue_name);
    end loop;
    return v_total;
end
$$;
comment on function pgque.maint() is
    'One maintenance round: completes earlier rotations, moves due retries and delayed messages, starts due rotations, runs extra maintenance. Returns the sum of their results.';

-- maint()'s work with a transaction per operation, as PgQ's maintenance
-- daemon runs maint_operations(): a queue whose step waits or fails holds
-- back nothing that other queues' steps already did. A procedure that
-- commits runs as its caller and cannot pin search_path, so every function,
-- operator and type is qualified (tests/security runs it on a hostile path).
create or replace procedure pgque.run_maint()
language plpgsql
as $$
declare
    v_op record;
    v_ops integer := 0;
    v_failures integer := 0;
    v_last_error pg_catalog.text;
begin
    -- Inside a transaction block this fails at once (invalid transaction
    -- termination).
    commit;
    perform pgque.maint_rotate_tables_step2();
    commit;
    perform pgque._move_retry_events(null);
    commit;
    perform pgque.maint_deliver_delayed();
    commit;
    for v_op in select o.func_name, o.func_arg from pgque.maint_operations() o loop
        v_ops := v_ops OPERATOR(pg_catalog.+) 1;
        begin
            if v_op.func_name OPERATOR(pg_catalog.=) 'pgque.maint_rotate_tables_step1' then
                perform pgque.maint_rotate_tables_step1(v_op.func_arg);
            elsif v_op.func_name OPERATOR(pg_catalog.=) 'pgque.maint_rotate_tables_step2' then
                perform pgque.maint_rotate_tables_step2();
            elsif v_op.func_name OPERATOR(pg_catalog.<>) 'vacuum' then
                -- VACUUM cannot run here (the pgque_vacuum job does it).
                perform pgque._run_extra_maint(v_op.func_name, v_op.func_arg);
            end if;
        exception when query_canceled then
            raise;
        when others then
            -- One failing operation does not stop the others; reported at the end.
            v_failures := v_failures OPERATOR(pg_catalog.+) 1;
            v_last_error := pg_catalog.concat_ws(': ', v_op.func_name, v_op.func_arg, sqlerrm);
        end;
        commit;
    end loop;
    if v_failures OPERATOR(pg_catalog.>) 0 then
        raise exception 'pgque.run_maint: % of % operations failed; last: %',
            v_failures, v_ops, v_last_error using detail = 'pgque:maint_failed';
    end if;
end
$$;
comment on procedure pgque.run_maint() is
    'CALL outside a transaction block: maint()''s work, one operation per transaction (rotation steps per queue, retries, delayed messages, extra maintenance), so no queue waits for another (what the pg_cron and pg_timetable maint jobs run).';

-- file: functions/info.sql
-- Information functions: queue and consumer figures for monitoring.
-- Event counts come from sequences, which also count rolled-back and retried
-- inserts, so they are estimates.

create or replace function pgque.get_queue_info(
    i_queue_name text default null,
    out queue_name text, out queue_ntables integer, out queue_cur_table integer,
    out queue_rotation_period interval, out queue_switch_time timestamptz,
    out queue_external_ticker boolean, out queue_ticker_paused boolean,
    out queue_ticker_max_count integer, out queue_ticker_max_lag interval,
    out queue_ticker_idle_period interval, out ticker_lag interval,
    out ev_per_sec float8, out ev_new bigint, out last_tick_id bigint)
returns setof record language sql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
    select q.queue_name, q.queue_ntables, q.queue_cur_table,
           q.queue_rotation_period, q.queue_switch_time,
           q.queue_external_ticker, q.queue_ticker_paused,
           q.queue_ticker_max_count, q.queue_ticker_max_lag,
           q.queue_ticker_idle_period,
           pg_catalog.now() - last.tick_time,
           case when last.tick_time > old.tick_time then
               (last.tick_event_seq - old.tick_event_seq)::float8
               / extract(epoch from last.tick_time - old.tick_time)::float8
           end,
           pgque._event_seq_now(q.queue_id) - last.tick_event_seq,
           last.tick_id
      from pgque.queue q
      left join lateral (
          select t.tick_id, t.tick_time, t.tick_event_seq from pgque.tick t
           where t.tick_queue = q.queue_id order by t.tick_id desc limit 1) last on true
      left join lateral (
          -- The rate's base: the oldest tick among the last 20 tick ids (PgQ's window).
          select t.tick_time, t.tick_event_seq from pgque.tick t
           where t.tick_queue = q.queue_id and t.tick_id >= last.tick_id - 20
           order by t.tick_id limit 1) old on true
     where i_queue_name is null or q.queue_name = i_queue_name
     order by q.queue_name
$$;
comment on function pgque.get_queue_info(text) is
    'Configuration, ticker lag, event rate, unticked events and last tick of one queue, or of all '
    '(the name left out or NULL).';

create or replace function pgque.get_consumer_info(
    i_queue_name text default null, i_consumer_name text default null,
    out queue_name text, out consumer_name text, out lag interval, out last_seen interval,
    out last_tick bigint, out current_batch bigint, out next_tick bigint,
    out pending_events bigint)
returns setof record language sql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
    select q.queue_name, c.co_name,
           pg_catalog.now() - t.tick_time,
           pg_catalog.now() - s.sub_active,
           s.sub_last_tick, s.sub_batch, s.sub_next_tick,
           last.tick_event_seq - t.tick_event_seq
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
      left join pgque.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
      left join lateral (
          select lt.tick_event_seq from pgque.tick lt
           where lt.tick_queue = s.sub_queue order by lt.tick_id desc limit 1) last on true
     where (i_queue_name is null or q.queue_name = i_queue_name)
       and (i_consumer_name is null or c.co_name = i_consumer_name)
     order by q.queue_name, c.co_name
$$;
comment on function pgque.get_consumer_info(text, text) is
    'Position, lag, last activity, open batch and pending events of consumers: of one queue, '
    'of one consumer on it, or of all (a name left out or NULL matches all).';

create or replace function pgque.get_batch_cursor(
    i_batch_id bigint, i_cursor_name text, i_quick_limit int4, i_extra_where text,
    out ev_id bigint, out ev_time timestamptz, out ev_txid bigint, out ev_retry int4,
    out ev_type text, out ev_data text,
    out ev_extra1 text, out ev_extra2 text, out ev_extra3 text, out ev_extra4 text)
returns setof record language plpgsql
-- Runs as the caller: i_extra_where is trusted SQL, hence admin only.
security invoker
set search_path = pgque, pg_catalog, pg_temp
-- JIT: see batch_reader.sql.
set jit = off as $$
declare
    v_sql text;
begin
    v_sql := pgque.batch_event_sql(i_batch_id);
    if i_extra_where is not null then
        v_sql := 'select * from (' || v_sql || ') b where ' || i_extra_where || ' order by 1';
    end if;
    execute pg_catalog.format('declare %I no scroll cursor for %s', i_cursor_name, v_sql);
    return query execute pg_catalog.format('fetch %s from %I', i_quick_limit, i_cursor_name);
end
$$;
comment on function pgque.get_batch_cursor(bigint, text, int4, text) is
    'Opens a cursor over the batch''s events (optionally filtered by trusted SQL) and returns the first i_quick_limit rows; FETCH the rest.';

create or replace function pgque.get_batch_cursor(
    i_batch_id bigint, i_cursor_name text, i_quick_limit int4,
    out ev_id bigint, out ev_time timestamptz, out ev_txid bigint, out ev_retry int4,
    out ev_type text, out ev_data text,
    out ev_extra1 text, out ev_extra2 text, out ev_extra3 text, out ev_extra4 text)
returns setof record
language sql strict
security invoker
set search_path = pgque, pg_catalog, pg_temp
as $$ select * from pgque.get_batch_cursor(i_batch_id, i_cursor_name, i_quick_limit, null) $$;
comment on function pgque.get_batch_cursor(bigint, text, int4) is
    'Opens a cursor over the batch''s events and returns the first i_quick_limit rows; FETCH the rest.';

-- file: functions/delayed.sql
-- Delayed delivery: send_at() parks a message in delayed_events until its
-- time; maint_deliver_delayed() (run by maint()) moves due rows into their
-- queues as new events.

-- Internal: the shared body of both send_at overloads.
create or replace function pgque._send_at(
    i_queue text, i_type text, i_payload text, i_deliver_at timestamptz)
returns bigint language plpgsql as $$
declare
    v_id bigint;
begin
    if i_deliver_at is null then
        perform pgque._refuse_null('send_at', 'deliver_at', i_queue);
    end if;
    if not pg_catalog.isfinite(i_deliver_at) then
        raise exception 'send_at: deliver_at must be a finite time, got % (queue %)',
            i_deliver_at, i_queue using detail = 'pgque:invalid_argument';
    end if;
    if i_deliver_at <= pg_catalog.now() then
        return pgque._insert_event(i_queue, null, pg_catalog.now(), null, null, i_type, i_payload,
                                   null, null, null, null);
    end if;
    perform pgque._queue_row(i_queue);
    insert into pgque.delayed_events (de_queue_name, de_deliver_at, de_type, de_data)
    values (i_queue, i_deliver_at, i_type, i_payload)
    returning de_id into v_id;
    return v_id;
end
$$;

create or replace function pgque.send_at(
    i_queue text, i_type text, i_payload jsonb, i_deliver_at timestamptz)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._send_at(i_queue, i_type, i_payload::text, i_deliver_at); end $$;
comment on function pgque.send_at(text, text, jsonb, timestamptz) is
    'Sends a JSON message for delivery at i_deliver_at. Returns the event id when that time has come, else the delayed_events id (de_id).';

create or replace function pgque.send_at(
    i_queue text, i_type text, i_payload text, i_deliver_at timestamptz)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._send_at(i_queue, i_type, i_payload, i_deliver_at); end $$;
comment on function pgque.send_at(text, text, text, timestamptz) is
    'Sends a verbatim text message for delivery at i_deliver_at. Returns the event id when that time has come, else the delayed_events id (de_id).';

create or replace function pgque.maint_deliver_delayed()
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
    v_moved integer;
    v_total integer := 0;
begin
    -- The txid first, then the current tables (see _insert_event).
    perform pg_catalog.pg_current_xact_id();
    for q in
        select qu.* from pgque.queue qu
         where not qu.queue_disable_insert
           and exists (select 1 from pgque.delayed_events d
                        where d.de_queue_name = qu.queue_name
                          and d.de_deliver_at <= current_timestamp)
         order by qu.queue_id
    loop
        -- Rows another mover holds are left to it.
        execute 'with due as (select de_id from pgque.delayed_events'
             || '  where de_queue_name = $1 and de_deliver_at <= current_timestamp'
             || '  order by de_deliver_at, de_id for update skip locked),'
             || ' moved as (delete from pgque.delayed_events d using due'
             || '  where d.de_id = due.de_id returning d.*)'
             || ' insert into ' || pgque._event_table_name(q, q.queue_cur_table)
             || ' (ev_id, ev_time, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)'
             || ' select pg_catalog.nextval($2), pg_catalog.now(), de_type, de_data,'
             || '  de_extra1, de_extra2, de_extra3, de_extra4'
             || ' from (select * from moved order by de_deliver_at, de_id) m'
          using q.queue_name, pgque._queue_relation(q, 'event_seq');
        get diagnostics v_moved = row_count;
        v_total := v_total + v_moved;
    end loop;
    return v_total;
end
$$;
comment on function pgque.maint_deliver_delayed() is
    'Moves every due delayed message into its queue as a new event (type and extras kept). Returns how many.';

create or replace function pgque.cancel_delayed(i_de_id bigint)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if i_de_id is null then
        raise exception 'cancel_delayed: de_id must not be NULL' using detail = 'pgque:invalid_argument';
    end if;
    delete from pgque.delayed_events where de_id = i_de_id;
    return case when found then 1 else 0 end;
end
$$;
comment on function pgque.cancel_delayed(bigint) is
    'Cancels a message send_at() is holding for later delivery (its de_id). Returns 1, or 0 when there is none: never sent, already delivered, or cancelled.';

-- file: functions/receive.sql
-- The modern API, consuming: subscribe, receive, ack, nack.
--
-- receive() opens the consumer's next batch (or returns the open one) and
-- returns its messages; ack() finishes the whole batch, messages beyond
-- receive()'s limit included; nack() puts one message of the open batch
-- back for a later retry, or into the dead letter queue once it has been
-- retried max_retries times.

create or replace function pgque.subscribe(queue text, consumer text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if queue = '' then
        raise exception 'queue name must not be empty' using detail = 'pgque:invalid_argument';
    end if;
    perform pgque._registration_queue(queue, true);
    perform pgque._refuse_reserved_name(consumer, null);
    return pgque._register_consumer_at(queue, consumer, null);
end
$$;
comment on function pgque.subscribe(text, text) is
    'Subscribes a consumer at the queue''s latest tick. Returns 1, or 0 when already subscribed.';

create or replace function pgque.unsubscribe(queue text, consumer text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque.unregister_consumer(queue, consumer); end $$;
comment on function pgque.unsubscribe(text, text) is
    'Removes a subscription with its pending retries. Returns 1, or 0 when not subscribed.';

-- Internal: the body of receive, receive_coop and receive_partitioned. Opens
-- the consumer's next batch (or takes its open one: the subconsumer's with
-- i_subconsumer, see the cooperative next_batch_custom) and returns up to
-- i_max of its messages (of slot i_slot of i_n only, with i_n), leaving out
-- events older than the queue's event_ttl, read through the batch readers
-- (batch_reader.sql). A batch with nothing to return is an empty window:
-- there is nothing to ack, so it is finished here and the next one looked
-- at, up to 100 per call.
create or replace function pgque._receive(
    i_queue text, i_consumer text, i_subconsumer text, i_dead_interval interval,
    i_max integer, i_slot integer, i_n integer)
returns setof pgque.message language plpgsql
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off as $$
declare
    v_batch_id bigint;
    a record;
    v_returned bigint;
    v_windows integer := 0;
begin
    loop
        if i_subconsumer is null then
            v_batch_id := (pgque._next_batch_custom(i_queue, i_consumer, null, null, null)).batch_id;
        else
            v_batch_id := (pgque.next_batch_custom(i_queue, i_consumer, i_subconsumer,
                                                   null, null, null, i_dead_interval)).batch_id;
        end if;
        if v_batch_id is null then
            return;
        end if;
        a := pgque._batch_read_args(v_batch_id);
        if a.merge then
            return query
            select r.ev_id, v_batch_id, r.ev_type, r.ev_data, r.ev_retry, r.ev_time,
                   r.ev_extra1, r.ev_extra2, r.ev_extra3, r.ev_extra4
              from pgque._read_batch(a.queue_id, a.tables, a.lower_txid, a.upper_txid, a.s1,
                                     a.s2, a.txid_list, a.owner, a.ttl, i_slot, i_n, i_max) r
             order by r.ev_id limit i_max;
        else
            return query
            select r.ev_id, v_batch_id, r.ev_type, r.ev_data, r.ev_retry, r.ev_time,
                   r.ev_extra1, r.ev_extra2, r.ev_extra3, r.ev_extra4
              from pgque._read_batch(a.queue_id, a.tables, a.lower_txid, a.upper_txid, a.s1,
                                     a.s2, a.txid_list, a.owner, a.ttl, i_slot, i_n, i_max) r;
        end if;
        get diagnostics v_returned = row_count;
        if v_returned > 0 then
            return;
        end if;
        perform pgque._finish_batch(v_batch_id);
        v_windows := v_windows + 1;
        exit when v_windows >= 100;
    end loop;
end
$$;

create or replace function pgque.receive(
    i_queue text, i_consumer text, i_max_return integer default 100)
returns setof pgque.message language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if i_max_return is null or i_max_return < 1 then
        raise exception 'pgque.receive: max_return must be >= 1, got %',
            coalesce(i_max_return::text, 'NULL') using detail = 'pgque:invalid_argument';
    end if;
    if pg_catalog.strpos(i_consumer, '#') > 0 then
        perform pgque._refuse_reserved_name(i_consumer, 'use pgque.receive_partitioned()');
    end if;
    -- A missing queue is reported as such, not as a missing subscription.
    if i_queue = '' then
        raise exception 'queue name must not be empty' using detail = 'pgque:invalid_argument';
    end if;
    perform 1 from pgque.queue where queue_name = i_queue;
    if not found then
        raise exception 'queue not found: %', i_queue using detail = 'pgque:queue_not_found';
    end if;
    return query select * from pgque._receive(i_queue, i_consumer, null, null, i_max_return,
                                              null, null);
end
$$;
comment on function pgque.receive(text, text, integer) is
    'Returns up to i_max_return messages of the consumer''s open or next batch, by msg_id; the same batch again until ack(). Empty batches are finished internally.';

create or replace function pgque.ack(i_batch_id bigint)
returns integer language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off as $$
begin
    -- The usual batch in one statement (finish_batch is this function):
    -- not a partition slot's, not a cooperative main's.
    update pgque.subscription s
       set sub_active = pg_catalog.now(),
           sub_last_tick = case when s.sub_role = 'coop_member' then null else s.sub_next_tick end,
           sub_next_tick = null, sub_batch = null
      from pgque.consumer c
     where s.sub_batch = i_batch_id and s.sub_role <> 'coop_main'
       and c.co_id = s.sub_consumer and not pgque._is_slot_consumer(c.co_name);
    if found then
        return 1;
    end if;
    -- A slot's batch is refused; _finish_batch says what else it is.
    perform pgque._refuse_slot_batch(i_batch_id, 'use pgque.ack_partitioned()');
    return pgque._finish_batch(i_batch_id);
end
$$;
comment on function pgque.ack(bigint) is
    'Finishes the whole batch (every message in it, returned or not). Returns 1, or 0 with a WARNING when it is not open.';

-- Internal: the public functions taking a batch id (ack, nack, finish_batch,
-- event_retry, get_batch_events ...) leave a partition slot's batch to the
-- slot functions, which check the caller holds the slot's lease. Returns
-- whether batch i_batch_id is open (for the callers that check it).
create or replace function pgque._refuse_slot_batch(i_batch_id bigint, i_hint text)
returns boolean language plpgsql as $$
declare
    v_name text;
begin
    select c.co_name into v_name
      from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
     where s.sub_batch = i_batch_id;
    if v_name is not null and pgque._is_slot_consumer(v_name) then
        raise exception 'batch % belongs to partition slot consumer %; %', i_batch_id, v_name, i_hint
            using detail = 'pgque:partition_slot';
    end if;
    return v_name is not null;
end
$$;

-- Internal: dead-letters one event of an open batch for the batch's consumer.
-- Idempotent per (queue, consumer, event).
create or replace function pgque._dead_letter(
    i_batch_id bigint, i_event pgque.event_template, i_reason text)
returns integer language plpgsql as $$
declare
    v_sub record;
begin
    -- A cooperative member's dead letters belong to its group's main consumer.
    select m.sub_queue, m.sub_consumer into v_sub
      from pgque.subscription s
      join pgque.subscription m on m.sub_queue = s.sub_queue and m.sub_id = s.sub_id
                               and m.sub_role = case when s.sub_role = 'coop_member'
                                                     then 'coop_main' else s.sub_role end
     where s.sub_batch = i_batch_id;
    if not found then
        raise exception 'batch not found: %', i_batch_id using detail = 'pgque:batch_not_found';
    end if;
    insert into pgque.dead_letter
        (dl_queue_id, dl_consumer_id, dl_reason, ev_id, ev_time, ev_txid, ev_retry,
         ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
    values (v_sub.sub_queue, v_sub.sub_consumer, i_reason, i_event.ev_id, i_event.ev_time,
            i_event.ev_txid, i_event.ev_retry, i_event.ev_type, i_event.ev_data,
            i_event.ev_extra1, i_event.ev_extra2, i_event.ev_extra3, i_event.ev_extra4)
    on conflict (dl_queue_id, dl_consumer_id, ev_id) do nothing;
    if found then
        perform pgque.log_event('warning', 'dlq', 'dead-lettered', pg_catalog.jsonb_build_object(
            'batch', i_batch_id, 'ev_id', i_event.ev_id, 'reason', i_reason));
    end if;
    return 1;
end
$$;

-- Internal: the nack policy for one event of an open batch: retry it, or
-- dead-letter it once it was retried max_retries times.
create or replace function pgque._nack(
    i_batch_id bigint, i_msg_id bigint, i_retry_after interval, i_reason text)
returns integer language plpgsql as $$
declare
    v_event pgque.event_template;
    v_max_retries integer;
    v_seconds bigint;
begin
    select coalesce(q.queue_max_retries, 5) into v_max_retries
      from pgque.subscription s join pgque.queue q on q.queue_id = s.sub_queue
     where s.sub_batch = i_batch_id;
    if not found then
        raise exception 'batch not found: %', i_batch_id using detail = 'pgque:batch_not_found';
    end if;
    -- The bound keeps the retry time far inside timestamptz's range.
    if i_retry_after is null or i_retry_after < interval '0'
       or i_retry_after > interval '100 years' then
        raise exception 'nack: retry_after must be a non-negative interval of at most 100 years, got % (batch %)',
            coalesce(i_retry_after::text, 'NULL'), i_batch_id
            using detail = 'pgque:invalid_argument';
    end if;
    -- Re-read the event from the batch: only its id is taken from the caller.
    select * into v_event from pgque._batch_events_by_id(i_batch_id, array[i_msg_id]);
    if not found or i_msg_id is null then
        raise exception 'msg_id % not found in batch %', coalesce(i_msg_id::text, '<NULL>'), i_batch_id
            using detail = 'pgque:event_not_found';
    end if;
    if coalesce(v_event.ev_retry, 0) >= v_max_retries then
        return pgque._dead_letter(i_batch_id, v_event, coalesce(i_reason, 'max retries exceeded'));
    end if;
    v_seconds := pg_catalog.ceil(extract(epoch from i_retry_after))::bigint;
    perform pgque._retry_batch_events(i_batch_id, array[i_msg_id],
                                      current_timestamp + v_seconds * interval '1 second');
    return 1;
end
$$;

create or replace function pgque.nack(
    i_batch_id bigint, i_msg pgque.message,
    i_retry_after interval default '60 seconds', i_reason text default null)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque.nack(i_batch_id, i_msg.msg_id, i_retry_after, i_reason); end $$;
comment on function pgque.nack(bigint, pgque.message, interval, text) is
    'Retries a message of the open batch after i_retry_after, or dead-letters it once retried max_retries times. Only msg_id is read from i_msg. Returns 1; the batch stays open for ack().';

create or replace function pgque.nack(
    i_batch_id bigint, i_msg_id bigint,
    i_retry_after interval default '60 seconds', i_reason text default null)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._refuse_slot_batch(i_batch_id, 'retry slot batches via pgque.nack_partitioned()');
    return pgque._nack(i_batch_id, i_msg_id, i_retry_after, i_reason);
end
$$;
comment on function pgque.nack(bigint, bigint, interval, text) is
    'nack() by message id, for clients that kept only ids.';

-- Internal: dead-letters message i_msg_id of open batch i_batch_id, re-read
-- from the batch (as nack, never taken from the caller).
create or replace function pgque._dead_letter_msg(i_batch_id bigint, i_msg_id bigint, i_reason text)
returns integer language plpgsql as $$
declare
    v_event pgque.event_template;
begin
    select * into v_event from pgque._batch_events_by_id(i_batch_id, array[i_msg_id]);
    if not found or i_msg_id is null then
        raise exception 'msg_id % not found in batch %', coalesce(i_msg_id::text, '<NULL>'), i_batch_id
            using detail = 'pgque:event_not_found';
    end if;
    return pgque._dead_letter(i_batch_id, v_event, coalesce(i_reason, 'dead-lettered by consumer'));
end
$$;

create or replace function pgque.dead_letter_event(i_batch_id bigint, i_msg_id bigint, i_reason text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if not pgque._refuse_slot_batch(i_batch_id, 'dead-letter slot batches via pgque.dead_letter_partitioned()') then
        raise exception 'batch not found: %', i_batch_id using detail = 'pgque:batch_not_found';
    end if;
    return pgque._dead_letter_msg(i_batch_id, i_msg_id, i_reason);
end
$$;
comment on function pgque.dead_letter_event(bigint, bigint, text) is
    'Moves a message of the open batch straight to the dead letter queue (the reader''s form of event_dead; the event is re-read from the batch). Returns 1; the batch stays open for ack().';

-- file: functions/dlq.sql
-- The dead letter queue: inspecting, replaying and purging dead letters.

create or replace function pgque.event_dead(
    i_batch_id bigint, i_event_id bigint, i_reason text,
    i_ev_time timestamptz, i_ev_txid xid8, i_ev_retry int4,
    i_ev_type text, i_ev_data text,
    i_ev_extra1 text default null, i_ev_extra2 text default null,
    i_ev_extra3 text default null, i_ev_extra4 text default null)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._refuse_slot_batch(i_batch_id, 'use pgque.dead_letter_partitioned()');
    return pgque._dead_letter(
        i_batch_id,
        row(i_event_id, i_ev_time, i_ev_txid, null, i_ev_retry, i_ev_type, i_ev_data,
            i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4)::pgque.event_template,
        i_reason);
end
$$;
comment on function pgque.event_dead(bigint, bigint, text, timestamptz, xid8, int4, text, text, text, text, text, text) is
    'Admin: records the given event as a dead letter of the open batch''s queue and consumer (idempotent). Returns 1.';

create or replace function pgque.dlq_inspect(i_queue_name text, i_limit_count integer default 100)
returns setof pgque.dead_letter language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if i_queue_name is null then
        raise exception 'dlq_inspect: queue name must not be null'
            using detail = 'pgque:invalid_argument';
    end if;
    if i_limit_count < 0 then
        raise exception 'dlq_inspect: limit_count must be >= 0 (NULL: no limit), got % (queue %)',
            i_limit_count, i_queue_name using detail = 'pgque:invalid_argument';
    end if;
    return query
        select d.* from pgque.dead_letter d
          join pgque.queue q on q.queue_id = d.dl_queue_id
         where q.queue_name = i_queue_name
         order by d.dl_time desc, d.dl_id desc
         limit i_limit_count;
end
$$;
comment on function pgque.dlq_inspect(text, integer) is
    'The queue''s newest dead letters first, at most i_limit_count (NULL: all); no rows for an unknown queue.';

-- Internal: replays one locked dead letter as a new event and deletes it.
create or replace function pgque._dlq_replay_row(i_dl pgque.dead_letter)
returns bigint language plpgsql as $$
declare
    v_queue_name text;
    v_ev_id bigint;
begin
    select queue_name into v_queue_name from pgque.queue where queue_id = i_dl.dl_queue_id;
    v_ev_id := pgque._insert_event(v_queue_name, null, pg_catalog.now(), null, null,
                                   i_dl.ev_type, i_dl.ev_data,
                                   i_dl.ev_extra1, i_dl.ev_extra2, i_dl.ev_extra3, i_dl.ev_extra4);
    delete from pgque.dead_letter where dl_id = i_dl.dl_id;
    return v_ev_id;
end
$$;

create or replace function pgque.dlq_replay(i_dead_letter_id bigint)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_dl pgque.dead_letter;
begin
    -- The row lock makes two concurrent replays of one entry produce one event:
    -- the second waits, then finds the row gone.
    select * into v_dl from pgque.dead_letter where dl_id = i_dead_letter_id for update;
    if not found then
        raise exception 'dead letter entry not found: %', i_dead_letter_id
            using detail = 'pgque:dead_letter_not_found';
    end if;
    return pgque._dlq_replay_row(v_dl);
end
$$;
comment on function pgque.dlq_replay(bigint) is
    'Sends a dead letter''s type, payload and extras again as a new event (new id, retry count reset) and deletes the entry. Returns the new event id.';

create or replace function pgque.dlq_replay_all(
    i_queue_name text, out replayed bigint, out failed bigint, out first_error text)
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_dl pgque.dead_letter;
begin
    if i_queue_name is null then
        raise exception 'dlq_replay_all: queue name must not be null'
            using detail = 'pgque:invalid_argument';
    end if;
    replayed := 0;
    failed := 0;
    -- Entries a concurrent replay holds are skipped, not waited for.
    for v_dl in
        select d.* from pgque.dead_letter d
          join pgque.queue q on q.queue_id = d.dl_queue_id
         where q.queue_name = i_queue_name
         order by d.dl_id
           for update of d skip locked
    loop
        begin
            perform pgque._dlq_replay_row(v_dl);
            replayed := replayed + 1;
        exception when others then
            failed := failed + 1;
            raise warning 'dlq_replay_all: failed to replay dl_id=%, error: %', v_dl.dl_id, sqlerrm;
            first_error := coalesce(first_error, 'dl_id=' || v_dl.dl_id || ': ' || sqlerrm);
        end;
    end loop;
end
$$;
comment on function pgque.dlq_replay_all(text) is
    'Replays every dead letter of the queue; failures are skipped with a WARNING. Returns (replayed, failed, first_error).';

create or replace function pgque.dlq_purge(i_queue_name text, i_older_than interval default '30 days')
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_count integer;
    v_cutoff timestamptz;
begin
    if i_queue_name is null then
        raise exception 'dlq_purge: queue name must not be null'
            using detail = 'pgque:invalid_argument';
    end if;
    if i_older_than is null or i_older_than < interval '0' then
        raise exception 'dlq_purge: older_than must be a non-negative interval, got % (queue %)',
            coalesce(i_older_than::text, 'NULL'), i_queue_name
            using detail = 'pgque:invalid_argument';
    end if;
    -- An age beyond the calendar (timestamptz starts in 4713 BC) purges nothing.
    v_cutoff := case when i_older_than >= interval '6000 years' then '-infinity'::timestamptz
                     else pg_catalog.now() - i_older_than end;
    delete from pgque.dead_letter d
     using pgque.queue q
     where q.queue_id = d.dl_queue_id and q.queue_name = i_queue_name
       and d.dl_time < v_cutoff;
    get diagnostics v_count = row_count;
    return v_count;
end
$$;
comment on function pgque.dlq_purge(text, interval) is
    'Admin: deletes the queue''s dead letters older than i_older_than. Returns how many.';

-- file: functions/browse.sql
-- Browsing: a queue's recent events and a single dead letter, for the CLI and
-- the web console. Every read here is bounded, whatever the queue's size.

create or replace function pgque.recent_events(
    i_queue_name text, i_limit integer default 50, i_type text default null)
returns table (ev_id bigint, ev_time timestamptz, ev_txid bigint, ev_retry integer,
               ev_type text, ev_data text, ev_extra1 text, ev_extra2 text,
               ev_extra3 text, ev_extra4 text)
language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    -- With a type filter, each event table is read back at most this far.
    c_scan_cap constant integer := 10000;
    q pgque.queue%rowtype;
    v_branch text;
    v_branches text[] := '{}';
    i integer;
begin
    if i_queue_name is null then
        raise exception 'recent_events: queue name must not be null'
            using detail = 'pgque:invalid_argument';
    end if;
    if i_limit is null or i_limit < 1 or i_limit > 1000 then
        raise exception 'recent_events: limit must be between 1 and 1000, got % (queue %)',
            coalesce(i_limit::text, 'NULL'), i_queue_name
            using detail = 'pgque:invalid_argument';
    end if;
    q := pgque._queue_row(i_queue_name);
    -- Each event table is indexed on ev_txid only: read each one backwards
    -- along that index with a limit (ordering by ev_id too would sort a
    -- whole transaction's events), then merge the few rows found.
    for i in 0 .. q.queue_ntables - 1 loop
        v_branch := pg_catalog.format(
            'select ev_id, ev_time, ev_txid, ev_retry, ev_type, ev_data,'
            ' ev_extra1, ev_extra2, ev_extra3, ev_extra4 from %s'
            ' order by ev_txid desc limit $3',
            pgque._queue_relation(q, i::text));
        if i_type is not null then
            v_branch := 'select * from (' || v_branch || ') s where ev_type = $1'
                        ' order by ev_txid desc, ev_id desc limit $2';
        end if;
        v_branches := v_branches || ('(' || v_branch || ')');
    end loop;
    return query execute
        'select e.ev_id, e.ev_time, e.ev_txid::text::bigint, e.ev_retry, e.ev_type, e.ev_data,'
        ' e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4 from ('
        || pg_catalog.array_to_string(v_branches, ' union all ')
        || ') e order by e.ev_txid desc, e.ev_id desc limit $2'
        using i_type, i_limit, case when i_type is null then i_limit else c_scan_cap end;
end
$$;
comment on function pgque.recent_events(text, integer, text) is
    'The queue''s newest events first (by transaction, then id), at most i_limit (1 to 1000); with i_type, only that type among the newest 10000 events of each event table.';

create or replace function pgque.dlq_get(i_dl_id bigint)
returns setof pgque.dead_letter language sql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
    select d.* from pgque.dead_letter d where d.dl_id = i_dl_id
$$;
comment on function pgque.dlq_get(bigint) is
    'One dead letter by its id (no row when there is none).';

-- file: functions/coop.sql
-- Cooperative consumers: several workers (subconsumers) share one consumer.
--
-- The group's main subscription (sub_role 'coop_main', the consumer's own
-- name) holds the group's position. Each member (sub_role 'coop_member',
-- consumer name '<consumer>.<subconsumer>') holds at most one open batch;
-- handing a member a batch moves the main position past it, so every batch
-- goes to exactly one member. Members share the main row's sub_id, so a
-- retried event belongs to the group and comes back in whichever batch
-- carries it, to whichever member takes that batch. Handing out batches
-- locks the main row: take batches in short transactions (autocommit), then
-- process and ack.
--
-- The cooperative forms of next_batch and next_batch_custom live in
-- batch.sql, with the other overloads of those names.

-- Internal: checks cooperative names; returns the member's consumer name.
create or replace function pgque._coop_member_name(
    i_queue text, i_consumer text, i_subconsumer text)
returns text language plpgsql immutable as $$
begin
    if coalesce(i_queue, '') = '' then
        raise exception 'queue name must not be empty' using detail = 'pgque:invalid_argument';
    end if;
    if coalesce(i_consumer, '') = '' then
        raise exception 'consumer name must not be empty' using detail = 'pgque:invalid_argument';
    end if;
    if coalesce(i_subconsumer, '') = '' then
        raise exception 'subconsumer name must not be empty' using detail = 'pgque:invalid_argument';
    end if;
    if pg_catalog.strpos(i_consumer, '.') > 0 then
        raise exception 'cooperative consumer name must not contain dot: %', i_consumer
            using detail = 'pgque:invalid_argument';
    end if;
    if pg_catalog.strpos(i_subconsumer, '.') > 0 then
        raise exception 'cooperative subconsumer name must not contain dot: %', i_subconsumer
            using detail = 'pgque:invalid_argument';
    end if;
    return i_consumer || '.' || i_subconsumer;
end
$$;

create or replace function pgque.register_subconsumer(
    i_queue text, i_consumer text, i_subconsumer text, i_convert_normal boolean default false)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_member_name text := pgque._coop_member_name(i_queue, i_consumer, i_subconsumer);
    v_main record;
    v_member record;
    v_co_id integer;
    v_created integer := 0;
begin
    perform pgque._registration_queue(i_queue, true);
    -- A group of a reserved name could take a partition slot's subscription over.
    perform pgque._refuse_reserved_name(i_consumer, null);
    perform pgque._refuse_reserved_name(i_subconsumer, null);
    select s.sub_queue, s.sub_consumer, s.sub_id, s.sub_role, s.sub_batch into v_main
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
     where q.queue_name = i_queue and c.co_name = i_consumer
       for no key update of s;
    if not found then
        perform pgque.register_consumer_at(i_queue, i_consumer, null);
        update pgque.subscription s set sub_role = 'coop_main'
          from pgque.queue q, pgque.consumer c
         where q.queue_id = s.sub_queue and c.co_id = s.sub_consumer
           and q.queue_name = i_queue and c.co_name = i_consumer
        returning s.sub_queue, s.sub_consumer, s.sub_id, s.sub_role, s.sub_batch into v_main;
        v_created := 1;
    elsif v_main.sub_role = 'normal' then
        if not coalesce(i_convert_normal, false) then
            raise exception 'consumer % on queue % is already a normal consumer; explicit conversion is required',
                i_consumer, i_queue using detail = 'pgque:cooperative_consumer';
        end if;
        if v_main.sub_batch is not null then
            raise exception 'cannot convert active normal consumer % on queue % to cooperative main',
                i_consumer, i_queue using detail = 'pgque:cooperative_consumer';
        end if;
        update pgque.subscription set sub_role = 'coop_main'
         where sub_queue = v_main.sub_queue and sub_consumer = v_main.sub_consumer;
        v_created := 1;
    elsif v_main.sub_role <> 'coop_main' then
        raise exception 'consumer % on queue % is a cooperative subconsumer, not a group',
            i_consumer, i_queue using detail = 'pgque:cooperative_consumer';
    end if;

    select s.sub_role into v_member
      from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
     where s.sub_queue = v_main.sub_queue and c.co_name = v_member_name;
    if found then
        if v_member.sub_role <> 'coop_member' then
            raise exception 'consumer % on queue % is already a normal consumer; a subconsumer needs its own name',
                v_member_name, i_queue using detail = 'pgque:cooperative_consumer';
        end if;
        return v_created;
    end if;
    perform pgque._check_name('consumer', v_member_name);
    insert into pgque.consumer (co_name) values (v_member_name) on conflict (co_name) do nothing;
    select co_id into v_co_id from pgque.consumer where co_name = v_member_name for update;
    insert into pgque.subscription (sub_id, sub_queue, sub_consumer, sub_last_tick, sub_role)
    values (v_main.sub_id, v_main.sub_queue, v_co_id, null, 'coop_member');
    perform pgque.log_event('info', 'consumer', 'subconsumer registered', pg_catalog.jsonb_build_object(
        'queue', i_queue, 'consumer', i_consumer, 'subconsumer', i_subconsumer));
    return 1;
end
$$;
comment on function pgque.register_subconsumer(text, text, text, boolean) is
    'Adds a subconsumer to a cooperative consumer, creating the group if needed (converting a normal consumer only with i_convert_normal). Returns 1 when something was created, else 0.';

create or replace function pgque.subscribe_subconsumer(
    i_queue text, i_consumer text, i_subconsumer text, i_convert_normal boolean default false)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque.register_subconsumer(i_queue, i_consumer, i_subconsumer, i_convert_normal); end $$;
comment on function pgque.subscribe_subconsumer(text, text, text, boolean) is
    'Alias of register_subconsumer.';

-- Internal: the nack policy for every event of an open batch at once:
-- dead-letters those retried max_retries times, queues the others for a
-- retry after i_retry_after. Returns the number dead-lettered.
create or replace function pgque._nack_batch(i_batch_id bigint, i_retry_after interval, i_reason text)
returns integer language plpgsql as $$
declare
    v_max_retries integer;
    v_event pgque.event_template;
    v_retry bigint[] := '{}';
    v_count integer := 0;
begin
    select coalesce(q.queue_max_retries, 5) into v_max_retries
      from pgque.subscription s join pgque.queue q on q.queue_id = s.sub_queue
     where s.sub_batch = i_batch_id;
    for v_event in select * from pgque._batch_events_by_id(i_batch_id, null) loop
        if coalesce(v_event.ev_retry, 0) >= v_max_retries then
            perform pgque._dead_letter(i_batch_id, v_event, i_reason);
            v_count := v_count + 1;
        else
            v_retry := v_retry || v_event.ev_id;
        end if;
    end loop;
    perform pgque._retry_batch_events(i_batch_id, v_retry, current_timestamp + i_retry_after);
    return v_count;
end
$$;

create or replace function pgque.unregister_subconsumer(
    i_queue text, i_consumer text, i_subconsumer text, i_batch_handling integer default 0)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_member_name text := pgque._coop_member_name(i_queue, i_consumer, i_subconsumer);
    v_member record;
begin
    if i_batch_handling is null or i_batch_handling not in (0, 1) then
        raise exception 'unsupported batch_handling value: %', coalesce(i_batch_handling::text, 'NULL')
            using detail = 'pgque:invalid_argument';
    end if;
    select s.sub_queue, s.sub_consumer, s.sub_id, s.sub_batch into v_member
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
     where q.queue_name = i_queue and c.co_name = v_member_name and s.sub_role = 'coop_member'
       for update of s;
    if not found then
        return 0;
    end if;
    if v_member.sub_batch is not null then
        if i_batch_handling = 0 then
            raise exception 'cannot unregister active cooperative subconsumer %/%/% without batch_handling = 1',
                i_queue, i_consumer, i_subconsumer using detail = 'pgque:cooperative_consumer';
        end if;
        -- Its batch goes back through the nack policy, then is closed.
        perform pgque._nack_batch(v_member.sub_batch, interval '60 seconds',
                                  'subconsumer unregistered');
    end if;
    delete from pgque.subscription
     where sub_queue = v_member.sub_queue and sub_consumer = v_member.sub_consumer;
    delete from pgque.consumer c
     where c.co_id = v_member.sub_consumer
       and not exists (select 1 from pgque.subscription s where s.sub_consumer = c.co_id);
    -- The last member gone: the group is a normal consumer again.
    update pgque.subscription m set sub_role = 'normal'
     where m.sub_queue = v_member.sub_queue and m.sub_id = v_member.sub_id
       and m.sub_role = 'coop_main'
       and not exists (select 1 from pgque.subscription s
                        where s.sub_queue = m.sub_queue and s.sub_id = m.sub_id
                          and s.sub_role = 'coop_member');
    perform pgque.log_event('info', 'consumer', 'subconsumer unregistered', pg_catalog.jsonb_build_object(
        'queue', i_queue, 'consumer', i_consumer, 'subconsumer', i_subconsumer));
    return 1;
end
$$;
comment on function pgque.unregister_subconsumer(text, text, text, integer) is
    'Removes a subconsumer; with an open batch only when i_batch_handling = 1, which first retries or dead-letters its events. Returns 1, or 0 when not registered.';

create or replace function pgque.unsubscribe_subconsumer(
    i_queue text, i_consumer text, i_subconsumer text, i_batch_handling integer default 0)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque.unregister_subconsumer(i_queue, i_consumer, i_subconsumer, i_batch_handling); end $$;
comment on function pgque.unsubscribe_subconsumer(text, text, text, integer) is
    'Alias of unregister_subconsumer.';

create or replace function pgque.touch_subconsumer(i_queue text, i_consumer text, i_subconsumer text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    -- The names are checked first, even for a queue that does not exist.
    v_member_name text := pgque._coop_member_name(i_queue, i_consumer, i_subconsumer);
    v_count integer;
begin
    -- The wall clock: a touch moves sub_active even in the transaction that
    -- registered the member, and repeated touches keep increasing.
    update pgque.subscription s set sub_active = pg_catalog.clock_timestamp()
      from pgque.queue q, pgque.consumer c
     where q.queue_id = s.sub_queue and c.co_id = s.sub_consumer
       and q.queue_name = i_queue and c.co_name = v_member_name
       and s.sub_role = 'coop_member';
    get diagnostics v_count = row_count;
    return v_count;
end
$$;
comment on function pgque.touch_subconsumer(text, text, text) is
    'Heartbeat of a subconsumer (its last-seen time), so others do not take over its batch. Returns rows touched.';

create or replace function pgque.receive_coop(
    i_queue text, i_consumer text, i_subconsumer text,
    i_max_return integer default 100, i_dead_interval interval default null)
returns setof pgque.message language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if i_max_return is null or i_max_return < 1 then
        raise exception 'pgque.receive_coop: max_return must be >= 1, got %',
            coalesce(i_max_return::text, 'NULL') using detail = 'pgque:invalid_argument';
    end if;
    -- Registering locks the group's row: only for a member not registered yet.
    perform 1
       from pgque.subscription s
       join pgque.queue q on q.queue_id = s.sub_queue
       join pgque.consumer c on c.co_id = s.sub_consumer
      where q.queue_name = i_queue and s.sub_role = 'coop_member'
        and c.co_name = pgque._coop_member_name(i_queue, i_consumer, i_subconsumer);
    if not found then
        perform pgque.register_subconsumer(i_queue, i_consumer, i_subconsumer, false);
    end if;
    return query select * from pgque._receive(i_queue, i_consumer, i_subconsumer, i_dead_interval,
                                              i_max_return, null, null);
end
$$;
comment on function pgque.receive_coop(text, text, text, integer, interval) is
    'Cooperative receive: registers the subconsumer if needed and returns up to i_max_return messages of its batch (taking over a batch idle longer than i_dead_interval). Empty batches are finished internally.';

-- file: functions/idem.sql
-- Idempotent send: at most one event per (queue, idem_key) while the key lives.
--
-- The key is claimed through the primary key of pgque.idem with an upsert:
-- a concurrent send of the same key waits for the first transaction, then
-- either sees its event (deduped) or, if it rolled back, claims the key
-- itself. No advisory lock; the claim lives and dies with its transaction.
--
-- Any string is a key. pgque.idem keeps only its digest, chr(1) || 'sha256:'
-- || its SHA-256 in hex (PostgreSQL's own sha256(), no extension), and the
-- event carries no key (ev_extra2 is NULL): keys can carry business
-- identifiers, every reader reads every event, and deduplication needs the
-- digest alone. Earlier versions kept keys of up to 512 bytes as given, and
-- in ev_extra2; upgrade_schema() replaces the stored ones by their digests,
-- so their claims keep matching (the events they sent keep their ev_extra2
-- until rotation drops them).

-- Internal: how a key is stored in pgque.idem (see above).
create or replace function pgque._idem_stored_key(i_key text)
returns text language sql immutable parallel safe as $$
    select pg_catalog.chr(1) || 'sha256:' || pg_catalog.encode(
               pg_catalog.sha256(pg_catalog.convert_to(i_key, 'UTF8')), 'hex')
$$;

create or replace function pgque.send_idem(
    i_queue text, i_type text, i_payload text, i_idem_key text,
    i_ttl interval default '1 hour', i_partition_key text default null)
returns table (event_id bigint, deduped boolean) language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q record;
    v_id bigint;
    v_claimed bigint;
    v_key text;
begin
    if i_idem_key is null then
        raise exception 'idem_key must not be null' using detail = 'pgque:invalid_argument';
    end if;
    -- The bound keeps expires_at far inside timestamptz's range.
    if i_ttl is null or i_ttl <= interval '0' or i_ttl > interval '100 years' then
        raise exception 'ttl must be a positive interval of at most 100 years, got % (queue %)',
            coalesce(i_ttl::text, 'NULL'), coalesce(i_queue, '<NULL>')
            using detail = 'pgque:invalid_argument';
    end if;
    select queue_id, queue_extra_maint into q
      from pgque.queue where queue_name = i_queue;
    if not found then
        raise exception 'queue not found: %', i_queue using detail = 'pgque:queue_not_found';
    end if;
    v_key := pgque._idem_stored_key(i_idem_key);
    -- First use: maint() reaps this queue's expired keys from now on.
    if not 'pgque.maint_idem' = any (coalesce(q.queue_extra_maint, '{}')) then
        update pgque.queue
           set queue_extra_maint = pg_catalog.array_append(
                   coalesce(queue_extra_maint, '{}'), 'pgque.maint_idem')
         where queue_id = q.queue_id
           and not 'pgque.maint_idem' = any (coalesce(queue_extra_maint, '{}'));
    end if;

    v_id := pg_catalog.nextval(pgque._queue_sequence(q.queue_id, 'id'));
    insert into pgque.idem as i (queue_id, idem_key, event_id, expires_at)
    values (q.queue_id, v_key, v_id, pg_catalog.now() + i_ttl)
    on conflict (queue_id, idem_key) do update
       set event_id = excluded.event_id, expires_at = excluded.expires_at
     where i.expires_at <= pg_catalog.now()
    returning i.event_id into v_claimed;

    if v_claimed is null then
        -- A live claim exists: the send it made is the answer.
        select i.event_id into event_id from pgque.idem i
         where i.queue_id = q.queue_id and i.idem_key = v_key;
        deduped := true;
        return next;
        return;
    end if;
    event_id := pgque._insert_event(i_queue, v_id, pg_catalog.now(), null, null, i_type, i_payload,
                                    i_partition_key, null, null, null);
    deduped := false;
    return next;
end
$$;
comment on function pgque.send_idem(text, text, text, text, interval, text) is
    'Sends a verbatim text message once per idempotency key within i_ttl (only the key''s digest is kept; partition key in ev_extra1). Returns (event_id, deduped).';

create or replace function pgque.send_idem(
    i_queue text, i_type text, i_payload jsonb, i_idem_key text,
    i_ttl interval default '1 hour', i_partition_key text default null)
returns table (event_id bigint, deduped boolean) language sql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$ select * from pgque.send_idem(i_queue, i_type, i_payload::text, i_idem_key, i_ttl, i_partition_key) $$;
comment on function pgque.send_idem(text, text, jsonb, text, interval, text) is
    'Sends a JSON message once per idempotency key within i_ttl. Returns (event_id, deduped).';

create or replace function pgque.maint_idem(i_queue_name text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_deleted integer;
begin
    -- At most 10 000 keys a call; 1 means "call again".
    delete from pgque.idem
     where ctid = any (array(
         select i.ctid from pgque.idem i join pgque.queue q on q.queue_id = i.queue_id
          where (i_queue_name is null or q.queue_name = i_queue_name)
            and i.expires_at <= pg_catalog.now()
          limit 10000
            for update of i skip locked));
    get diagnostics v_deleted = row_count;
    return case when v_deleted >= 10000 then 1 else 0 end;
end
$$;
comment on function pgque.maint_idem(text) is
    'Deletes up to 10 000 expired idempotency keys of the queue (NULL: all queues). Returns 1 while more may remain, else 0.';

create or replace function pgque.maint_idem()
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque.maint_idem(null); end $$;
comment on function pgque.maint_idem() is
    'maint_idem for every queue.';

-- file: functions/partition.sql
-- Partition keys: per-key ordered processing by N fixed slots.
--
-- A message's partition key is stored in ev_extra1. Slot k of consumer C is
-- an ordinary subscription named 'C#k/N' that reads the whole stream and
-- keeps the messages whose key hashes to k (NULL keys go to slot 0), so one
-- key's messages stay in order within one slot. A worker holds a slot by a
-- lease kept in pgque.partition_slot (owner, expiry, fencing epoch), so it
-- works through transaction-mode poolers; every slot call renews the lease
-- and refuses anyone else. Names with '#' are pgque's: every public function
-- that registers, opens, closes or moves a consumer, or a batch's events,
-- refuses a slot's subscription (_refuse_reserved_name, _refuse_slot_batch),
-- and the slot functions reach it through the internal ones.
--
-- send() with a partition key is in send.sql, with the other overloads.

-- Internal: the slot of a partition key among i_n slots.
create or replace function pgque._partition_slot(i_key text, i_n integer)
returns integer language sql immutable parallel safe as $$
    select case when i_key is null then 0
                else ((pg_catalog.hashtextextended(i_key, 0) % i_n + i_n) % i_n)::integer end
$$;

-- Internal: the subscription name of slot i_slot of i_n.
create or replace function pgque._slot_consumer(i_consumer text, i_slot integer, i_n integer)
returns text
language sql immutable
as $$ select i_consumer || '#' || i_slot || '/' || i_n $$;

-- Internal: is this consumer name a partition slot's subscription?
create or replace function pgque._is_slot_consumer(i_name text)
returns boolean
language sql immutable
as $$ select pg_catalog.strpos(i_name, '#') > 0 and i_name ~ '#[0-9]+/[0-9]+$' $$;

-- Internal: the queue id after checking the consumer is partitioned with i_n
-- slots (NULL i_n: any) and i_slot is one of them.
create or replace function pgque._partitioned_queue(
    i_queue text, i_consumer text, i_slot integer, i_n integer, i_check_n boolean)
returns integer language plpgsql as $$
declare
    v_queue_id integer;
    v_n integer;
begin
    -- Inline, not _queue_row: every slot call (receive_partitioned's too) runs it.
    select queue_id into v_queue_id from pgque.queue where queue_name = i_queue;
    if not found then
        raise exception 'queue not found: %', i_queue using detail = 'pgque:queue_not_found';
    end if;
    select n into v_n from pgque.partition_consumer
     where queue_id = v_queue_id and co_name = i_consumer;
    if not found then
        raise exception 'consumer % on queue % is not a partitioned consumer; call pgque.subscribe_slot() first',
            i_consumer, i_queue using detail = 'pgque:consumer_not_found';
    end if;
    if i_check_n and i_n is distinct from v_n then
        raise exception 'wrong slot count for consumer % on queue %: pinned n=%, caller passed n=%',
            i_consumer, i_queue, v_n, coalesce(i_n::text, 'NULL') using detail = 'pgque:invalid_argument';
    end if;
    if i_slot is null or i_slot < 0 or i_slot >= v_n then
        raise exception 'slot % of consumer % on queue % is out of range 0..%',
            coalesce(i_slot::text, 'NULL'), i_consumer, i_queue, v_n - 1
            using detail = 'pgque:invalid_argument';
    end if;
    return v_queue_id;
end
$$;

-- Internal: checks that i_worker holds the slot's lease and renews it by the
-- wall clock (clock_timestamp(), so every call moves the lease forward, even
-- within one transaction). The recorded owner renews even after its lease
-- expired; anyone else is fenced, expired or not: only claim_slot() takes a
-- slot over.
create or replace function pgque._hold_slot(
    i_queue text, i_consumer text, i_slot integer, i_n integer, i_worker text)
returns integer language plpgsql as $$
declare
    v_queue_id integer := pgque._partitioned_queue(i_queue, i_consumer, i_slot, i_n, true);
    v_owner text;
begin
    select lease_owner into v_owner from pgque.partition_slot
     where queue_id = v_queue_id and co_name = i_consumer and slot = i_slot
       for no key update;
    if v_owner is null then
        raise exception 'slot % of consumer % on queue % is not leased; call pgque.claim_slot() first',
            i_slot, i_consumer, i_queue using detail = 'pgque:not_leased';
    end if;
    if v_owner is distinct from i_worker then
        raise exception 'lease on slot % of consumer % on queue % is held by worker %, not %; fenced',
            i_slot, i_consumer, i_queue, v_owner, coalesce(i_worker, 'NULL')
            using detail = 'pgque:fenced';
    end if;
    update pgque.partition_slot
       set lease_until = pg_catalog.clock_timestamp() + lease_ttl
     where queue_id = v_queue_id and co_name = i_consumer and slot = i_slot;
    return v_queue_id;
end
$$;

create or replace function pgque.subscribe_slot(i_queue text, i_consumer text, i_slot integer, i_n integer)
returns void language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_queue_id integer;
    v_n integer;
begin
    if coalesce(i_consumer, '') = '' then
        raise exception 'consumer name must not be empty' using detail = 'pgque:invalid_argument';
    end if;
    perform pgque._refuse_reserved_name(i_consumer, null);
    if i_n is null or i_n < 1 then
        raise exception 'slot count must be >= 1, got % (consumer % on queue %)',
            coalesce(i_n::text, 'NULL'), i_consumer, i_queue using detail = 'pgque:invalid_argument';
    end if;
    v_queue_id := (pgque._queue_row(i_queue)).queue_id;
    insert into pgque.partition_consumer (queue_id, co_name, n)
    values (v_queue_id, i_consumer, i_n)
    on conflict (queue_id, co_name) do nothing;
    select n into v_n from pgque.partition_consumer
     where queue_id = v_queue_id and co_name = i_consumer for update;
    if v_n <> i_n then
        raise exception 'consumer % on queue % is pinned to n=%; got n=% (unsubscribe all slots to change the slot count)',
            i_consumer, i_queue, v_n, i_n using detail = 'pgque:invalid_argument';
    end if;
    perform pgque._partitioned_queue(i_queue, i_consumer, i_slot, i_n, true);
    perform pgque._register_consumer_at(i_queue, pgque._slot_consumer(i_consumer, i_slot, i_n), null);
    insert into pgque.partition_slot (queue_id, co_name, slot)
    values (v_queue_id, i_consumer, i_slot)
    on conflict do nothing;
end
$$;
comment on function pgque.subscribe_slot(text, text, integer, integer) is
    'Subscribes slot i_slot of i_n of a partitioned consumer (its subscription is named consumer#slot/n). N is pinned per queue and consumer.';

create or replace function pgque.unsubscribe_slot(i_queue text, i_consumer text, i_slot integer)
returns void language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_queue_id integer;
    v_n integer;
begin
    -- An unknown queue or a consumer that is not partitioned: nothing to do.
    select pc.queue_id, pc.n into v_queue_id, v_n
      from pgque.queue q join pgque.partition_consumer pc on pc.queue_id = q.queue_id
     where q.queue_name = i_queue and pc.co_name = i_consumer
       for update of pc;
    if not found then
        return;
    end if;
    perform pgque._partitioned_queue(i_queue, i_consumer, i_slot, null, false);
    perform pgque._unregister_consumer(i_queue, pgque._slot_consumer(i_consumer, i_slot, v_n));
    delete from pgque.partition_slot
     where queue_id = v_queue_id and co_name = i_consumer and slot = i_slot;
    -- The last slot gone: the slot count is no longer pinned.
    delete from pgque.partition_consumer p
     where p.queue_id = v_queue_id and p.co_name = i_consumer
       and not exists (select 1 from pgque.partition_slot s
                        where s.queue_id = p.queue_id and s.co_name = p.co_name);
end
$$;
comment on function pgque.unsubscribe_slot(text, text, integer) is
    'Removes one slot''s subscription and lease; the last one unpins the slot count. A no-op for an unknown queue or a consumer that is not partitioned.';

create or replace function pgque.claim_slot(
    i_queue text, i_consumer text, i_slot integer, i_worker text,
    i_ttl interval default '30 seconds')
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_queue_id integer;
    v_n integer;
    v_lease record;
    v_now timestamptz;
begin
    if coalesce(i_worker, '') = '' then
        raise exception 'worker id must not be empty' using detail = 'pgque:invalid_argument';
    end if;
    if i_ttl is null or i_ttl < interval '1 second' or i_ttl > interval '100 years' then
        raise exception 'lease ttl must be >= 1 second and at most 100 years, got %',
            coalesce(i_ttl::text, 'NULL') using detail = 'pgque:invalid_argument';
    end if;
    -- An unknown queue is reported as a consumer that is not partitioned, as upstream does.
    select pc.queue_id, pc.n into v_queue_id, v_n
      from pgque.queue q join pgque.partition_consumer pc on pc.queue_id = q.queue_id
     where q.queue_name = i_queue and pc.co_name = i_consumer;
    if not found then
        -- The text upstream gives either way; the code tells a missing queue.
        perform 1 from pgque.queue where queue_name = i_queue;
        raise exception 'consumer % on queue % is not a partitioned consumer; call pgque.subscribe_slot() first',
            i_consumer, i_queue
            using detail = case when found then 'pgque:consumer_not_found'
                                else 'pgque:queue_not_found' end;
    end if;
    if i_slot is null or i_slot < 0 or i_slot >= v_n then
        raise exception 'slot % of consumer % on queue % is out of range 0..%',
            coalesce(i_slot::text, 'NULL'), i_consumer, i_queue, v_n - 1
            using detail = 'pgque:invalid_argument';
    end if;
    select lease_owner, lease_until, epoch into v_lease from pgque.partition_slot
     where queue_id = v_queue_id and co_name = i_consumer and slot = i_slot
       for no key update;
    if not found then
        raise exception 'slot % of consumer % on queue % is not subscribed; call pgque.subscribe_slot() first',
            i_slot, i_consumer, i_queue using detail = 'pgque:consumer_not_found';
    end if;
    -- The wall clock, read after the row lock: a lease that expired while
    -- this call waited for the lock is seen as expired.
    v_now := pg_catalog.clock_timestamp();
    if v_lease.lease_owner = i_worker then
        -- The owner renews, even after its lease expired: same epoch.
        update pgque.partition_slot
           set lease_until = v_now + i_ttl, lease_ttl = i_ttl
         where queue_id = v_queue_id and co_name = i_consumer and slot = i_slot;
        return v_lease.epoch;
    end if;
    if v_lease.lease_owner is not null and v_lease.lease_until > v_now then
        -- Another worker's live lease: no slot for this caller; it moves on.
        return null;
    end if;
    -- A free or expired lease: a new holder, a new epoch.
    update pgque.partition_slot
       set lease_owner = i_worker, lease_until = v_now + i_ttl,
           lease_ttl = i_ttl, epoch = epoch + 1
     where queue_id = v_queue_id and co_name = i_consumer and slot = i_slot;
    return v_lease.epoch + 1;
end
$$;
comment on function pgque.claim_slot(text, text, integer, text, interval) is
    'Takes (epoch + 1) or renews (same epoch, even after expiry) a worker''s lease on a slot. Returns the epoch, or NULL when another worker holds a live lease.';

create or replace function pgque.release_slot(i_queue text, i_consumer text, i_slot integer, i_worker text)
returns boolean language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_owner text;
begin
    select ps.lease_owner into v_owner
      from pgque.queue q
      join pgque.partition_slot ps on ps.queue_id = q.queue_id
     where q.queue_name = i_queue and ps.co_name = i_consumer and ps.slot = i_slot
       for no key update of ps;
    if not found then
        raise exception 'slot % of consumer % on queue % is not subscribed',
            coalesce(i_slot::text, 'NULL'), i_consumer, i_queue
            using detail = 'pgque:consumer_not_found';
    end if;
    if v_owner is null or v_owner is distinct from i_worker then
        return false;
    end if;
    update pgque.partition_slot ps set lease_owner = null, lease_until = null, lease_ttl = null
      from pgque.queue q
     where q.queue_name = i_queue and ps.queue_id = q.queue_id
       and ps.co_name = i_consumer and ps.slot = i_slot;
    return true;
end
$$;
comment on function pgque.release_slot(text, text, integer, text) is
    'Gives up the worker''s lease on a slot, expired or not (the epoch stays). Returns false when the worker is not its owner.';

create or replace function pgque.receive_partitioned(
    i_queue text, i_consumer text, i_slot integer, i_n integer, i_worker text,
    i_max integer default 100)
returns setof pgque.message language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if i_max is null or i_max < 1 then
        raise exception 'pgque.receive_partitioned: max must be >= 1, got %',
            coalesce(i_max::text, 'NULL') using detail = 'pgque:invalid_argument';
    end if;
    perform pgque._hold_slot(i_queue, i_consumer, i_slot, i_n, i_worker);
    -- A batch with nothing of this slot is finished there.
    return query select * from pgque._receive(i_queue, pgque._slot_consumer(i_consumer, i_slot, i_n),
                                              null, null, i_max, i_slot, i_n);
end
$$;
comment on function pgque.receive_partitioned(text, text, integer, integer, text, integer) is
    'Returns up to i_max messages of the slot''s batch whose partition key hashes to the slot; the caller must hold the slot''s lease.';

-- Internal: the slot's open batch, after checking that i_worker holds the
-- slot's lease (and renewing it). None: NULL, or batch_not_found naming
-- i_verb (what the caller would do with it) when i_verb is given.
create or replace function pgque._slot_batch(
    i_queue text, i_consumer text, i_slot integer, i_n integer, i_worker text, i_verb text)
returns bigint language plpgsql as $$
declare
    v_queue_id integer := pgque._hold_slot(i_queue, i_consumer, i_slot, i_n, i_worker);
    v_batch_id bigint;
begin
    select s.sub_batch into v_batch_id
      from pgque.subscription s join pgque.consumer c on c.co_id = s.sub_consumer
     where s.sub_queue = v_queue_id and c.co_name = pgque._slot_consumer(i_consumer, i_slot, i_n);
    if v_batch_id is null and i_verb is not null then
        raise exception 'slot % of consumer % on queue % has no open batch to %',
            i_slot, i_consumer, i_queue, i_verb using detail = 'pgque:batch_not_found';
    end if;
    return v_batch_id;
end
$$;

create or replace function pgque.ack_partitioned(
    i_queue text, i_consumer text, i_slot integer, i_n integer, i_worker text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_batch_id bigint := pgque._slot_batch(i_queue, i_consumer, i_slot, i_n, i_worker, null);
begin
    if v_batch_id is null then
        return 0;
    end if;
    return pgque._finish_batch(v_batch_id);
end
$$;
comment on function pgque.ack_partitioned(text, text, integer, integer, text) is
    'Finishes the slot''s open batch. Returns 1, or 0 when the slot has none.';

create or replace function pgque.nack_partitioned(
    i_queue text, i_consumer text, i_slot integer, i_n integer, i_worker text,
    i_msg pgque.message, i_retry_after interval default '60 seconds', i_reason text default null)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._nack(pgque._slot_batch(i_queue, i_consumer, i_slot, i_n, i_worker, 'nack'), i_msg.msg_id, i_retry_after, i_reason); end $$;
comment on function pgque.nack_partitioned(text, text, integer, integer, text, pgque.message, interval, text) is
    'nack() for a message of the slot''s open batch; the caller must hold the slot''s lease.';

create or replace function pgque.dead_letter_partitioned(
    i_queue text, i_consumer text, i_slot integer, i_n integer, i_worker text,
    i_msg_id bigint, i_reason text default null)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._dead_letter_msg( pgque._slot_batch(i_queue, i_consumer, i_slot, i_n, i_worker, 'dead-letter'), i_msg_id, i_reason); end $$;
comment on function pgque.dead_letter_partitioned(text, text, integer, integer, text, bigint, text) is
    'dead_letter_event() for a message of the slot''s open batch; the caller must hold the slot''s lease. Returns 1; the batch stays open for ack_partitioned().';

-- file: functions/schedule.sql
-- Periodic schedules: an event sent to a queue at each occurrence of a cron
-- expression, by whatever ticks the queue.
--
-- A schedule is a row of pgque.schedule with the time of its next
-- occurrence. The tickers (ticker(), which ticker_loop, the SDK's Ticker
-- and pgque ticker call, and a consumer's own tick) send what is due in
-- the transaction that moves the row to its next occurrence, taking the
-- row FOR UPDATE SKIP LOCKED: however many tickers run, each occurrence is
-- sent once, and a ticker that dies before committing sent nothing. An
-- occurrence missed while nothing ticked is sent once when ticking resumes:
-- only the latest one, not a burst. The event's ev_extra2 is the
-- schedule's name and ev_extra3 the occurrence's time (UTC, ISO 8601).
--
-- Cron: five fields (minute 0-59, hour 0-23, day of month 1-31, month 1-12
-- or jan-dec, day of week 0-7 or sun-sat, 0 and 7 being Sunday), each a
-- list of *, n, a-b, with an optional /step; or @yearly (@annually),
-- @monthly, @weekly, @daily (@midnight), @hourly. As in cron, when both
-- day fields are restricted a day matching either one matches.

-- Internal: the values one cron field allows, ascending. i_names map to
-- i_first, i_first + 1, ... (months: jan = 1; days of week: sun = 0).
create or replace function pgque._cron_field(
    i_cron text, i_what text, i_field text, i_min integer, i_max integer,
    i_names text[] default null, i_first integer default 0)
returns integer[] language plpgsql immutable as $$
declare
    v_item text;
    v_parts text[];
    v_low integer;
    v_high integer;
    v_step integer;
    v_values integer[] := '{}';
    v_bound text;
    v_bounds integer[];
begin
    foreach v_item in array pg_catalog.string_to_array(pg_catalog.lower(i_field), ',') loop
        -- *, n, a-b, each with an optional /step
        v_parts := pg_catalog.regexp_match(v_item, '^(\*|[0-9a-z]+(-[0-9a-z]+)?)(/([0-9]+))?$');
        if v_parts is null then
            raise exception 'cron %: the % field % is not *, n or a-b with an optional /step',
                pg_catalog.quote_literal(i_cron), i_what, pg_catalog.quote_literal(i_field)
                using detail = 'pgque:invalid_argument';
        end if;
        v_bounds := '{}';
        if v_parts[1] = '*' then
            v_bounds := array[i_min, i_max];
        else
            foreach v_bound in array pg_catalog.string_to_array(v_parts[1], '-') loop
                if v_bound ~ '^[0-9]{1,4}$' then
                    v_bounds := v_bounds || v_bound::integer;
                elsif pg_catalog.array_position(i_names, v_bound) is not null then
                    v_bounds := v_bounds || (pg_catalog.array_position(i_names, v_bound) - 1 + i_first);
                else
                    raise exception 'cron %: % is not a % (% to %)',
                        pg_catalog.quote_literal(i_cron), pg_catalog.quote_literal(v_bound),
                        i_what, i_min, i_max using detail = 'pgque:invalid_argument';
                end if;
            end loop;
            if pg_catalog.cardinality(v_bounds) = 1 then
                -- n/step runs from n to the field's end
                v_bounds := v_bounds || case when v_parts[4] is null then v_bounds[1] else i_max end;
            end if;
        end if;
        v_low := v_bounds[1];
        v_high := v_bounds[2];
        v_step := coalesce(v_parts[4]::integer, 1);
        if v_low < i_min or v_high > i_max or v_low > v_high or v_step < 1 then
            raise exception 'cron %: the % field % is out of range (% to %, low to high, step 1 or more)',
                pg_catalog.quote_literal(i_cron), i_what, pg_catalog.quote_literal(i_field), i_min, i_max
                using detail = 'pgque:invalid_argument';
        end if;
        v_values := v_values || array(select pg_catalog.generate_series(v_low, v_high, v_step));
    end loop;
    return array(select distinct v from pg_catalog.unnest(v_values) v order by v);
end
$$;

-- Internal: a cron expression's allowed values per field, checked.
create or replace function pgque._cron_parse(
    i_cron text,
    out minutes integer[], out hours integer[], out days integer[], out months integer[],
    out weekdays integer[], out any_day boolean, out any_weekday boolean)
language plpgsql immutable
as $$
declare
    v_fields text[];
begin
    v_fields := pg_catalog.regexp_split_to_array(pg_catalog.btrim(coalesce(i_cron, '')), '\s+');
    v_fields := case pg_catalog.lower(v_fields[1])
        when '@yearly' then '{0,0,1,1,*}'
        when '@annually' then '{0,0,1,1,*}'
        when '@monthly' then '{0,0,1,*,*}'
        when '@weekly' then '{0,0,*,*,0}'
        when '@daily' then '{0,0,*,*,*}'
        when '@midnight' then '{0,0,*,*,*}'
        when '@hourly' then '{0,*,*,*,*}'
        else v_fields end::text[];
    if pg_catalog.cardinality(v_fields) <> 5 then
        raise exception 'cron %: expected five fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, @yearly',
            coalesce(pg_catalog.quote_literal(i_cron), 'NULL') using detail = 'pgque:invalid_argument';
    end if;
    minutes := pgque._cron_field(i_cron, 'minute', v_fields[1], 0, 59);
    hours := pgque._cron_field(i_cron, 'hour', v_fields[2], 0, 23);
    days := pgque._cron_field(i_cron, 'day of month', v_fields[3], 1, 31);
    months := pgque._cron_field(i_cron, 'month', v_fields[4], 1, 12,
        '{jan,feb,mar,apr,may,jun,jul,aug,sep,oct,nov,dec}', 1);
    weekdays := array(select distinct w % 7 from pg_catalog.unnest(
        pgque._cron_field(i_cron, 'day of week', v_fields[5], 0, 7,
                          '{sun,mon,tue,wed,thu,fri,sat}', 0)) w order by 1);
    any_day := v_fields[3] like '*%';
    any_weekday := v_fields[5] like '*%';
end
$$;

-- Internal: the first occurrence of i_cron after i_after, in time zone
-- i_time_zone (a local time that a clock change skips is taken as
-- PostgreSQL reads it, an hour on).
create or replace function pgque._cron_next(i_cron text, i_after timestamptz, i_time_zone text)
returns timestamptz language plpgsql stable as $$
declare
    c record := pgque._cron_parse(i_cron);
    v_start timestamp := pg_catalog.date_trunc('minute', i_after at time zone i_time_zone)
                         + interval '1 minute';
    v_day date := v_start::date;
    v_day_ok boolean;
    h integer;
    m integer;
    v_at timestamptz;
begin
    -- Eight years hold every date a valid expression names (29 February on
    -- a given weekday included).
    for i in 0 .. 8 * 366 loop
        if extract(month from v_day)::integer = any (c.months) then
            v_day_ok := case
                when c.any_day and c.any_weekday then true
                when c.any_day then extract(dow from v_day)::integer = any (c.weekdays)
                when c.any_weekday then extract(day from v_day)::integer = any (c.days)
                else extract(day from v_day)::integer = any (c.days)
                     or extract(dow from v_day)::integer = any (c.weekdays)
            end;
            if v_day_ok then
                foreach h in array c.hours loop
                    continue when i = 0 and h < extract(hour from v_start);
                    foreach m in array c.minutes loop
                        continue when i = 0 and h = extract(hour from v_start)
                                      and m < extract(minute from v_start);
                        v_at := (v_day + pg_catalog.make_time(h, m, 0)) at time zone i_time_zone;
                        if v_at > i_after then
                            return v_at;
                        end if;
                    end loop;
                end loop;
            end if;
        end if;
        v_day := v_day + 1;
    end loop;
    raise exception 'cron %: no date ever matches it', pg_catalog.quote_literal(i_cron)
        using detail = 'pgque:invalid_argument';
end
$$;

-- Internal: i_time_zone checked (a name PostgreSQL knows).
create or replace function pgque._check_time_zone(i_time_zone text)
returns void language plpgsql stable as $$
begin
    perform pg_catalog.now() at time zone i_time_zone;
    if i_time_zone is null then
        raise exception 'schedule: time zone must not be NULL'
            using detail = 'pgque:invalid_argument';
    end if;
exception when invalid_parameter_value then
    raise exception 'schedule: unknown time zone % (a name such as UTC or Europe/Paris)',
        pg_catalog.quote_literal(i_time_zone) using detail = 'pgque:invalid_argument';
end
$$;

create or replace function pgque.schedule(
    queue_name text, schedule_name text, cron text, payload jsonb,
    type_name text default null, time_zone text default 'UTC')
returns timestamptz language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_queue_id integer;
    v_next timestamptz;
begin
    v_queue_id := (pgque._queue_row($1)).queue_id;
    if $2 is null or $2 !~ '^[^[:cntrl:]]{1,200}$' or $2 <> pg_catalog.btrim($2) then
        raise exception 'schedule: a schedule name is 1 to 200 characters without control characters or surrounding spaces, got % (queue %)',
            coalesce(pg_catalog.quote_literal($2), 'NULL'), $1 using detail = 'pgque:invalid_argument';
    end if;
    if $4 is null then
        raise exception 'schedule: the payload of schedule % (queue %) must not be NULL', $2, $1
            using detail = 'pgque:invalid_argument';
    end if;
    perform pgque._check_time_zone($6);
    v_next := pgque._cron_next($3, pg_catalog.now(), $6);
    insert into pgque.schedule as s (sc_queue, sc_name, sc_cron, sc_time_zone, sc_payload,
                                     sc_type, sc_next_run)
    values (v_queue_id, $2, $3, $6, $4::text, $5, v_next)
    on conflict (sc_queue, sc_name) do update
       set sc_cron = excluded.sc_cron, sc_time_zone = excluded.sc_time_zone,
           sc_payload = excluded.sc_payload, sc_type = excluded.sc_type,
           -- Unchanged timing keeps its next run (a consumer's start upserts it).
           sc_next_run = case when s.sc_cron = excluded.sc_cron
                                   and s.sc_time_zone = excluded.sc_time_zone
                              then s.sc_next_run else excluded.sc_next_run end
    returning s.sc_next_run into v_next;
    return v_next;
end
$$;
comment on function pgque.schedule(text, text, text, jsonb, text, text) is
    'Creates or replaces a periodic schedule: a message (payload, type) sent to the queue at each occurrence of the five-field cron expression in time_zone, by whatever ticks the queue, once per occurrence. Returns the next run.';

create or replace function pgque.unschedule(queue_name text, schedule_name text)
returns boolean language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    delete from pgque.schedule s
     using pgque.queue q
     where q.queue_name = $1 and s.sc_queue = q.queue_id and s.sc_name = $2;
    return found;
end
$$;
comment on function pgque.unschedule(text, text) is
    'Removes a periodic schedule; true when it existed.';

create or replace function pgque.schedules(
    out queue_name text, out schedule_name text, out cron text, out time_zone text,
    out type_name text, out payload text, out next_run timestamptz, out last_run timestamptz,
    out last_event_id bigint)
returns setof record language sql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
    select q.queue_name, s.sc_name, s.sc_cron, s.sc_time_zone, s.sc_type, s.sc_payload,
           s.sc_next_run, s.sc_last_run, s.sc_last_event
      from pgque.schedule s join pgque.queue q on q.queue_id = s.sc_queue
     order by q.queue_name, s.sc_name
$$;
comment on function pgque.schedules() is
    'Every periodic schedule: queue, name, cron, time zone, type, payload, next run, last run (the occurrence last sent) and the id of the event it sent.';

-- Internal: sends the due occurrences of the schedules of queue i_queue_id
-- (every queue's when NULL), at most 100 a call, each in a subtransaction
-- so that one queue refusing inserts stops no tick. Returns how many it sent.
create or replace function pgque._fire_schedules(i_queue_id integer)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    r record;
    v_now constant timestamptz := pg_catalog.now();
    v_occurrence timestamptz;
    v_next timestamptz;
    v_try timestamptz;
    v_event bigint;
    v_sent integer := 0;
begin
    for r in
        select s.sc_queue, s.sc_name, s.sc_cron, s.sc_time_zone, s.sc_payload, s.sc_type,
               s.sc_next_run, q.queue_name
          from pgque.schedule s join pgque.queue q on q.queue_id = s.sc_queue
         where s.sc_next_run <= v_now and (i_queue_id is null or s.sc_queue = i_queue_id)
         order by s.sc_next_run
         limit 100
           for update of s skip locked
    loop
        -- The latest occurrence that is due: a day's at most are stepped over.
        v_occurrence := r.sc_next_run;
        if v_occurrence < v_now - interval '1 day' then
            v_try := pgque._cron_next(r.sc_cron, v_now - interval '1 day', r.sc_time_zone);
            if v_try <= v_now then
                v_occurrence := v_try;
            end if;
        end if;
        loop
            v_next := pgque._cron_next(r.sc_cron, v_occurrence, r.sc_time_zone);
            exit when v_next > v_now;
            v_occurrence := v_next;
        end loop;
        begin
            v_event := pgque.send(r.queue_name, coalesce(r.sc_type, 'default'), r.sc_payload,
                null, r.sc_name,
                pg_catalog.to_char(v_occurrence at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                null);
            v_sent := v_sent + 1;
        exception when others then
            v_event := null;
            perform pgque.log_event('warning', 'schedule', 'occurrence not sent',
                pg_catalog.jsonb_build_object('queue', r.queue_name, 'schedule', r.sc_name,
                    'occurrence', v_occurrence, 'error', sqlerrm));
        end;
        update pgque.schedule
           set sc_next_run = v_next, sc_last_run = v_occurrence,
               sc_last_event = coalesce(v_event, sc_last_event)
         where sc_queue = r.sc_queue and sc_name = r.sc_name;
    end loop;
    return v_sent;
end
$$;

-- file: functions/lifecycle.sql
-- Lifecycle: the ticker loop, the scheduler jobs (pg_cron or pg_timetable),
-- status() and uninstall().
--
-- Without a scheduler nothing ticks: pgque.start() schedules the jobs in
-- pg_cron, pgque.start_timetable() in pg_timetable; pgque.stop() removes
-- them. Every ticker (the loop here, the SDK's Ticker, `pgque ticker`) leads
-- through the ticker lease, pgque.ticker_lead(), and idles while another
-- holds it, so two schedulers or a scheduler and a manual ticker never tick
-- side by side; a leader that vanishes loses the lease when it expires.

create or replace function pgque.ticker_lock_key()
returns bigint language sql immutable set search_path = pgque, pg_catalog, pg_temp as $$
    -- 0x70677174, 'pgqt' in ASCII. Kept for callers of earlier versions.
    select 1885827444::bigint
$$;
comment on function pgque.ticker_lock_key() is
    'Deprecated: the advisory lock key pgque tickers held before the ticker lease (ticker_lead); no pgque ticker takes it any more.';

-- Internal: the longest and shortest lease ticker_lead() grants.
create or replace function pgque._check_ticker_lease(i_holder text, i_lease interval)
returns void language plpgsql immutable as $$
begin
    if i_holder is null or i_holder = '' or pg_catalog.length(i_holder) > 200 then
        raise exception 'ticker lease: the holder must be a non-empty text of at most 200 characters, got %',
            coalesce(pg_catalog.quote_literal(pg_catalog.left(i_holder, 40)), 'NULL')
            using detail = 'pgque:invalid_argument';
    end if;
    if i_lease is null or i_lease < interval '50 milliseconds' or i_lease > interval '1 hour' then
        raise exception 'ticker lease: the lease must be between 50 ms and 1 hour, got %',
            coalesce(i_lease::text, 'NULL') using detail = 'pgque:invalid_argument';
    end if;
end
$$;

create or replace function pgque.ticker_lead(i_holder text, i_lease interval default '2 seconds')
returns boolean language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_now timestamptz := pg_catalog.clock_timestamp();
    l pgque.ticker_leader%rowtype;
begin
    perform pgque._check_ticker_lease(i_holder, i_lease);
    select * into l from pgque.ticker_leader;
    if l.holder is not distinct from i_holder and l.expires - v_now > i_lease / 2 then
        return true;  -- leading, renewed recently: nothing to write
    end if;
    if l.holder is distinct from i_holder and l.expires > v_now then
        return false;  -- another ticker leads
    end if;
    -- Never wait: a row another ticker is updating right now is left to it.
    perform 1 from pgque.ticker_leader for update skip locked;
    if not found then
        return l.holder is not distinct from i_holder and l.expires > v_now;
    end if;
    select * into l from pgque.ticker_leader;  -- as of the lock
    v_now := pg_catalog.clock_timestamp();
    if l.holder is distinct from i_holder and l.expires > v_now then
        return false;
    end if;
    update pgque.ticker_leader
       set holder = i_holder,
           since = case when l.holder is not distinct from i_holder and l.expires > v_now
                        then l.since else v_now end,
           pid = pg_catalog.pg_backend_pid(),
           application_name = pg_catalog.current_setting('application_name'),
           client_addr = pg_catalog.inet_client_addr(),
           renewed = v_now,
           expires = v_now + i_lease;
    if l.holder is distinct from i_holder and l.expires > '-infinity' then
        -- Taken over from a leader that did not resign (ticker_resign), but
        -- vanished or stalled: worth a line in the log.
        perform pgque.log_event('warning', 'ticker', 'took over an expired lease', pg_catalog.jsonb_build_object(
            'application_name', pg_catalog.current_setting('application_name'),
            'pid', pg_catalog.pg_backend_pid(),
            'previous_application_name', l.application_name, 'previous_pid', l.pid,
            'previous_expired', l.expires));
    end if;
    return true;
end
$$;
comment on function pgque.ticker_lead(text, interval) is
    'Takes or renews the ticker lease for i_holder (a token unique to one ticker) for i_lease (50 ms to 1 h); true while i_holder leads, false while another unexpired holder does. Never waits on a lock. Call again before half the lease has passed.';

create or replace function pgque.ticker_resign(i_holder text)
returns boolean language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    perform pgque._check_ticker_lease(i_holder, interval '1 second');
    update pgque.ticker_leader
       set expires = '-infinity', renewed = pg_catalog.clock_timestamp()
     where holder = i_holder and expires > pg_catalog.clock_timestamp();
    if not found then
        return false;
    end if;
    -- Standing-by tickers LISTEN here and take over at once.
    perform pg_catalog.pg_notify('pgque_ticker_resign', '');
    return true;
end
$$;
comment on function pgque.ticker_resign(text) is
    'Gives up the ticker lease if i_holder holds it (and NOTIFYs pgque_ticker_resign so a standby takes over at once); true when it did.';

create or replace function pgque.ticker_leader(
    out application_name text, out pid integer, out client_addr inet,
    out since timestamptz, out renewed timestamptz, out expires timestamptz,
    out active boolean)
returns record language sql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
    select l.application_name, l.pid, l.client_addr, l.since, l.renewed, l.expires,
           l.expires > pg_catalog.clock_timestamp()
      from pgque.ticker_leader l
$$;
comment on function pgque.ticker_leader() is
    'Who leads ticking (the ticker lease): the holder''s application_name, pid and client address when it last renewed, since when it leads, until when, and whether the lease is active.';

create or replace function pgque.xmin_horizon()
returns text language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    -- What holds this database's VACUUM horizon back, oldest first: other
    -- sessions' snapshots and transaction ids (read-only snapshots have no
    -- txid, so pg_current_snapshot() alone misses them), prepared
    -- transactions and replication slots. VACUUM's own snapshot holds
    -- nothing back and is skipped. Definer rights: other roles' backend_xmin
    -- is visible only to pg_read_all_stats. The sessions are read once, from
    -- pg_stat_get_activity (what pg_stat_activity reads, without its joins):
    -- the Ticker calls this every 50 ms under load, and reading them twice
    -- through the view took 2.5 ms a call with 200 connection slots.
    return (
        select x::text
          from (select h.x
                  from pg_catalog.pg_stat_get_activity(null) a
                  cross join lateral (values (a.backend_xmin), (a.backend_xid)) h(x)
                 where a.datid = (select d.oid from pg_catalog.pg_database d
                                   where d.datname = pg_catalog.current_database())
                   and a.pid <> pg_catalog.pg_backend_pid()
                   and a.backend_type <> 'autovacuum worker'
                   -- A consumer inside a batch: its transaction wrote the batch
                   -- into its subscription row (uncommitted, so seen here only as
                   -- the old version's xmax). A batch is work in progress, not a
                   -- transaction left open, for its first minute.
                   and not (a.backend_xid is not null
                            and a.xact_start > pg_catalog.now() - interval '1 minute'
                            and exists (select 1 from pgque.subscription s
                                         where s.xmax = a.backend_xid))
                union all
                select p.transaction from pg_catalog.pg_prepared_xacts p
                 where p.database = pg_catalog.current_database()
                union all
                select r.xmin from pg_catalog.pg_replication_slots r
                 where r.database is null or r.database = pg_catalog.current_database()) h
         where x is not null
         order by pg_catalog.age(x) desc
         limit 1);
end
$$;
comment on function pgque.xmin_horizon() is
    'The oldest transaction id holding back VACUUM in this database (sessions, prepared transactions, replication slots), as text; NULL when nothing does. A consumer''s open batch is left out for its first minute. The SDK ticker slows down while it does not move.';

-- Internal: the names of the scheduler jobs start() and start_timetable() create.
create or replace function pgque._job_names()
returns text[] language sql immutable as $$
    select array['pgque_ticker', 'pgque_retry_events', 'pgque_maint',
                 'pgque_rotate_step2', 'pgque_vacuum']
$$;

-- Internal: "<1000 / ms> ticks/sec" with two decimals, as status() prints it.
create or replace function pgque._tick_rate_text(i_period_ms integer)
returns text
language sql immutable strict
as $$ select pg_catalog.round(1000.0 / i_period_ms, 2)::text $$;

-- ---------------------------------------------------------------------
-- Ticking
-- ---------------------------------------------------------------------

-- The loops are procedures so they can COMMIT after every tick; PostgreSQL
-- allows that only in a procedure that runs as its caller and has no SET
-- clause. So they run with the caller's rights (admin: ticker() and the
-- config table) and the caller's search_path, which may hold another
-- role's schema before pg_catalog: every function, operator and type below
-- is schema-qualified (OPERATOR(pg_catalog.+) and so on), which
-- tests/security proves with a hostile schema first in the path.
create or replace procedure pgque.ticker_loop_for(i_seconds integer)
language plpgsql
as $$
declare
    -- This run's token in the ticker lease.
    v_holder constant pg_catalog.text :=
        'ticker_loop ' OPERATOR(pg_catalog.||) pg_catalog.gen_random_uuid()::pg_catalog.text;
    v_start constant pg_catalog.timestamptz := pg_catalog.clock_timestamp();
    v_end pg_catalog.timestamptz;
    v_next pg_catalog.timestamptz;
    v_round_start pg_catalog.timestamptz;
    v_not_before pg_catalog.timestamptz;
    v_leading boolean := false;
    v_rounds integer := 0;
    v_failures integer := 0;
    v_last_error pg_catalog.text;
begin
    if i_seconds is null or i_seconds OPERATOR(pg_catalog.<) 1
       or i_seconds OPERATOR(pg_catalog.>) 3600 then
        raise exception 'ticker_loop_for: seconds must be between 1 and 3600, got %',
            coalesce(i_seconds::pg_catalog.text, 'NULL') using detail = 'pgque:invalid_argument';
    end if;
    v_end := v_start OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => i_seconds);
    v_next := v_start;
    -- Inside a transaction block this fails at once (invalid transaction
    -- termination), before the lease below is taken.
    commit;

    loop
        -- Another ticker leads: idle, and try again next round. A loop that
        -- is cancelled (stop(), statement_timeout, Ctrl-C) cannot resign:
        -- its lease runs out within ticker_lead's 2 s.
        v_leading := pgque.ticker_lead(v_holder);
        v_round_start := pg_catalog.clock_timestamp();
        if v_leading then
            v_rounds := v_rounds OPERATOR(pg_catalog.+) 1;
            begin
                perform pgque.ticker();
            exception when others then  -- never query_canceled: a cancel ends the loop
                -- Keep ticking through a transient error; report it at the end.
                v_failures := v_failures OPERATOR(pg_catalog.+) 1;
                v_last_error := sqlerrm;
                if v_failures OPERATOR(pg_catalog.=) 1 then
                    perform pgque.log_event('error', 'ticker', 'ticker() failed in the ticker loop',
                        pg_catalog.jsonb_build_object('error', sqlerrm, 'sqlstate', sqlstate));
                end if;
            end;
        end if;
        commit;

        -- The next slot on the grid of tick_period_ms (read every round:
        -- set_tick_period_ms() applies at once); a round that overran its
        -- slot skips the slots it missed. A round that took d waits at
        -- least 9 d: with thousands of idle queues (a few microseconds
        -- each per round) the loop then spends at most 10% of a core.
        v_not_before := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+)
            ((pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) v_round_start)
                OPERATOR(pg_catalog.*) 9::pg_catalog.float8);
        v_next := pgque._ticker_next_slot(v_next, v_not_before);
        exit when v_next OPERATOR(pg_catalog.>=) v_end;
        perform pg_catalog.pg_sleep(pg_catalog.date_part('epoch',
            v_next OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp()));
        -- The next tick's transaction, whose start is its tick_time, begins now.
        commit;
    end loop;

    if v_leading then
        -- The next run (pg_cron's, a second later) or a standby takes over at once.
        perform pgque.ticker_resign(v_holder);
        commit;
    end if;
    if v_failures OPERATOR(pg_catalog.>) 0 then
        -- Everything ticked so far is committed; this marks the run failed.
        raise exception 'pgque ticker loop: ticker() failed in % of % rounds; last error: %',
            v_failures, v_rounds, v_last_error using detail = 'pgque:ticker_failed';
    end if;
end
$$;
comment on procedure pgque.ticker_loop_for(integer) is
    'CALL outside a transaction block: runs ticker() every tick_period_ms for i_seconds (1..3600), committing after each, while it leads through the ticker lease (ticker_lead; idles while another ticker leads).';

create or replace procedure pgque.ticker_loop()
language plpgsql
as $$
begin
    call pgque.ticker_loop_for(1);
end
$$;
comment on procedure pgque.ticker_loop() is
    'CALL outside a transaction block: 1000 / tick_period_ms calls of ticker() within about one second, committing after each (what the pg_cron ticker job runs every second).';

-- Internal: the ticker loop's next slot after i_slot on the tick_period_ms
-- grid that lies in the future and not before i_not_before.
create or replace function pgque._ticker_next_slot(i_slot timestamptz, i_not_before timestamptz)
returns timestamptz language plpgsql volatile set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_step interval;
    v_next timestamptz := i_slot;
begin
    select pg_catalog.make_interval(secs => c.tick_period_ms / 1000.0) into v_step
      from pgque.config c;
    v_next := v_next + v_step;
    while v_next <= greatest(pg_catalog.clock_timestamp(), i_not_before) loop
        v_next := v_next + v_step;
    end loop;
    return v_next;
end
$$;

create or replace function pgque.set_tick_period_ms(p_period_ms integer)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if p_period_ms is null or p_period_ms < 1 or p_period_ms > 1000 or 1000 % p_period_ms <> 0 then
        raise exception 'tick_period_ms must be an exact divisor of 1000 between 1 and 1000 (got %)',
            coalesce(p_period_ms::text, 'NULL') using detail = 'pgque:invalid_argument';
    end if;
    update pgque.config set tick_period_ms = p_period_ms
     where tick_period_ms is distinct from p_period_ms;
    if found then
        perform pgque.log_event('info', 'lifecycle', 'tick period changed',
                                pg_catalog.jsonb_build_object('tick_period_ms', p_period_ms));
    end if;
    return p_period_ms;
end
$$;
comment on function pgque.set_tick_period_ms(integer) is
    'Sets how often the ticker loops tick (an exact divisor of 1000 ms); they read it every round. Returns the value.';

-- ---------------------------------------------------------------------
-- pg_cron
-- ---------------------------------------------------------------------

-- Internal: the jobs start() schedules for a pg_cron of the given version
-- (pg_extension.extversion, e.g. '1.4-1' for Debian 12's 1.4.2). pg_cron
-- 1.5 added schedules in seconds; before it, schedules are per minute, so
-- the ticker job runs a loop that lasts most of the minute instead.
create or replace function pgque._cron_jobs(i_cron_version text)
returns table (job_name text, schedule text, command text) language plpgsql stable as $$
declare
    v_parts text[];
    v_version integer[];
    v_seconds boolean;
    v_vacuum text;
begin
    v_parts := pg_catalog.regexp_match(i_cron_version, '^(\d+)\.(\d+)');
    if v_parts is null then
        raise exception 'pgque.start: cannot read the pg_cron version %',
            coalesce(pg_catalog.quote_literal(i_cron_version), 'NULL')
            using detail = 'pgque:invalid_argument';
    end if;
    v_version := array[v_parts[1]::integer, v_parts[2]::integer];
    if v_version < array[1, 3] then
        raise exception 'pgque.start: pg_cron % is too old; pgque needs pg_cron 1.3 or later (named jobs)',
            i_cron_version using detail = 'pgque:scheduler_too_old';
    end if;
    v_seconds := v_version >= array[1, 5];

    -- One statement: VACUUM cannot run in a function or a transaction block.
    select 'VACUUM (SKIP_LOCKED) ' || pg_catalog.string_agg(t.name, ', ' order by t.n)
      into v_vacuum
      from pgque.maint_tables_to_vacuum() with ordinality as t(name, n);

    job_name := 'pgque_ticker';
    if v_seconds then
        schedule := '1 second';
        command := 'CALL pgque.ticker_loop()';
    else
        -- 58 s from the start of each minute: a run ends before the next
        -- one starts. (A late run would only idle on the ticker lease.)
        schedule := '* * * * *';
        command := 'CALL pgque.ticker_loop_for(58)';
    end if;
    return next;
    -- The procedures (the ticker above, maint below) are bare CALLs: any
    -- statement before one would put it inside an implicit transaction
    -- block, where its COMMIT fails. The others may set a statement timeout
    -- first.
    job_name := 'pgque_retry_events';
    schedule := case when v_seconds then '30 seconds' else '* * * * *' end;
    command := 'SET statement_timeout = ''25s''; SELECT pgque.maint_retry_events()';
    return next;
    job_name := 'pgque_maint';
    command := 'CALL pgque.run_maint()';
    return next;
    job_name := 'pgque_rotate_step2';
    schedule := case when v_seconds then '10 seconds' else '* * * * *' end;
    command := 'SELECT pgque.maint_rotate_tables_step2()';
    return next;
    job_name := 'pgque_vacuum';
    schedule := case when v_seconds then '30 seconds' else '* * * * *' end;
    command := v_vacuum;
    return next;
end
$$;

create or replace function pgque.stop()
returns void language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_scheduler text;
    v_name text;
    v_jobid bigint;
    v_jobids bigint[] := '{}';
    v_found boolean;
begin
    select scheduler into v_scheduler from pgque.config;
    if v_scheduler = 'pg_timetable' then
        perform pgque.stop_timetable();
    elsif exists (select 1 from pg_catalog.pg_extension where extname = 'pg_cron') then
        -- By name, in this database, as the role that scheduled them (pgque's
        -- owner: start() runs as it).
        foreach v_name in array pgque._job_names() loop
            v_found := false;
            for v_jobid in
                select j.jobid from cron.job j
                 where j.jobname = v_name and j.username = current_user
                   and j.database = pg_catalog.current_database()
                 order by j.jobid
            loop
                perform cron.unschedule(v_jobid);
                v_found := true;
                v_jobids := v_jobids || v_jobid;
            end loop;
            if not v_found then
                raise notice 'pgque.stop: % job not found (OK on first install)',
                    pg_catalog.substr(v_name, 7);
            end if;
        end loop;
        -- A run in progress would go on (pg_cron 1.4's ticker loop for up to
        -- a minute): cancel it. Only a live session of this database that is
        -- still running that very job's command is touched.
        if pg_catalog.cardinality(v_jobids) > 0
           and pg_catalog.to_regclass('cron.job_run_details') is not null then
            perform pg_catalog.pg_cancel_backend(a.pid)
               from cron.job_run_details d
               join pg_catalog.pg_stat_activity a on a.pid = d.job_pid
              where d.jobid = any (v_jobids) and d.status = 'running'
                and a.datname = pg_catalog.current_database() and a.query = d.command;
        end if;
    end if;

    update pgque.config set ticker_job_id = null, maint_job_id = null, scheduler = null
     where ticker_job_id is not null or maint_job_id is not null or scheduler is not null;
    if found or pg_catalog.cardinality(v_jobids) > 0 then
        perform pgque.log_event('info', 'lifecycle', 'stopped', pg_catalog.jsonb_build_object(
            'scheduler', v_scheduler, 'pg_cron_jobs_removed', v_jobids));
    end if;
end
$$;
comment on function pgque.stop() is
    'Removes pgque''s scheduler jobs (pg_cron by name, cancelling runs in progress, or through stop_timetable()) and clears the job ids. Harmless when nothing is scheduled or pg_cron is absent.';

create or replace function pgque.start()
returns void language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_version text;
    v_in_database regprocedure;
    v_job record;
    v_id bigint;
    v_ids jsonb := '{}';
    v_period integer;
begin
    select extversion into v_version from pg_catalog.pg_extension where extname = 'pg_cron';
    if not found then
        raise exception 'pg_cron extension is not installed. PgQue itself works without pg_cron, but pgque.start() schedules cron jobs. Install pg_cron first, or run pgque.ticker() and pgque.maint() manually.'
            using detail = 'pgque:scheduler_missing';
    end if;

    -- Starting twice leaves one set of jobs; a switch from pg_timetable
    -- removes its jobs. All of it is one transaction: if anything fails,
    -- the earlier jobs stay and no new one exists.
    perform pgque.stop_timetable();
    perform pgque.stop();

    -- cron.schedule() runs jobs in cron.database_name, which is this database
    -- (the extension can only be created there); schedule_in_database() says
    -- so explicitly where it exists and may be called.
    v_in_database := pg_catalog.to_regprocedure('cron.schedule_in_database(text,text,text,text,text,boolean)');
    if v_in_database is not null
       and not pg_catalog.has_function_privilege(v_in_database, 'execute') then
        v_in_database := null;
    end if;
    for v_job in select * from pgque._cron_jobs(v_version) loop
        if v_in_database is not null then
            v_id := cron.schedule_in_database(v_job.job_name, v_job.schedule, v_job.command,
                                              pg_catalog.current_database());
        else
            v_id := cron.schedule(v_job.job_name, v_job.schedule, v_job.command);
        end if;
        v_ids := v_ids || pg_catalog.jsonb_build_object(v_job.job_name, v_id);
    end loop;

    update pgque.config
       set ticker_job_id = (v_ids ->> 'pgque_ticker')::bigint,
           maint_job_id = (v_ids ->> 'pgque_maint')::bigint,
           scheduler = 'pg_cron'
    returning tick_period_ms into v_period;
    raise notice 'pgque started: ticker=% (% ticks/sec), retry_events=%, maint=%, rotate_step2=%, vacuum=%',
        v_ids ->> 'pgque_ticker', pgque._tick_rate_text(v_period), v_ids ->> 'pgque_retry_events',
        v_ids ->> 'pgque_maint', v_ids ->> 'pgque_rotate_step2', v_ids ->> 'pgque_vacuum';
    -- pg_cron before 1.5 in background-worker mode waits for a running job
    -- before it looks at the jobs that follow it: with the minute-long ticker
    -- run, those start only when the run ends (measured with 1.4.2).
    if (select ticker.command from pgque._cron_jobs(v_version) ticker
         where ticker.job_name = 'pgque_ticker') like 'CALL pgque.ticker_loop_for(%'
       and pg_catalog.current_setting('cron.use_background_workers', true) = 'on' then
        raise warning 'pgque.start: pg_cron % runs jobs in background workers, and while pgque''s minute-long ticker run lasts its scheduler starts no other job: some jobs of each minute start only when that run ends, about 58 s later',
            v_version
            using hint = 'Set cron.use_background_workers = off (pg_cron connects through cron.host, e.g. the socket directory) or use pg_cron 1.5 or later.';
    end if;
    perform pgque.log_event('info', 'lifecycle', 'started', pg_catalog.jsonb_build_object(
        'scheduler', 'pg_cron', 'pg_cron_version', v_version, 'jobs', v_ids,
        'tick_period_ms', v_period));
end
$$;
comment on function pgque.start() is
    'Schedules pgque''s jobs in pg_cron in this database: ticker loop, retries, maint(), rotation step 2, VACUUM. Replaces earlier pgque jobs (pg_cron or pg_timetable).';

-- ---------------------------------------------------------------------
-- pg_timetable
-- ---------------------------------------------------------------------

-- Internal: whether the timetable schema and its job API are present (false
-- when not), raising when they are but cannot be trusted: pgque runs
-- their functions as its owner, so the schema must belong to that owner or
-- a superuser, and the job functions to the schema's owner.
create or replace function pgque._timetable_ready(i_starting boolean)
returns boolean language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_schema oid;
    v_owner oid;
    v_api text[] := case when i_starting then array['add_job', 'delete_job']
                         else array['delete_job'] end;
begin
    select oid, nspowner into v_schema, v_owner
      from pg_catalog.pg_namespace where nspname = 'timetable';
    if not found then
        return false;
    end if;
    if (select pg_catalog.count(distinct p.proname) from pg_catalog.pg_proc p
         where p.pronamespace = v_schema and p.proname = any (v_api))
       < pg_catalog.cardinality(v_api) then
        return false;
    end if;
    if v_owner <> (select r.oid from pg_catalog.pg_roles r where r.rolname = current_user)
       and not (select r.rolsuper from pg_catalog.pg_roles r where r.oid = v_owner) then
        raise exception 'untrusted pg_timetable schema owner: %', pg_catalog.pg_get_userbyid(v_owner)
            using detail = 'pgque:scheduler_untrusted';
    end if;
    if exists (select 1 from pg_catalog.pg_proc p
                where p.pronamespace = v_schema and p.proname = any (v_api)
                  and p.proowner <> v_owner) then
        raise exception 'untrusted pg_timetable API owner: % must be owned by timetable schema owner',
            pg_catalog.array_to_string(v_api, '/') using detail = 'pgque:scheduler_untrusted';
    end if;
    return true;
end
$$;

create or replace function pgque.stop_timetable()
returns void language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_name text;
begin
    -- Only when pg_timetable is the active scheduler; otherwise quietly nothing.
    if (select scheduler from pgque.config) is distinct from 'pg_timetable' then
        return;
    end if;
    -- Without the schema the jobs are gone with it.
    if pgque._timetable_ready(false) then
        foreach v_name in array pgque._job_names() loop
            perform timetable.delete_job(v_name);
        end loop;
    end if;
    update pgque.config set ticker_job_id = null, maint_job_id = null, scheduler = null;
    perform pgque.log_event('info', 'lifecycle', 'stopped', '{"scheduler": "pg_timetable"}');
end
$$;
comment on function pgque.stop_timetable() is
    'Removes pgque''s pg_timetable jobs when pg_timetable is the active scheduler; otherwise does nothing.';

create or replace function pgque.start_timetable(i_ticks_per_second integer default 10)
returns void language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_name text;
    v_job record;
    v_ids jsonb := '{}';
    v_vacuum text;
begin
    if not pgque._timetable_ready(true) then
        raise exception 'pg_timetable schema/API is not installed. Run pg_timetable against this database first, or use pgque.start() for pg_cron.'
            using detail = 'pgque:scheduler_missing';
    end if;
    if i_ticks_per_second is null or i_ticks_per_second < 1 or i_ticks_per_second > 1000
       or 1000 % i_ticks_per_second <> 0 then
        raise exception 'ticks_per_second must be an exact divisor of 1000 between 1 and 1000 (got %)',
            coalesce(i_ticks_per_second::text, 'NULL') using detail = 'pgque:invalid_argument';
    end if;

    -- Replaces pg_cron jobs and earlier pg_timetable jobs of the same names.
    perform pgque.stop();
    foreach v_name in array pgque._job_names() loop
        perform timetable.delete_job(v_name);
    end loop;
    update pgque.config set tick_period_ms = 1000 / i_ticks_per_second;

    select 'VACUUM (SKIP_LOCKED) ' || pg_catalog.string_agg(t.name, ', ' order by t.n)
      into v_vacuum
      from pgque.maint_tables_to_vacuum() with ordinality as t(name, n);
    -- add_job creates autonomous tasks (outside a transaction), which the
    -- committing ticker loop and VACUUM need; one statement per job.
    for v_job in
        select * from (values
            ('pgque_ticker', '@every 1 second', 'CALL pgque.ticker_loop()'),
            ('pgque_retry_events', '@every 30 seconds', 'SELECT pgque.maint_retry_events()'),
            ('pgque_maint', '@every 30 seconds', 'CALL pgque.run_maint()'),
            ('pgque_rotate_step2', '@every 10 seconds', 'SELECT pgque.maint_rotate_tables_step2()'),
            ('pgque_vacuum', '@every 30 seconds', v_vacuum)
        ) as j(job_name, schedule, command)
    loop
        v_ids := v_ids || pg_catalog.jsonb_build_object(v_job.job_name, timetable.add_job(
            job_name => v_job.job_name, job_schedule => v_job.schedule,
            job_command => v_job.command, job_max_instances => 1));
    end loop;

    update pgque.config
       set ticker_job_id = (v_ids ->> 'pgque_ticker')::bigint,
           maint_job_id = (v_ids ->> 'pgque_maint')::bigint,
           scheduler = 'pg_timetable';
    raise notice 'pgque started with pg_timetable: ticker=% (% ticks/sec), retry_events=%, maint=%, rotate_step2=%, vacuum=%',
        v_ids ->> 'pgque_ticker', i_ticks_per_second, v_ids ->> 'pgque_retry_events',
        v_ids ->> 'pgque_maint', v_ids ->> 'pgque_rotate_step2', v_ids ->> 'pgque_vacuum';
    perform pgque.log_event('info', 'lifecycle', 'started', pg_catalog.jsonb_build_object(
        'scheduler', 'pg_timetable', 'jobs', v_ids, 'tick_period_ms', 1000 / i_ticks_per_second));
end
$$;
comment on function pgque.start_timetable(integer) is
    'Schedules pgque''s jobs in pg_timetable (schema timetable, trusted owner) and sets the tick period to 1000 / i_ticks_per_second ms. Replaces earlier pgque jobs.';

-- ---------------------------------------------------------------------
-- Status and uninstall
-- ---------------------------------------------------------------------

create or replace function pgque.status()
returns table (component text, status text, detail text) language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_cfg pgque.config;
    v_scheduler text;
    v_rate text;
begin
    select * into v_cfg from pgque.config;
    v_scheduler := coalesce(v_cfg.scheduler, 'manual');
    v_rate := pgque._tick_rate_text(v_cfg.tick_period_ms);

    return query values
        ('postgresql', 'info', pg_catalog.version()),
        ('pgque', 'info', pgque.version()),
        ('scheduler', v_scheduler,
         pg_catalog.format('ticker_job_id=%s, maint_job_id=%s, tick_period_ms=%s (%s ticks/sec)',
             coalesce(v_cfg.ticker_job_id::text, 'NULL'), coalesce(v_cfg.maint_job_id::text, 'NULL'),
             v_cfg.tick_period_ms, v_rate)),
        ('ticker',
         case when v_cfg.ticker_job_id is not null then 'scheduled' else 'stopped' end,
         case when v_cfg.ticker_job_id is not null then
             pg_catalog.format('scheduler=%s, job_id=%s, tick_period_ms=%s (%s ticks/sec)',
                 v_scheduler, v_cfg.ticker_job_id, v_cfg.tick_period_ms, v_rate)
         else pg_catalog.format('not scheduled (tick_period_ms=%s)', v_cfg.tick_period_ms) end),
        ('maintenance',
         case when v_cfg.maint_job_id is not null then 'scheduled' else 'stopped' end,
         case when v_cfg.maint_job_id is not null then
             pg_catalog.format('scheduler=%s, job_id=%s', v_scheduler, v_cfg.maint_job_id)
         else 'not scheduled' end);
    if not exists (select 1 from pg_catalog.pg_extension where extname = 'pg_cron') then
        return query values ('pg_cron', 'unavailable',
            'use pgque.start_timetable() for pg_timetable, or call pgque.ticker() / pgque.maint() manually');
    end if;
    if not exists (select 1 from pg_catalog.pg_namespace where nspname = 'timetable') then
        return query values ('pg_timetable', 'unavailable',
            'run pg_timetable against this database, then call pgque.start_timetable()');
    end if;
    return query
        select 'queues', 'info', pg_catalog.format('%s queues configured', pg_catalog.count(*))
          from pgque.queue
        union all
        select 'consumers', 'info', pg_catalog.format('%s active subscriptions', pg_catalog.count(*))
          from pgque.subscription
        union all
        -- Who ticks now, whatever runs it (pg_cron's ticker_loop, the SDK's
        -- Ticker, pgque ticker): the ticker lease.
        select 'ticker_leader', case when l.active then 'leading' else 'none' end,
               case when l.active then pg_catalog.format(
                        'application_name=%s, pid=%s, client_addr=%s, since=%s, renewed=%s',
                        coalesce(nullif(l.application_name, ''), '(none)'), l.pid,
                        coalesce(pg_catalog.host(l.client_addr), 'local'),
                        l.since, l.renewed)
                    else 'no ticker leads: nothing runs ticker_loop, a Ticker or pgque ticker' end
          from pgque.ticker_leader() l;
end
$$;
comment on function pgque.status() is
    'Diagnostic rows (component, status, detail): server and pgque versions, scheduler, ticker and maintenance jobs, missing schedulers, queue and subscription counts, and who leads ticking (ticker_leader).';

-- Runs as its caller, who must own schema pgque (or be a superuser): the
-- drop needs that anyway, and the check gives a clear error first.
create or replace function pgque.uninstall()
returns void language plpgsql security invoker set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_owner oid;
    v_messages text;
begin
    select nspowner into v_owner from pg_catalog.pg_namespace where nspname = 'pgque';
    if not (select r.rolsuper from pg_catalog.pg_roles r where r.rolname = current_user)
       and not pg_catalog.pg_has_role(current_user, v_owner, 'usage') then
        raise exception 'pgque.uninstall: only the owner of schema pgque (%) or a superuser may uninstall pgque, not %',
            pg_catalog.pg_get_userbyid(v_owner), current_user
            using errcode = 'insufficient_privilege', detail = 'pgque:not_owner';
    end if;
    -- Quiet: stop()'s notices about jobs that do not exist and the
    -- cascade's list of every dropped object.
    v_messages := pg_catalog.current_setting('client_min_messages');
    perform pg_catalog.set_config('client_min_messages', 'warning', true);
    -- Jobs of either scheduler first: left behind, they would call
    -- functions that no longer exist. A failure here aborts the uninstall.
    perform pgque.stop();
    perform pgque.log_event('info', 'lifecycle', 'uninstalled', '{}');
    drop schema pgque cascade;
    perform pg_catalog.set_config('client_min_messages', v_messages, true);
    raise notice 'pgque uninstalled. Run DROP ROLE IF EXISTS pgque_reader, pgque_writer, pgque_admin; manually if needed.';
end
$$;
comment on function pgque.uninstall() is
    'Owner only: removes pgque''s scheduler jobs, then drops schema pgque with every queue and event. The roles stay.';

-- file: functions/observability.sql
-- Observability: queue and consumer figures, health checks, OpenTelemetry
-- gauges, rates over time. Everything is computed from pgque's own tables
-- when asked; nothing here writes, so monitoring adds no churn.
--
-- Event counts come from the queues' event sequences (at the ticks, or now).
-- A sequence also counts rolled-back inserts, retried events moved back and
-- force_tick's jump (2 x ticker_max_count + 1000), and not the first event
-- after the queue was created: these counts are estimates. Ages of pending
-- events are read from tick times: an upper bound within one tick interval.

-- Internal: the queue row by name, or an error naming the caller.
create or replace function pgque._observed_queue(i_caller text, i_queue_name text)
returns pgque.queue language plpgsql stable as $$
begin
    if i_queue_name is null then
        raise exception '%: queue name must not be null', i_caller
            using detail = 'pgque:invalid_argument';
    end if;
    return pgque._queue_row(i_queue_name);
end
$$;

-- Internal: "12.3 s", for details.
create or replace function pgque._seconds_text(i_interval interval)
returns text language sql immutable as $$
    select coalesce(pg_catalog.round(pg_catalog.date_part('epoch', i_interval)::numeric, 1)::text || ' s',
                    'never')
$$;

-- Internal: one row per subscription with its position and what it has
-- still to consume. pending_events counts ticked (deliverable) events;
-- oldest_pending is the time of the last tick before the first of them
-- (the oldest pending event arrived after it), NULL when none is pending.
create or replace function pgque._consumer_state()
returns table (
    queue_id integer, queue_name text, consumer_name text, sub_id integer,
    position_tick bigint, position_seq bigint, pending_events bigint,
    oldest_pending timestamptz, last_active timestamptz,
    batch_id bigint, batch_events bigint)
language sql stable
as $$
    select q.queue_id, q.queue_name, c.co_name, s.sub_id,
           s.sub_last_tick, pos.tick_event_seq,
           greatest(coalesce(newest.tick_event_seq - pos.tick_event_seq, 0), 0),
           case when newest.tick_event_seq > pos.tick_event_seq then before_new.tick_time end,
           s.sub_active, s.sub_batch,
           case when s.sub_batch is not null
                then greatest(nxt.tick_event_seq - pos.tick_event_seq, 0) end
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
      -- Each tick by its whole key (see get_batch_info).
      left join lateral (select * from pgque.tick t
                          where t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
                         offset 0) pos on true
      left join lateral (select * from pgque.tick t
                          where t.tick_queue = s.sub_queue and t.tick_id = s.sub_next_tick
                         offset 0) nxt on true
      left join lateral (
          select t.tick_event_seq from pgque.tick t
           where t.tick_queue = s.sub_queue
           order by t.tick_id desc limit 1) newest on true
      left join lateral (
          select t.tick_id from pgque.tick t
           where t.tick_queue = s.sub_queue and t.tick_id > s.sub_last_tick
             and t.tick_event_seq > pos.tick_event_seq
           order by t.tick_id limit 1) first_new on true
      left join lateral (
          select t.tick_time from pgque.tick t
           where t.tick_queue = s.sub_queue and t.tick_id < first_new.tick_id
           order by t.tick_id desc limit 1) before_new on true
$$;

-- Internal: ev_time of the oldest event no tick covers yet (one index probe:
-- the first first-delivery event, by txid, started after the latest tick's
-- snapshot). Retried events keep their original ev_time and are left out.
create or replace function pgque._unticked_since(q pgque.queue)
returns timestamptz language plpgsql stable as $$
declare
    v_xmax xid8;
    v_time timestamptz;
begin
    select pg_catalog.pg_snapshot_xmax(t.tick_snapshot) into v_xmax
      from pgque.tick t where t.tick_queue = q.queue_id order by t.tick_id desc limit 1;
    if not found then
        return null;
    end if;
    execute pg_catalog.format(
        'select ev_time from %s where ev_txid >= $1 and ev_retry is null order by ev_txid limit 1',
        pgque._event_table_name(q, null))
       into v_time using v_xmax;
    return v_time;
end
$$;

-- Internal: events per second over about the last minute: from the newest
-- tick at least a minute old (else the oldest tick) to the sequence now.
create or replace function pgque._event_rate(i_queue_id integer, i_seq_now bigint)
returns numeric language plpgsql stable as $$
declare
    v_time timestamptz;
    v_seq bigint;
    v_seconds numeric;
begin
    select t.tick_time, t.tick_event_seq into v_time, v_seq from pgque.tick t
     where t.tick_queue = i_queue_id and t.tick_time <= pg_catalog.now() - interval '1 minute'
     order by t.tick_id desc limit 1;
    if not found then
        select t.tick_time, t.tick_event_seq into v_time, v_seq from pgque.tick t
         where t.tick_queue = i_queue_id order by t.tick_id limit 1;
    end if;
    v_seconds := extract(epoch from pg_catalog.now() - v_time);
    if v_seconds is null or v_seconds <= 0 then
        return 0;
    end if;
    return pg_catalog.round(greatest(i_seq_now - v_seq, 0) / v_seconds, 3);
end
$$;

create or replace function pgque.queue_stats()
returns table (
    queue_name text, queue_id integer, depth bigint, oldest_msg_age interval,
    consumers integer, events_per_sec numeric, cur_table integer,
    rotation_age interval, rotation_period interval, ticker_paused boolean,
    last_tick_time timestamptz, last_tick_id bigint, dlq_count bigint)
language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    return query
    with st as materialized (select * from pgque._consumer_state()),
    per_queue as (
        select st.queue_id, pg_catalog.count(*) as n, pg_catalog.min(st.position_seq) as min_seq,
               pg_catalog.min(st.oldest_pending) as oldest_pending
          from st group by st.queue_id)
    select q.queue_name, q.queue_id,
           case when pq.n > 0 then greatest(seq.now - pq.min_seq, 0) else 0 end::bigint,
           case when pq.n > 0
                then pg_catalog.now() - least(pq.oldest_pending, pgque._unticked_since(q)) end,
           coalesce(pq.n, 0)::integer,
           pgque._event_rate(q.queue_id, seq.now),
           q.queue_cur_table, pg_catalog.now() - q.queue_switch_time, q.queue_rotation_period,
           q.queue_ticker_paused, newest.tick_time, newest.tick_id,
           (select pg_catalog.count(*) from pgque.dead_letter d where d.dl_queue_id = q.queue_id)
      from pgque.queue q
      cross join lateral (select pgque._event_seq_now(q.queue_id) as now) seq
      left join per_queue pq on pq.queue_id = q.queue_id
      left join lateral (
          select t.tick_id, t.tick_time from pgque.tick t
           where t.tick_queue = q.queue_id order by t.tick_id desc limit 1) newest on true
     order by q.queue_name;
end
$$;
comment on function pgque.queue_stats() is
    'One row per queue: estimated depth and oldest pending age for its slowest consumer, consumers, event rate over the last minute, rotation state, last tick, dead letters.';

create or replace function pgque.consumer_stats()
returns table (
    queue_name text, consumer_name text, lag interval, pending_events bigint,
    last_batch_start timestamptz, batch_active boolean, batch_id bigint)
language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    return query
    select st.queue_name, st.consumer_name,
           coalesce(pg_catalog.now() - st.oldest_pending, interval '0'),
           st.pending_events, st.last_active, st.batch_id is not null, st.batch_id
      from pgque._consumer_state() st
     order by st.queue_name, st.consumer_name;
end
$$;
comment on function pgque.consumer_stats() is
    'One row per subscription: lag (age of the oldest ticked event not yet finished, 0 when caught up), ticked pending events, last batch activity, open batch.';

-- Internal: health of the ticker or maintenance job (i_kind 'ticker' or
-- 'maint') as recorded in config and, for pg_cron, in cron.job and
-- cron.job_run_details. Without a job, judged by evidence: for the ticker,
-- whether a ticker leads (the ticker lease) or queues are late (i_late_queues,
-- from ticker_running); for maintenance, whether its work is overdue.
create or replace function pgque._job_health(
    i_kind text, i_late_queues integer, out o_status text, out o_detail text)
language plpgsql stable
as $$
declare
    v_cfg pgque.config;
    v_job_id bigint;
    v_leader record;
    v_active boolean;
    v_run_status text;
    v_run_message text;
    v_run_start timestamptz;
    v_overdue text[];
    v_what text := case i_kind when 'ticker' then 'ticker' else 'maintenance' end;
begin
    select * into v_cfg from pgque.config;
    v_job_id := case i_kind when 'ticker' then v_cfg.ticker_job_id else v_cfg.maint_job_id end;

    if v_job_id is null and i_kind = 'ticker' then
        select * into v_leader from pgque.ticker_leader() l;
        if v_leader.active then
            o_status := 'ok';
            o_detail := pg_catalog.format(
                'no scheduled ticker job; a ticker leads: %s (pid %s%s) since %s',
                coalesce(nullif(v_leader.application_name, ''), 'no application_name'),
                v_leader.pid,
                coalesce(', ' || pg_catalog.host(v_leader.client_addr), ''),
                pg_catalog.to_char(v_leader.since, 'YYYY-MM-DD HH24:MI:SS TZ'));
        elsif i_late_queues > 0 then
            o_status := 'warning';
            o_detail := pg_catalog.format(
                'no ticker job is scheduled, no ticker leads, and %s %s'
                || ' late: run pgque.start() or pgque.start_timetable(), run a pgque'
                || ' ticker, or call pgque.ticker() yourself', i_late_queues,
                case when i_late_queues = 1 then 'queue is' else 'queues are' end);
        else
            o_status := 'ok';
            o_detail := 'no scheduled ticker job and no ticker leads;'
                || ' every queue ticked on time';
        end if;
        return;
    end if;
    if v_job_id is null then
        -- Work maint() does that has waited more than two minutes.
        select pg_catalog.array_remove(array[
            (select pg_catalog.format('%s retries due since %s', pg_catalog.count(*), pg_catalog.min(r.ev_retry_after))
               from pgque.retry_queue r
              where r.ev_retry_after < pg_catalog.now() - interval '2 minutes' having pg_catalog.count(*) > 0),
            (select pg_catalog.format('%s delayed messages due since %s', pg_catalog.count(*),
                                      pg_catalog.min(d.de_deliver_at))
               from pgque.delayed_events d
              where d.de_deliver_at < pg_catalog.now() - interval '2 minutes' having pg_catalog.count(*) > 0),
            (select pg_catalog.format('rotation step 2 pending on %s queues', pg_catalog.count(*))
               from pgque.queue q
              where q.queue_switch_step2 is null
                and q.queue_switch_time < pg_catalog.now() - interval '2 minutes' having pg_catalog.count(*) > 0)],
            null) into v_overdue;
        if pg_catalog.cardinality(v_overdue) > 0 then
            o_status := 'warning';
            o_detail := 'no maintenance job is scheduled and maintenance is overdue ('
                || pg_catalog.array_to_string(v_overdue, '; ')
                || '): run pgque.start() or pgque.start_timetable(), or call pgque.maint()'
                || ' about every 30 seconds';
        else
            o_status := 'ok';
            o_detail := 'no scheduled maintenance job; nothing overdue (retries, delayed'
                || ' messages, rotation step 2)';
        end if;
        return;
    end if;

    if v_cfg.scheduler is distinct from 'pg_cron' then
        o_status := 'ok';
        o_detail := pg_catalog.format('job_id=%s (%s)', v_job_id, coalesce(v_cfg.scheduler, 'manual'));
        return;
    end if;
    if not exists (select 1 from pg_catalog.pg_extension where extname = 'pg_cron') then
        o_status := 'critical';
        o_detail := pg_catalog.format(
            '%s job %s is recorded but pg_cron is not installed: run pgque.stop(), then schedule again',
            v_what, v_job_id);
        return;
    end if;
    select j.active into v_active from cron.job j where j.jobid = v_job_id;
    if not found then
        o_status := 'critical';
        o_detail := pg_catalog.format(
            '%s job %s no longer exists in cron.job: run pgque.start() again', v_what, v_job_id);
        return;
    end if;
    if not v_active then
        o_status := 'critical';
        o_detail := pg_catalog.format('%s job %s is inactive in cron.job', v_what, v_job_id);
        return;
    end if;
    if pg_catalog.to_regclass('cron.job_run_details') is not null then
        select r.status, r.return_message, r.start_time
          into v_run_status, v_run_message, v_run_start
          from cron.job_run_details r where r.jobid = v_job_id
         order by r.runid desc limit 1;
    end if;
    if v_run_status = 'failed' then
        o_status := 'warning';
        o_detail := pg_catalog.format('last run of %s job %s (started %s) failed: %s',
                                      v_what, v_job_id, v_run_start, v_run_message);
    else
        o_status := 'ok';
        o_detail := pg_catalog.format('job_id=%s (pg_cron)', v_job_id)
            || case when v_run_status is null then ', no run yet'
                    else pg_catalog.format(', last run %s at %s', v_run_status, v_run_start) end;
    end if;
end
$$;

create or replace function pgque.queue_health()
returns table (queue_name text, check_name text, status text, detail text) language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q pgque.queue;
    c record;
    v_tick pgque.tick;
    v_age interval;
    v_wait interval;
    v_over interval;
    v_lag interval;
    v_count bigint;
    v_newest timestamptz;
    v_late integer := 0;
begin
    -- ticker_running: a queue with events waiting ticks within ticker_max_lag.
    -- Overdue by more than 10 s (one missed loop, pg_cron 1.4's gap between
    -- minute runs) is a warning, by more than a minute critical. A queue with
    -- no event waiting is healthy however old its last tick: nothing is late.
    for q in select * from pgque.queue order by queue_name loop
        queue_name := q.queue_name;
        check_name := 'ticker_running';
        select * into v_tick from pgque.tick t
         where t.tick_queue = q.queue_id order by t.tick_id desc limit 1;
        v_age := pg_catalog.now() - v_tick.tick_time;
        if q.queue_ticker_paused then
            status := 'ok';
            detail := 'ticker paused (ticker_paused = true)';
        elsif q.queue_external_ticker then
            status := 'ok';
            detail := 'external ticker; last tick ' || pgque._seconds_text(v_age) || ' ago';
        elsif v_tick.tick_id is null then
            status := 'critical';
            detail := 'never ticked';
        else
            v_wait := pg_catalog.now() - pgque._unticked_since(q);
            v_over := v_wait - q.queue_ticker_max_lag;
            status := case when v_over is null or v_over <= interval '10 seconds' then 'ok'
                           when v_over <= interval '60 seconds' then 'warning'
                           else 'critical' end;
            detail := pg_catalog.format('last tick %s ago (tick %s); ',
                                        pgque._seconds_text(v_age), v_tick.tick_id)
                || case when v_wait is null then 'no event waiting for a tick'
                        else 'oldest event waiting for a tick: ' || pgque._seconds_text(v_wait) end
                || case when status = 'ok' then ''
                        else '; is a ticker running? see pgque.status()' end;
            if status <> 'ok' then
                v_late := v_late + 1;
            end if;
        end if;
        return next;
    end loop;

    -- consumer_lag:<name>: the age of the oldest ticked event the consumer
    -- has not finished, against the rotation period (a consumer that far
    -- behind keeps old event tables from being recycled).
    for c in
        select st.*, qu.queue_rotation_period as rotation_period
          from pgque._consumer_state() st join pgque.queue qu on qu.queue_id = st.queue_id
         order by st.queue_name, st.consumer_name
    loop
        queue_name := c.queue_name;
        check_name := 'consumer_lag:' || c.consumer_name;
        v_lag := coalesce(pg_catalog.now() - c.oldest_pending, interval '0');
        status := case when c.pending_events = 0 or c.rotation_period is null then 'ok'
                       when v_lag > c.rotation_period then 'critical'
                       when v_lag > c.rotation_period / 2 then 'warning'
                       else 'ok' end;
        detail := case when c.pending_events = 0 then 'caught up'
                       else pg_catalog.format('%s events pending, the oldest for about %s',
                                              c.pending_events, pgque._seconds_text(v_lag)) end
            || case when c.batch_id is null then ''
                    else pg_catalog.format('; batch %s open for %s', c.batch_id,
                                           pgque._seconds_text(pg_catalog.now() - c.last_active)) end;
        return next;
    end loop;

    -- rotation_health: step 2 should follow within a maintenance round or
    -- two; a rotation far beyond its period is held back by a lagging
    -- consumer or by maint() not running.
    for q in select * from pgque.queue order by queue_name loop
        queue_name := q.queue_name;
        check_name := 'rotation_health';
        v_age := pg_catalog.now() - q.queue_switch_time;
        if q.queue_rotation_period is null then
            status := 'ok';
            detail := 'rotation disabled (rotation_period is NULL)';
        elsif q.queue_switch_step2 is null then
            status := case when v_age > interval '2 minutes' then 'warning' else 'ok' end;
            detail := pg_catalog.format('rotation step 2 pending for %s (table %s)',
                                        pgque._seconds_text(v_age), q.queue_cur_table)
                || case when status = 'ok' then ''
                        else '; is maint() or maint_rotate_tables_step2() running?' end;
        else
            status := case when v_age > 4 * q.queue_rotation_period then 'critical'
                           when v_age > 2 * q.queue_rotation_period then 'warning'
                           else 'ok' end;
            detail := pg_catalog.format('last rotation %s ago (rotation_period %s, table %s)',
                                        pgque._seconds_text(v_age), q.queue_rotation_period,
                                        q.queue_cur_table)
                || case when status = 'ok' then ''
                        else '; held back by a lagging consumer, or maint() is not running' end;
        end if;
        return next;
    end loop;

    -- dlq_health: any dead letter needs a look (replay or purge).
    for q in select * from pgque.queue order by queue_name loop
        queue_name := q.queue_name;
        check_name := 'dlq_health';
        select pg_catalog.count(*), pg_catalog.max(d.dl_time) into v_count, v_newest
          from pgque.dead_letter d where d.dl_queue_id = q.queue_id;
        status := case when v_count > 0 then 'warning' else 'ok' end;
        detail := v_count || ' dead letter events'
            || coalesce(', newest at ' || v_newest::text, '');
        return next;
    end loop;

    queue_name := 'system';
    check_name := 'pg_cron_ticker';
    select h.o_status, h.o_detail into status, detail from pgque._job_health('ticker', v_late) h;
    return next;
    check_name := 'pg_cron_maint';
    select h.o_status, h.o_detail into status, detail from pgque._job_health('maint', v_late) h;
    return next;
end
$$;
comment on function pgque.queue_health() is
    'Health checks (ok, warning, critical) per queue: ticker_running, consumer_lag:<consumer>, rotation_health, dlq_health; then system rows pg_cron_ticker and pg_cron_maint.';

create or replace function pgque.otel_metrics()
returns table (metric_name text, metric_type text, value numeric, labels jsonb) language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
begin
    return query
    with qs as materialized (select * from pgque.queue_stats()),
    cs as materialized (select * from pgque.consumer_stats())
    select 'pgque.queue.depth', 'gauge', qs.depth::numeric,
           pg_catalog.jsonb_build_object('queue', qs.queue_name) from qs
    union all
    select 'pgque.queue.oldest_message_age_seconds', 'gauge',
           coalesce(pg_catalog.round(extract(epoch from qs.oldest_msg_age), 3), 0),
           pg_catalog.jsonb_build_object('queue', qs.queue_name) from qs
    union all
    select 'pgque.consumer.lag_seconds', 'gauge', pg_catalog.round(extract(epoch from cs.lag), 3),
           pg_catalog.jsonb_build_object('queue', cs.queue_name, 'consumer', cs.consumer_name) from cs
    union all
    select 'pgque.consumer.pending_events', 'gauge', cs.pending_events::numeric,
           pg_catalog.jsonb_build_object('queue', cs.queue_name, 'consumer', cs.consumer_name) from cs
    union all
    select 'pgque.message.dead_lettered', 'gauge', qs.dlq_count::numeric,
           pg_catalog.jsonb_build_object('queue', qs.queue_name) from qs
    union all
    select 'pgque.queue.throughput', 'gauge', coalesce(qs.events_per_sec, 0),
           pg_catalog.jsonb_build_object('queue', qs.queue_name) from qs;
end
$$;
comment on function pgque.otel_metrics() is
    'OpenTelemetry-style gauges (metric_name, metric_type, value, labels): queue depth, oldest message age, consumer lag and pending events, dead letters, throughput.';

-- Internal: checks a period and bucket size and returns the buckets: the
-- first bucket's start (Unix seconds, a multiple of the bucket size), the
-- size in seconds and how many buckets reach up to now.
create or replace function pgque._buckets(
    i_caller text, i_period interval, i_bucket_size interval,
    out o_first numeric, out o_size numeric, out o_count integer)
language plpgsql stable
as $$
declare
    v_now numeric := extract(epoch from pg_catalog.now());
    v_count numeric;
begin
    if i_bucket_size is null or i_bucket_size <= interval '0' then
        raise exception '%: bucket size must be > 0, got %', i_caller,
            coalesce(i_bucket_size::text, 'NULL') using detail = 'pgque:invalid_argument';
    end if;
    if i_period is null or i_period <= interval '0' then
        raise exception '%: period must be > 0, got %', i_caller, coalesce(i_period::text, 'NULL')
            using detail = 'pgque:invalid_argument';
    end if;
    o_size := extract(epoch from i_bucket_size);
    o_first := pg_catalog.floor((v_now - extract(epoch from i_period)) / o_size) * o_size;
    v_count := pg_catalog.floor((v_now - o_first) / o_size) + 1;
    if v_count > 10000 then
        raise exception '%: a period of % in buckets of % gives % buckets (at most 10000)',
            i_caller, i_period, i_bucket_size, v_count using detail = 'pgque:invalid_argument';
    end if;
    o_count := v_count;
end
$$;

create or replace function pgque.throughput(
    i_queue_name text, i_period interval, i_bucket_size interval)
returns table (bucket_start timestamptz, events bigint, events_per_sec numeric) language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q pgque.queue;
    v_size numeric;
begin
    if i_bucket_size is null or i_bucket_size <= interval '0' then
        raise exception 'throughput: bucket size must be > 0, got %',
            coalesce(i_bucket_size::text, 'NULL') using detail = 'pgque:invalid_argument';
    end if;
    q := pgque._observed_queue('throughput', i_queue_name);
    v_size := extract(epoch from i_bucket_size);
    -- The ticks of the window in id order; each counts the events since the
    -- window's previous tick (the first counts nothing). A tick's bucket is
    -- its time rounded down to a multiple of the bucket size since the Unix
    -- epoch. Buckets without such a tick are left out.
    return query
    with deltas as (
        select t.tick_time,
               t.tick_event_seq - pg_catalog.lag(t.tick_event_seq) over (order by t.tick_id) as delta
          from pgque.tick t
         where t.tick_queue = q.queue_id and t.tick_time >= pg_catalog.now() - i_period)
    select pg_catalog.to_timestamp(pg_catalog.floor(extract(epoch from d.tick_time) / v_size) * v_size),
           pg_catalog.sum(d.delta)::bigint,
           pg_catalog.sum(d.delta) / v_size
      from deltas d
     where d.delta is not null
     group by 1
     order by 1;
end
$$;
comment on function pgque.throughput(text, interval, interval) is
    'Events per bucket over the last i_period, from the event sequence of consecutive ticks in the window; buckets aligned to the Unix epoch, only those holding ticks, ascending. Estimates; history reaches back to the oldest tick kept.';

create or replace function pgque.error_rate(
    i_queue_name text, i_period interval, i_bucket_size interval)
returns table (bucket_start timestamptz, retries bigint, dead_letters bigint) language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q pgque.queue;
    b record;
    v_from timestamptz;
    v_lower xid8;
    v_tick bigint;
begin
    q := pgque._observed_queue('error_rate', i_queue_name);
    select * into b from pgque._buckets('error_rate', i_period, i_bucket_size);
    v_from := pg_catalog.to_timestamp(b.o_first);
    -- Retried events moved back into the queue during the period have a
    -- txid above the snapshot xmin of the newest tick before it.
    select pg_catalog.pg_snapshot_xmin(t.tick_snapshot), t.tick_id into v_lower, v_tick
      from pgque.tick t where t.tick_queue = q.queue_id and t.tick_time <= v_from
     order by t.tick_id desc limit 1;
    if not found then
        select pg_catalog.pg_snapshot_xmin(t.tick_snapshot), t.tick_id into v_lower, v_tick
          from pgque.tick t where t.tick_queue = q.queue_id order by t.tick_id limit 1;
    end if;

    return query execute pg_catalog.format($sql$
    with movers as (
        -- One group per moving transaction (maint_retry_events / maint).
        select e.ev_txid as x, pg_catalog.count(*) as n from %s e
         where e.ev_txid >= $1 and e.ev_retry is not null
         group by e.ev_txid),
    merged as (
        select m.x, 1 as kind, m.n, null::timestamptz as tick_time from movers m
        union all
        select pg_catalog.pg_snapshot_xmax(t.tick_snapshot), 0, null, t.tick_time
          from pgque.tick t where t.tick_queue = $2 and t.tick_id >= $3),
    placed as (
        -- A moved event re-entered at the first tick whose snapshot xmax is
        -- above its txid (ties sort the tick first: xmax itself is not visible).
        select mg.kind, mg.n,
               pg_catalog.min(mg.tick_time) over (order by mg.x, mg.kind
                                       rows between current row and unbounded following) as at
          from merged mg),
    retried as (
        select coalesce(p.at, pg_catalog.now()) as at, p.n from placed p where p.kind = 1
        union all
        -- Still waiting in retry_queue: counted at their due time.
        select r.ev_retry_after, 1 from pgque.retry_queue r
         where r.ev_queue = $2 and r.ev_retry_after <= pg_catalog.now()),
    by_bucket as (
        select pg_catalog.floor((extract(epoch from r.at) - $4) / $5)::integer as n,
               pg_catalog.sum(r.n) as retries, 0 as dead
          from retried r group by 1
        union all
        select pg_catalog.floor((extract(epoch from d.dl_time) - $4) / $5)::integer, 0, pg_catalog.count(*)
          from pgque.dead_letter d
         where d.dl_queue_id = $2 and d.dl_time >= pg_catalog.to_timestamp($4)
         group by 1)
    select pg_catalog.to_timestamp($4 + i * $5), coalesce(pg_catalog.sum(bb.retries), 0)::bigint,
           coalesce(pg_catalog.sum(bb.dead), 0)::bigint
      from pg_catalog.generate_series(0, $6 - 1) i
      left join by_bucket bb on bb.n = i
     group by i order by i
    $sql$, pgque._event_table_name(q, null))
    using v_lower, q.queue_id, v_tick, b.o_first, b.o_size, b.o_count;
end
$$;
comment on function pgque.error_rate(text, interval, interval) is
    'Per bucket over the last i_period: retries (nacked events, counted when they re-entered the queue or fell due) and dead letters (by dl_time). Scans the period''s events of the queue.';

create or replace function pgque.in_flight(i_queue_name text)
returns table (consumer_name text, batch_id bigint, batch_age interval, estimated_events bigint) language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q pgque.queue;
begin
    q := pgque._observed_queue('in_flight', i_queue_name);
    return query
    select st.consumer_name, st.batch_id, pg_catalog.now() - st.last_active, st.batch_events
      from pgque._consumer_state() st
     where st.queue_id = q.queue_id and st.batch_id is not null
     order by st.consumer_name;
end
$$;
comment on function pgque.in_flight(text) is
    'The queue''s open batches: consumer, batch id, time since it was opened, estimated events in it.';

create or replace function pgque.stuck_consumers(i_threshold interval default '1 hour')
returns table (queue_name text, consumer_name text, lag interval, last_active timestamptz) language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
begin
    if i_threshold is null or i_threshold < interval '0' then
        raise exception 'stuck_consumers: threshold must be >= 0, got %',
            coalesce(i_threshold::text, 'NULL') using detail = 'pgque:invalid_argument';
    end if;
    return query
    select st.queue_name, st.consumer_name, coalesce(pg_catalog.now() - st.oldest_pending, interval '0'),
           st.last_active
      from pgque._consumer_state() st
     where (st.pending_events > 0 or st.batch_id is not null)
       and pg_catalog.now() - st.last_active > i_threshold
     order by st.queue_name, st.consumer_name;
end
$$;
comment on function pgque.stuck_consumers(interval) is
    'Consumers with events to process (or an open batch) that have not opened or finished a batch for longer than i_threshold.';

create or replace function pgque.latency_percentiles(
    queue_name text, consumer_name text, period interval)
returns table (p50 interval, p95 interval, p99 interval) language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    c_sample constant integer := 10000;
    c_slices constant integer := 100;
    q pgque.queue;
    v_sub_id integer;
    v_position bigint;
    v_since timestamptz;
    v_ticks bigint[];
    v_xmaxes xid8[];
    v_slices integer;
    v_per_slice integer;
    v_part interval[];
    v_all interval[] := '{}';
    v_sql text;
    i integer;
begin
    q := pgque._observed_queue('latency_percentiles', latency_percentiles.queue_name);
    if latency_percentiles.consumer_name is null then
        raise exception 'latency_percentiles: consumer name must not be null'
            using detail = 'pgque:invalid_argument';
    end if;
    if latency_percentiles.period is null or latency_percentiles.period <= interval '0' then
        raise exception 'latency_percentiles: period must be > 0, got %',
            coalesce(latency_percentiles.period::text, 'NULL') using detail = 'pgque:invalid_argument';
    end if;
    select s.sub_id, s.sub_last_tick into v_sub_id, v_position
      from pgque.subscription s join pgque.consumer co on co.co_id = s.sub_consumer
     where s.sub_queue = q.queue_id and co.co_name = latency_percentiles.consumer_name;
    if not found then
        raise exception 'Not subscriber to queue: %/%', q.queue_name, latency_percentiles.consumer_name
            using detail = 'pgque:consumer_not_found';
    end if;
    v_since := pg_catalog.now() - latency_percentiles.period;

    -- Slices of the period between ticks (at most c_slices, evenly spread),
    -- from the newest tick at or before its start: an event whose txid lies
    -- between two boundaries' snapshot xmax values became deliverable after
    -- the first of them. Each slice contributes its first events by txid.
    select pg_catalog.array_agg(w.tick_id order by w.tick_id),
           pg_catalog.array_agg(w.xmax order by w.tick_id)
      into v_ticks, v_xmaxes
      from (
          select t.tick_id, pg_catalog.pg_snapshot_xmax(t.tick_snapshot) as xmax,
                 pg_catalog.row_number() over (order by t.tick_id) as rn,
                 pg_catalog.count(*) over () as total
            from pgque.tick t
           where t.tick_queue = q.queue_id
             and t.tick_id >= coalesce(
                 (select t0.tick_id from pgque.tick t0
                   where t0.tick_queue = q.queue_id and t0.tick_time <= v_since
                   order by t0.tick_id desc limit 1), 0)) w
     where (w.rn - 1) % greatest(pg_catalog.ceil(w.total / c_slices::numeric)::integer, 1) = 0;
    v_slices := coalesce(pg_catalog.cardinality(v_ticks), 0);
    if v_slices = 0 then
        return query select null::interval, null::interval, null::interval;
        return;
    end if;
    v_per_slice := pg_catalog.ceil(c_sample / v_slices::numeric)::integer;

    -- Latency of one event: from ev_time to the tick that made it
    -- deliverable, once the consumer is past that tick; else its age now.
    v_sql := pg_catalog.format($sql$
        select pg_catalog.array_agg(case
                   when cov.tick_id is not null and cov.tick_id <= $6
                       then greatest(cov.tick_time - e.ev_time, interval '0')
                   else greatest(pg_catalog.now() - e.ev_time, interval '0') end)
          from (select ev.ev_txid, ev.ev_time from %s ev
                 where ev.ev_txid >= $1 and ($2 is null or ev.ev_txid < $2)
                   and ev.ev_time >= $3 and ev.ev_retry is null
                   and (ev.ev_owner is null or ev.ev_owner = $4)
                 order by ev.ev_txid limit $5) e
          left join lateral (
              select t.tick_id, t.tick_time from pgque.tick t
               where t.tick_queue = $7 and t.tick_id > $8
                 and pg_catalog.pg_visible_in_snapshot(e.ev_txid, t.tick_snapshot)
               order by t.tick_id limit 1) cov on true
        $sql$, pgque._event_table_name(q, null));
    for i in 1 .. v_slices loop
        execute v_sql into v_part
          using v_xmaxes[i], v_xmaxes[i + 1], v_since, v_sub_id, v_per_slice,
                v_position, q.queue_id, v_ticks[i];
        v_all := v_all || coalesce(v_part, '{}');
    end loop;

    return query
    select l[1], l[2], l[3]
      from (select pg_catalog.percentile_cont(array[0.5, 0.95, 0.99]) within group (order by x) as l
              from pg_catalog.unnest(v_all) x) p;
end
$$;
comment on function pgque.latency_percentiles(text, text, interval) is
    'p50/p95/p99 over events created in the last period (first deliveries, sampled up to 10000): ev_time to the tick that made it deliverable once the consumer passed that tick, else its age now.';

-- file: functions/test_helpers.sql
-- Test helpers for users' own test suites: send a message, consume exactly
-- one, assert that a queue or its dead letter queue is empty. Each raises
-- (P0001, DETAIL pgque:assertion_failed) with the queue and what it found.
-- A function cannot commit, so the caller ticks between test_send and
-- test_consume, in separate transactions:
--
--   select pgque.test_send('q', '{"id": 1}');          -- transaction 1
--   select pgque.force_next_tick('q');                  -- transaction 2
--   select pgque.ticker('q');                           -- transaction 3
--   select * from pgque.test_consume('q', 'c', 'default');

create or replace function pgque.test_send(queue text, payload jsonb)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q pgque.queue;
    v_id bigint;
    v_stored text;
begin
    q := pgque._observed_queue('test_send', test_send.queue);
    if test_send.payload is null then
        perform pgque._refuse_null('test_send', 'payload', q.queue_name);
    end if;
    v_id := pgque.send(q.queue_name, test_send.payload);
    -- Read it back through the txid index: this transaction's events only.
    execute pg_catalog.format(
        'select ev_data from %s where ev_txid = pg_catalog.pg_current_xact_id() and ev_id = $1',
        pgque._event_table_name(q, null))
       into v_stored using v_id;
    if v_stored is null or v_stored::jsonb <> test_send.payload then
        raise exception 'test_send: event % of queue % was not stored as sent (found %)',
            v_id, q.queue_name, coalesce(v_stored, 'nothing')
            using detail = 'pgque:assertion_failed';
    end if;
    return v_id;
end
$$;
comment on function pgque.test_send(text, jsonb) is
    'Test helper: sends a JSON message of type ''default'' and checks it was stored. Returns the event id.';

create or replace function pgque.test_consume(queue text, consumer text, expected_type text)
returns pgque.message language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q pgque.queue;
    v_messages pgque.message[];
    v_msg pgque.message;
begin
    q := pgque._observed_queue('test_consume', test_consume.queue);
    if test_consume.consumer is null then
        perform pgque._refuse_null('test_consume', 'consumer name', q.queue_name);
    end if;
    -- Up to 1000, to say how many there were when there is more than one.
    select pg_catalog.array_agg(m order by m.msg_id) into v_messages
      from pgque.receive(q.queue_name, test_consume.consumer, 1000) m;
    if v_messages is null then
        raise exception 'test_consume: no message for consumer % on queue % (was it sent and then ticked, in separate transactions?)',
            test_consume.consumer, q.queue_name using detail = 'pgque:assertion_failed';
    end if;
    if pg_catalog.cardinality(v_messages) > 1 then
        raise exception 'test_consume: expected one message for consumer % on queue %, batch % holds % (types: %)',
            test_consume.consumer, q.queue_name, (v_messages[1]).batch_id,
            case when pg_catalog.cardinality(v_messages) >= 1000 then '1000 or more'
                 else pg_catalog.cardinality(v_messages)::text end,
            (select pg_catalog.string_agg(coalesce(m.type, 'NULL'), ', ' order by m.msg_id)
               from pg_catalog.unnest(v_messages[1:10]) m)
            using detail = 'pgque:assertion_failed';
    end if;
    v_msg := v_messages[1];
    if test_consume.expected_type is not null
       and v_msg.type is distinct from test_consume.expected_type then
        raise exception 'test_consume: expected type % on queue % (consumer %), got % (msg_id %, payload %)',
            test_consume.expected_type, q.queue_name, test_consume.consumer,
            coalesce(v_msg.type, 'NULL'), v_msg.msg_id, pg_catalog.left(v_msg.payload, 200)
            using detail = 'pgque:assertion_failed';
    end if;
    perform pgque.ack(v_msg.batch_id);
    return v_msg;
end
$$;
comment on function pgque.test_consume(text, text, text) is
    'Test helper: receives the consumer''s next batch, which must hold exactly one message of expected_type (NULL: any type), acks it and returns the message.';

create or replace function pgque.assert_empty(queue text)
returns boolean language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q pgque.queue;
    s record;
    v_count bigint;
    v_first bigint;
    v_findings text[] := '{}';
begin
    q := pgque._observed_queue('assert_empty', assert_empty.queue);
    -- Exact, not estimated: per subscription, the events past its position
    -- (not visible in its last tick's snapshot) that it would receive.
    for s in
        select co.co_name, sub.sub_id, t.tick_snapshot
          from pgque.subscription sub
          join pgque.consumer co on co.co_id = sub.sub_consumer
          join pgque.tick t on t.tick_queue = sub.sub_queue and t.tick_id = sub.sub_last_tick
         where sub.sub_queue = q.queue_id
         order by co.co_name
    loop
        execute pg_catalog.format(
            'select pg_catalog.count(*), pg_catalog.min(ev_id) from (select ev_id from %s'
            ' where ev_txid >= $1 and not pg_catalog.pg_visible_in_snapshot(ev_txid, $2)'
            ' and (ev_owner is null or ev_owner = $3) limit 1000) e',
            pgque._event_table_name(q, null))
           into v_count, v_first
          using pg_catalog.pg_snapshot_xmin(s.tick_snapshot), s.tick_snapshot, s.sub_id;
        if v_count > 0 then
            v_findings := v_findings || pg_catalog.format(
                'consumer %s has %s%s events not yet consumed (first ev_id %s)', s.co_name,
                case when v_count >= 1000 then 'at least ' else '' end, v_count, v_first);
        end if;
    end loop;
    select pg_catalog.count(*) into v_count from pgque.retry_queue r where r.ev_queue = q.queue_id;
    if v_count > 0 then
        v_findings := v_findings || pg_catalog.format('%s events wait in retry_queue', v_count);
    end if;
    select pg_catalog.count(*) into v_count from pgque.delayed_events d where d.de_queue_name = q.queue_name;
    if v_count > 0 then
        v_findings := v_findings || pg_catalog.format('%s delayed messages wait for delivery', v_count);
    end if;
    if pg_catalog.cardinality(v_findings) > 0 then
        raise exception 'assert_empty: queue % is not empty: %', q.queue_name,
            pg_catalog.array_to_string(v_findings, '; ') using detail = 'pgque:assertion_failed';
    end if;
    return true;
end
$$;
comment on function pgque.assert_empty(text) is
    'Test helper: true when no consumer of the queue has an event left to consume and no retry or delayed message waits; raises with the findings otherwise.';

create or replace function pgque.assert_dlq_empty(queue text)
returns boolean language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
#variable_conflict use_column
declare
    q constant pgque.queue := pgque._observed_queue('assert_dlq_empty', assert_dlq_empty.queue);
    v_count bigint;
    v_newest pgque.dead_letter;
begin
    select pg_catalog.count(*) into v_count from pgque.dead_letter d where d.dl_queue_id = q.queue_id;
    if v_count > 0 then
        select d.* into v_newest from pgque.dead_letter d
         where d.dl_queue_id = q.queue_id order by d.dl_time desc, d.dl_id desc limit 1;
        raise exception 'assert_dlq_empty: queue % has % dead letters (newest: dl_id %, ev_id %, consumer %, reason %)',
            q.queue_name, v_count, v_newest.dl_id, v_newest.ev_id,
            (select co.co_name from pgque.consumer co where co.co_id = v_newest.dl_consumer_id),
            coalesce(v_newest.dl_reason, 'NULL') using detail = 'pgque:assertion_failed';
    end if;
    return true;
end
$$;
comment on function pgque.assert_dlq_empty(text) is
    'Test helper: true when the queue has no dead letters; raises with their count and the newest otherwise.';

-- file: functions/spark.sql
-- Spark connector support: tick-range reads for the streaming and batch
-- source, consumer positioning, and the sinks' staging (its tables,
-- spark_staging and spark_commits, are in structure/tables.sql).
--
-- Spark's offsets are tick ids. A micro-batch reads the events between two
-- ticks of a queue under the engine's snapshot rule (visible in the end
-- tick's snapshot, not in the start tick's), split into N disjoint
-- partitions by ev_id % N. Retry copies (ev_owner set) belong to the
-- consumer that nacked them and are never part of a tick range. The query's
-- consumer only pins retention: Spark's checkpoint decides what was read.
--
-- Sinks: every Spark task stages its rows under the write's id and its own
-- stage id (spark_stage); the driver publishes the stages its tasks reported
-- into the queue, set-based and in one transaction (spark_publish), and a
-- streaming query records (query id, batch id) in the same transaction, so a
-- replayed micro-batch publishes nothing. Abort and failed tasks leave
-- nothing behind but staged rows, removed by write id (spark_discard).

-- Internal: tick i_tick of queue i_queue, or the error for a tick that does
-- not exist, saying whether rotation removed it or it was never made.
create or replace function pgque._spark_tick(i_queue pgque.queue, i_tick bigint)
returns pgque.tick language plpgsql stable as $$
declare
    v_tick pgque.tick;
    v_oldest bigint;
    v_latest bigint;
begin
    select * into v_tick from pgque.tick where tick_queue = i_queue.queue_id and tick_id = i_tick;
    if found then
        return v_tick;
    end if;
    select pg_catalog.min(tick_id), pg_catalog.max(tick_id) into v_oldest, v_latest
      from pgque.tick where tick_queue = i_queue.queue_id;
    if v_oldest is not null and i_tick < v_oldest then
        raise exception 'queue %: tick % was rotated away (oldest retained tick is %); the events after it are no longer complete',
            i_queue.queue_name, i_tick, v_oldest
            using detail = 'pgque:tick_not_found',
                  hint = 'The Spark checkpoint (or the asked start) is older than the queue retains: restart the query from a new checkpoint, with startingPosition consumer or latest.';
    end if;
    raise exception 'queue %: tick % does not exist (latest tick is %)',
        i_queue.queue_name, i_tick, coalesce(v_latest::text, 'none')
        using detail = 'pgque:tick_not_found',
              hint = 'Is the checkpoint from another database, or was the queue dropped and created again?';
end
$$;
comment on function pgque._spark_tick(pgque.queue, bigint) is
    'Internal: a tick of a queue, or tick_not_found: rotated away, or never made.';

create or replace function pgque.spark_range_sql(
    i_queue_name text, i_from_tick bigint, i_to_tick bigint,
    i_part integer default 0, i_nparts integer default 1)
returns text language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
    v_s1 pg_snapshot;
    v_s2 pg_snapshot;
    v_filter text := ' and ev_owner is null';
begin
    if i_from_tick is null or i_to_tick is null then
        raise exception 'spark_range_sql: the ticks must not be NULL'
            using detail = 'pgque:invalid_argument';
    end if;
    if i_from_tick > i_to_tick then
        raise exception 'spark_range_sql: start tick % is after end tick %', i_from_tick, i_to_tick
            using detail = 'pgque:invalid_argument';
    end if;
    if i_nparts is null or i_nparts < 1 or i_part is null or i_part < 0 or i_part >= i_nparts then
        raise exception 'spark_range_sql: partition % of % is not one of 0 .. n-1 with n >= 1',
            coalesce(i_part::text, 'NULL'), coalesce(i_nparts::text, 'NULL')
            using detail = 'pgque:invalid_argument';
    end if;
    q := pgque._queue_row(i_queue_name, 'NULL');
    -- Rotation step 1 takes this row FOR NO KEY UPDATE and skips it when
    -- locked: while the caller's transaction lasts, no event table can be
    -- truncated under its read (a KEY SHARE lock would not conflict).
    perform 1 from pgque.queue where queue_id = q.queue_id for share;
    select * into q from pgque.queue where queue_id = q.queue_id;

    v_s1 := (pgque._spark_tick(q, i_from_tick)).tick_snapshot;
    v_s2 := (pgque._spark_tick(q, i_to_tick)).tick_snapshot;
    -- Retry copies (ev_owner set) belong to the consumer that nacked them;
    -- partitions split by ev_id. An empty range (one tick) selects nothing.
    if i_nparts > 1 then
        v_filter := v_filter || pg_catalog.format(' and ev_id %% %s = %s', i_nparts, i_part);
    end if;
    return pgque._tick_range_sql(q, v_s1, v_s2, v_filter);
end
$$;
comment on function pgque.spark_range_sql(text, bigint, bigint, integer, integer) is
    'The SQL reading partition i_part of i_nparts (ev_id % n) of the events between two ticks, without retry copies. Locks the queue against rotation until the transaction ends: run the SQL in the same transaction. Raises tick_not_found for a rotated-away tick.';

create or replace function pgque.spark_read_range(
    i_queue_name text, i_from_tick bigint, i_to_tick bigint,
    i_part integer default 0, i_nparts integer default 1,
    out ev_id bigint, out ev_time timestamptz, out ev_txid bigint, out ev_retry int4,
    out ev_type text, out ev_data text,
    out ev_extra1 text, out ev_extra2 text, out ev_extra3 text, out ev_extra4 text)
returns setof record language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    return query execute
        'select * from ('
        || pgque.spark_range_sql(i_queue_name, i_from_tick, i_to_tick, i_part, i_nparts)
        || ') r order by ev_id';
end
$$;
comment on function pgque.spark_read_range(text, bigint, bigint, integer, integer) is
    'The events between two ticks (one ev_id % n partition of them), ordered by ev_id, without retry copies. Raises tick_not_found for a rotated-away tick.';

create or replace function pgque.spark_latest_tick(
    i_queue_name text,
    out tick_id bigint, out tick_time timestamptz, out tick_event_seq bigint)
language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    q pgque.queue := pgque._queue_row(i_queue_name, 'NULL');
begin
    select t.tick_id, t.tick_time, t.tick_event_seq
      into tick_id, tick_time, tick_event_seq
      from pgque.tick t where t.tick_queue = q.queue_id
     order by t.tick_id desc limit 1;
end
$$;
comment on function pgque.spark_latest_tick(text) is
    'The queue''s latest tick with its time and event sequence value (all NULL without ticks); raises queue_not_found.';

-- Internal: the consumer's subscription row, or an error.
create or replace function pgque._spark_subscription(q pgque.queue, i_consumer_name text)
returns pgque.subscription language plpgsql stable as $$
declare
    s pgque.subscription;
begin
    select sub.* into s
      from pgque.subscription sub join pgque.consumer c on c.co_id = sub.sub_consumer
     where sub.sub_queue = q.queue_id and c.co_name = i_consumer_name;
    if not found then
        raise exception 'consumer % is not subscribed to queue % (unregistered while the Spark query ran?)',
            coalesce(i_consumer_name, 'NULL'), q.queue_name
            using detail = 'pgque:consumer_not_found',
                  hint = 'Rotation may have removed events the query still needs; restart it from a new checkpoint.';
    end if;
    if s.sub_role <> 'normal' then
        raise exception 'consumer % on queue % is a cooperative consumer; a Spark query needs a consumer of its own',
            i_consumer_name, q.queue_name using detail = 'pgque:cooperative_consumer';
    end if;
    return s;
end
$$;
comment on function pgque._spark_subscription(pgque.queue, text) is
    'Internal: the subscription of a Spark query''s consumer, or consumer_not_found.';

create or replace function pgque.spark_start_tick(
    i_queue_name text, i_consumer_name text, i_position text default 'consumer')
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue := pgque._queue_row(i_queue_name, 'NULL');
    v_tick bigint;
begin
    if coalesce(i_consumer_name, '') = '' then
        raise exception 'spark_start_tick: the consumer name must not be empty'
            using detail = 'pgque:invalid_argument';
    end if;
    if i_position is null or i_position = 'consumer' then
        -- New: at the latest tick. Known: where it is.
        perform pgque.register_consumer_at(i_queue_name, i_consumer_name, null);
        return (pgque._spark_subscription(q, i_consumer_name)).sub_last_tick;
    elsif i_position = 'latest' then
        select tick_id into v_tick from pgque.tick
         where tick_queue = q.queue_id order by tick_id desc limit 1;
        if not found then
            raise exception 'No ticks for this queue.  Please run ticker on database.'
                using detail = 'pgque:no_ticks';
        end if;
    elsif i_position ~ '^[0-9]{1,18}$' then
        v_tick := i_position::bigint;
        perform pgque._spark_tick(q, v_tick);
    else
        raise exception 'startingPosition must be consumer, latest or a tick id, not %', i_position
            using detail = 'pgque:invalid_argument';
    end if;
    perform pgque.register_consumer_at(i_queue_name, i_consumer_name, v_tick);
    perform pgque._spark_subscription(q, i_consumer_name);
    return v_tick;
end
$$;
comment on function pgque.spark_start_tick(text, text, text) is
    'Start tick of a new Spark query: ''consumer'' = the consumer''s position (registered at the latest tick if new), ''latest'' = the latest tick, or a tick id; the consumer is moved there. Returns the tick.';

create or replace function pgque.spark_next_tick(
    i_queue_name text, i_consumer_name text, i_from_tick bigint,
    i_max_tick bigint default null, i_max_ticks integer default null,
    i_max_events bigint default null)
returns bigint language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue := pgque._queue_row(i_queue_name, 'NULL');
    v_from_seq bigint;
    v_end bigint;
begin
    if i_from_tick is null then
        raise exception 'spark_next_tick: the start tick must not be NULL'
            using detail = 'pgque:invalid_argument';
    end if;
    if i_consumer_name is not null then
        perform pgque._spark_subscription(q, i_consumer_name);
    end if;
    v_from_seq := (pgque._spark_tick(q, i_from_tick)).tick_event_seq;
    -- The furthest tick within the limits; at least one tick when any is
    -- newer (a tick range cannot be split). Event counts come from the
    -- event sequence, an estimate.
    select pg_catalog.max(t.tick_id) filter (where t.n = 1 or i_max_events is null
                                  or t.tick_event_seq - v_from_seq <= i_max_events)
      into v_end
      from (select tick_id, tick_event_seq, pg_catalog.row_number() over (order by tick_id) as n
              from pgque.tick
             where tick_queue = q.queue_id and tick_id > i_from_tick
               and (i_max_tick is null or tick_id <= i_max_tick)
             order by tick_id
             limit i_max_ticks) t;
    return coalesce(v_end, i_from_tick);
end
$$;
comment on function pgque.spark_next_tick(text, text, bigint, bigint, integer, bigint) is
    'End tick of the next Spark micro-batch from i_from_tick: the furthest tick up to i_max_tick, within i_max_ticks ticks and about i_max_events events (at least one tick); i_from_tick when none is newer. Checks the consumer (when given) is still subscribed.';

create or replace function pgque.spark_advance(
    i_queue_name text, i_consumer_name text, i_tick bigint)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue := pgque._queue_row(i_queue_name, 'NULL');
begin
    if i_tick is null then
        raise exception 'spark_advance: the tick must not be NULL'
            using detail = 'pgque:invalid_argument';
    end if;
    -- Never re-create a consumer someone removed: its events may be gone.
    perform pgque._spark_subscription(q, i_consumer_name);
    perform pgque._spark_tick(q, i_tick);
    return pgque.register_consumer_at(i_queue_name, i_consumer_name, i_tick);
end
$$;
comment on function pgque.spark_advance(text, text, bigint) is
    'Moves a Spark query''s consumer to the tick Spark has committed (register_consumer_at); raises consumer_not_found when it was unregistered. Returns 0.';

-- A write's tasks and its end (publish or abort) meet on an advisory lock of
-- the write id: every stager holds it shared until its transaction ends, the
-- end takes it exclusively, so it waits for the stagers still running (a
-- failed task's writer may still commit what it was handed) before dropping
-- the write's rows. A batch write (a random id, never reused) is then marked
-- over in spark_commits (batch id -1), and a task that stages afterwards is
-- refused; a streaming write ('<query id>:<batch id>') is replayed under the
-- same id, so it is not marked, and what a late task stages is dropped by the
-- query's next publish.

-- Internal: the advisory lock key of a write id (second half; the first is
-- pgque._spark_lock_class()).
create or replace function pgque._spark_write_key(i_write_id text)
returns integer
language sql immutable
as $$ select pg_catalog.hashtext(i_write_id) $$;
comment on function pgque._spark_write_key(text) is
    'Internal: the advisory lock key of a Spark write id.';

-- Internal: the class of the Spark writes' advisory locks.
create or replace function pgque._spark_lock_class()
returns integer
language sql immutable
as $$ select 1936749419 $$;
comment on function pgque._spark_lock_class() is
    'Internal: the first key of the Spark writes'' advisory locks (''spkk'').';

-- Internal: whether a write id is a batch write's (a streaming one holds ':').
create or replace function pgque._spark_is_batch_write(i_write_id text)
returns boolean
language sql immutable
as $$ select pg_catalog.strpos(i_write_id, ':') = 0 $$;
comment on function pgque._spark_is_batch_write(text) is
    'Internal: true for a batch write id, false for a streaming one (<query id>:<batch id>).';

-- Internal: end a write: wait (up to 30 s) for its stagers still running;
-- mark a batch write over. Returns false when the batch write was over
-- already.
create or replace function pgque._spark_end_write(i_write_id text, i_queue_name text,
                                                  i_events bigint)
returns boolean language plpgsql as $$
declare
    v_timeout text := pg_catalog.current_setting('lock_timeout');
begin
    perform pg_catalog.set_config('lock_timeout', '30s', true);
    begin
        perform pg_catalog.pg_advisory_xact_lock(pgque._spark_lock_class(),
                                                 pgque._spark_write_key(i_write_id));
    exception when lock_not_available then
        -- A task that hangs: go on; what it stages later stays until spark_cleanup.
        null;
    end;
    perform pg_catalog.set_config('lock_timeout', v_timeout, true);
    if not pgque._spark_is_batch_write(i_write_id) then
        return true;
    end if;
    insert into pgque.spark_commits (query_id, batch_id, queue_name, events)
    values (i_write_id, -1, coalesce(i_queue_name, ''), i_events)
    on conflict (query_id, batch_id) do nothing;
    return found;
end
$$;
comment on function pgque._spark_end_write(text, text, bigint) is
    'Internal: waits for a Spark write''s running stagers (advisory lock, 30 s at most) and marks a batch write over (spark_commits, batch id -1); false when it was over already.';

create or replace function pgque.spark_stage(
    i_write_id text, i_stage_id text, i_first_seq bigint,
    i_types text[], i_payloads text[],
    i_extra1 text[], i_extra2 text[], i_extra3 text[], i_extra4 text[])
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n integer := coalesce(pg_catalog.cardinality(i_payloads), 0);
    v_null integer;
begin
    if coalesce(i_write_id, '') = '' or coalesce(i_stage_id, '') = '' or i_first_seq is null then
        raise exception 'spark_stage: write id, stage id and first seq must be given'
            using detail = 'pgque:invalid_argument';
    end if;
    if (i_types is not null and pg_catalog.cardinality(i_types) <> n)
       or (i_extra1 is not null and pg_catalog.cardinality(i_extra1) <> n)
       or (i_extra2 is not null and pg_catalog.cardinality(i_extra2) <> n)
       or (i_extra3 is not null and pg_catalog.cardinality(i_extra3) <> n)
       or (i_extra4 is not null and pg_catalog.cardinality(i_extra4) <> n) then
        raise exception 'spark_stage: every array must have the % elements of the payloads', n
            using detail = 'pgque:invalid_argument';
    end if;
    -- Held until the task's transaction ends: the write's end waits for it.
    perform pg_catalog.pg_advisory_xact_lock_shared(pgque._spark_lock_class(),
                                                    pgque._spark_write_key(i_write_id));
    if pgque._spark_is_batch_write(i_write_id) and exists (
        select 1 from pgque.spark_commits where query_id = i_write_id and batch_id = -1) then
        raise exception 'spark_stage: write % is over (published or aborted); this task''s rows are not staged',
            i_write_id using detail = 'pgque:invalid_argument';
    end if;
    v_null := pg_catalog.array_position(i_payloads, null);
    if v_null is not null then
        raise exception 'spark_stage: payload % of the chunk is NULL', v_null
            using detail = 'pgque:invalid_argument';
    end if;
    -- ROWS FROM over the arrays, not subscripts: subscripting a text array
    -- walks it from the start, quadratic in the chunk size.
    insert into pgque.spark_staging
           (write_id, stage_id, seq, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
    select i_write_id, i_stage_id, i_first_seq + b.k - 1, b.t, b.p, b.e1, b.e2, b.e3, b.e4
      from rows from (pg_catalog.unnest(i_payloads), pg_catalog.unnest(i_types),
                      pg_catalog.unnest(i_extra1), pg_catalog.unnest(i_extra2),
                      pg_catalog.unnest(i_extra3), pg_catalog.unnest(i_extra4))
           with ordinality as b(p, t, e1, e2, e3, e4, k);
    return n;
end
$$;
comment on function pgque.spark_stage(text, text, bigint, text[], text[], text[], text[], text[], text[]) is
    'Stages rows of a Spark task (parallel arrays, payloads not NULL) under its write and stage id, numbered from i_first_seq; holds the write''s lock shared until the transaction ends, and refuses a batch write that is over. Returns the number staged.';

-- Internal: drop a write's staged rows, those of failed task attempts
-- included; for a streaming query (write id '<query id>:<batch id>') also
-- what earlier micro-batches of the query left (aborts see no write id when
-- every task failed).
create or replace function pgque._spark_drop_staged(i_write_id text, i_query_id text)
returns void language plpgsql as $$
begin
    if i_query_id is null then
        delete from pgque.spark_staging where write_id = i_write_id;
    else
        delete from pgque.spark_staging
         where write_id = i_write_id
            or (pg_catalog.left(write_id, pg_catalog.length(i_query_id) + 1) = i_query_id || ':');
    end if;
end
$$;
comment on function pgque._spark_drop_staged(text, text) is
    'Internal: removes a Spark write''s staged rows, and for a streaming query those its earlier micro-batches left.';

create or replace function pgque.spark_publish(
    i_queue_name text, i_write_id text, i_stage_ids text[], i_counts bigint[],
    i_query_id text default null, i_batch_id bigint default null)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_bad record;
    v_table text;
    v_total bigint := 0;
    v_work_mem text;
begin
    perform pgque._queue_row(i_queue_name, 'NULL');
    if coalesce(i_write_id, '') = '' then
        raise exception 'spark_publish: the write id must be given'
            using detail = 'pgque:invalid_argument';
    end if;
    if coalesce(pg_catalog.cardinality(i_stage_ids), 0)
       <> coalesce(pg_catalog.cardinality(i_counts), 0) then
        raise exception 'spark_publish: % stage ids but % counts',
            coalesce(pg_catalog.cardinality(i_stage_ids), 0),
            coalesce(pg_catalog.cardinality(i_counts), 0)
            using detail = 'pgque:invalid_argument';
    end if;
    if (i_query_id is null) <> (i_batch_id is null) then
        raise exception 'spark_publish: query id and batch id go together'
            using detail = 'pgque:invalid_argument';
    end if;
    if (select pg_catalog.count(distinct s) from pg_catalog.unnest(i_stage_ids) s)
       <> coalesce(pg_catalog.cardinality(i_stage_ids), 0) then
        raise exception 'spark_publish: a stage id is listed twice' using detail = 'pgque:invalid_argument';
    end if;

    -- Wait for the write's stagers still running (a failed attempt's
    -- rows are dropped below, after it ended); a batch write published or
    -- aborted before publishes nothing again.
    if not pgque._spark_end_write(i_write_id, i_queue_name, 0) then
        raise exception 'spark_publish: write % is over already (published or aborted)', i_write_id
            using detail = 'pgque:invalid_argument';
    end if;

    if i_query_id is not null then
        -- A batch published before (Spark replays the last micro-batch when
        -- its commit log entry is missing): publish nothing, clean up.
        insert into pgque.spark_commits (query_id, batch_id, queue_name, events)
        values (i_query_id, i_batch_id, i_queue_name,
                coalesce((select pg_catalog.sum(c) from pg_catalog.unnest(i_counts) c), 0))
        on conflict (query_id, batch_id) do nothing;
        if not found then
            perform pgque._spark_drop_staged(i_write_id, i_query_id);
            return 0;
        end if;
        -- Keep a window of recent batches per query.
        delete from pgque.spark_commits
         where query_id = i_query_id and batch_id < i_batch_id - 1000;
    end if;

    -- In task order, then row order, set-based into the table writers fill
    -- now (current_event_table takes the txid first, as every insert does);
    -- ev_id comes from the table's default, the queue's event sequence. The
    -- sort of a big write stays in memory.
    v_work_mem := pg_catalog.current_setting('work_mem');
    perform pg_catalog.set_config('work_mem', '256MB', true);
    v_table := pgque.current_event_table(i_queue_name);
    execute 'insert into ' || pgque.quote_fqname(v_table)
         || ' (ev_time, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)'
         || ' select pg_catalog.now(), coalesce(s.ev_type, ''default''), s.ev_data,'
         || ' s.ev_extra1, s.ev_extra2, s.ev_extra3, s.ev_extra4'
         || ' from pg_catalog.unnest($1) with ordinality as o(stage_id, k)'
         || ' join pgque.spark_staging s on s.write_id = $2 and s.stage_id = o.stage_id'
         || ' order by o.k, s.seq'
      using i_stage_ids, i_write_id;
    get diagnostics v_total = row_count;
    perform pg_catalog.set_config('work_mem', v_work_mem, true);

    -- Every reported row must be there: nothing half-sent. A stage is one
    -- task's transaction, so it holds its reported count or fewer (a crash
    -- emptied the unlogged table): the total tells; the raise undoes the
    -- insert, and only then are the stages counted one by one, to name one.
    if v_total <> coalesce((select pg_catalog.sum(c) from pg_catalog.unnest(i_counts) c), 0) then
        for v_bad in
            select e.stage_id, e.expected, coalesce(f.found, 0) as found
              from rows from (pg_catalog.unnest(i_stage_ids), pg_catalog.unnest(i_counts))
                   as e(stage_id, expected)
              left join (select s.stage_id, pg_catalog.count(*) as found
                           from pgque.spark_staging s
                          where s.write_id = i_write_id and s.stage_id = any (i_stage_ids)
                          group by s.stage_id) f on f.stage_id = e.stage_id
             where e.expected is distinct from coalesce(f.found, 0)
             limit 1
        loop
            raise exception 'spark_publish: task stage % of write % staged % rows, % are there; nothing was published',
                v_bad.stage_id, i_write_id, v_bad.expected, v_bad.found
                using detail = 'pgque:staging_incomplete',
                      hint = 'The staging table is unlogged: a server crash empties it. Run the write again.';
        end loop;
    end if;
    perform pgque._spark_drop_staged(i_write_id, i_query_id);
    return v_total;
end
$$;
comment on function pgque.spark_publish(text, text, text[], bigint[], text, bigint) is
    'Publishes the staged rows of the listed task stages (each with its expected row count) into the queue in one transaction, then drops the write''s staged rows. With a query id and batch id, a batch published before publishes nothing. Returns the number of events sent.';

create or replace function pgque.spark_discard(i_write_id text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n bigint;
begin
    -- After the write's running stagers ended; a batch write is over for good.
    perform pgque._spark_end_write(i_write_id, null, -1);
    delete from pgque.spark_staging where write_id = i_write_id;
    get diagnostics n = row_count;
    return n;
end
$$;
comment on function pgque.spark_discard(text) is
    'Removes every row staged under a write id (an aborted or failed Spark write), after waiting for its running stagers; a batch write id is over for good. Returns how many.';

create or replace function pgque.spark_cleanup(i_older_than interval default '1 day')
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n bigint;
begin
    -- Left by Spark drivers that died between staging and publishing.
    delete from pgque.spark_staging where staged_at < pg_catalog.now() - i_older_than;
    get diagnostics n = row_count;
    -- Batch writes that are over (spark_stage refuses them for as long as they are kept).
    delete from pgque.spark_commits
     where batch_id = -1 and committed_at < pg_catalog.now() - i_older_than;
    return n;
end
$$;
comment on function pgque.spark_cleanup(interval) is
    'Removes staged Spark rows older than the interval (writes whose driver died). Returns how many.';

-- file: functions/triggers.sql
-- CDC triggers: turn row changes into queue events (PgQ's jsontriga, logutriga, sqltriga).
--
--   create trigger t after insert or update or delete on tbl
--       for each row execute function pgque.jsontriga('queue' [, arg ...]);
--   create trigger t_trunc after truncate on tbl
--       for each statement execute function pgque.jsontriga('queue');
--
-- Every change becomes one event, inserted with pgque.insert_event(queue, type, data,
-- extra1..extra4). ev_extra1 is 'schema.table' (unquoted). The three formats:
--
-- * jsontriga (recommended): ev_type is the JSON object
--   {"op":"INSERT|UPDATE|DELETE|TRUNCATE","table":["schema","table"],"pkey":["col",...]};
--   ev_data is a JSON object of the row's columns in column order. int2/int4/int8 are
--   JSON numbers, bool JSON booleans, NULL null; timestamptz, timestamp and date are ISO
--   8601 strings ("2009-09-19T11:59:48.599+00:00"); every other type (domains included)
--   is the JSON string of the type's text output. TRUNCATE: data {}.
-- * logutriga: ev_type is 'I:', 'U:' or 'D:' followed by the key column list;
--   ev_data is urlencoded 'col=value&col2=value' (NULL: the bare column name; bytes
--   other than A-Z a-z 0-9 - . _ as %xx in lowercase hex, space as +). TRUNCATE: 'R', ''.
-- * sqltriga: ev_type is 'I', 'U' or 'D'; ev_data is a SQL fragment: INSERT
--   '(c1,c2) values (''v1'',null)', UPDATE 'c2=''v'',c3=NULL where k=''1''' (only the
--   changed columns; when nothing changed the first key column is set to itself),
--   DELETE 'k=''1'' and k2=''2'''. Identifiers as quote_ident, values as quote_literal
--   (E'' strings when backslashes are involved). TRUNCATE: 'R', ''.
--
-- The row that is encoded is the new row, or the old one for DELETE. Values use the
-- type's output function, so they follow the session's DateStyle, IntervalStyle etc.
--
-- Trigger arguments after the queue name, in any order:
--   SKIP          BEFORE trigger only: the event is produced but the row change is not
--   backup        UPDATE: the old row, in the same encoding (urlencoded for sqltriga),
--                 goes to ev_extra2
--   deny          refuse every change (and TRUNCATE) with an error
--   ignore=a,b    leave the columns out of the data; an UPDATE that changes only
--                 ignored columns (or _pgq_ev_* columns) produces no event. sqltriga
--                 always drops such updates.
--   pkey=a,b      the key columns, instead of the primary key (jsontriga's "pkey" is
--                 this text split at commas); of several ignore= or pkey= the last counts
--   ev_type=, ev_data=, ev_extra1= .. ev_extra4=, when=
--                 SQL expressions over the row's columns (write them as bare column
--                 names), evaluated read-only, in argument order; the first of each
--                 kind counts. The result's text output replaces the field; when= must
--                 give a boolean and the event is produced only if it is true.
-- Columns named _pgq_ev_type, _pgq_ev_data and _pgq_ev_extra1..4 (deprecated) replace
-- that field with their value (NULL included) and are left out of the data; an
-- expression argument for the same field wins.
--
-- Key columns: a column is a key column when its name appears in the key list (the
-- pkey= text, or the primary key columns joined by ',') delimited by commas, white
-- space or the ends of the list, exactly as PgQ matches names. UPDATE and DELETE need
-- a non-empty key list; an UPDATE may not change a key column. Whether a column
-- changed is decided by the equality of its type's default btree (else hash) operator
-- class, as for 1.0 and 1.00, or by the text output for types without one (json, box)
-- and, as in PgQ, for array columns.
--
-- In session_replication_role 'local' the triggers do nothing (no event, no checks,
-- SKIP ignored). In 'replica' ordinary triggers do not fire at all; make the trigger
-- ENABLE ALWAYS or ENABLE REPLICA to capture changes there.
--
-- Privileges: the triggers and their helpers are SECURITY INVOKER, like PgQ's: they
-- run as the user doing the DML, who must be able to reach pgque.insert_event, i.e.
-- be a member of pgque_writer (which gets EXECUTE on the functions below). Trigger
-- argument expressions run as that user too, read-only, with the caller's search_path.
-- Functions, types and catalogs are schema-qualified; operators are left to
-- pg_catalog's implicit place at the head of the search path, except in the generated
-- value comparisons, which name the operator's schema.

-- Urlencodes a text value byte by byte in the database encoding.
create or replace function pgque._trigger_urlencode(i_value text)
returns text language sql stable strict as $$
    select case
        when i_value ~ '^[A-Za-z0-9._-]*$' then i_value
        else (
            select pg_catalog.string_agg(
                       case
                           when b.v between 48 and 57 or b.v between 65 and 90
                                or b.v between 97 and 122 or b.v in (45, 46, 95)
                               then pg_catalog.chr(b.v)
                           when b.v = 32 then '+'
                           else '%' || pg_catalog.lpad(pg_catalog.to_hex(b.v), 2, '0')
                       end,
                       '' order by x.i)
              from (select pg_catalog.convert_to(i_value, pg_catalog.getdatabaseencoding())
                               as bytes) s,
                   pg_catalog.generate_series(0, pg_catalog.length(s.bytes) - 1) as x(i),
                   lateral (select pg_catalog.get_byte(s.bytes, x.i) as v) b)
    end
$$;
comment on function pgque._trigger_urlencode(text) is
    'CDC trigger helper: urlencodes a value as logutriga does (%xx lowercase, + for space).';

-- True when i_name occurs in i_list delimited by a comma, white space or an end of the
-- list (PgQ's matching of ignore= and key column names; no trimming, no quoting).
create or replace function pgque._trigger_list_has(i_list text, i_name text)
returns boolean language sql immutable strict as $$
    select pg_catalog.strpos(i_list, i_name) > 0
       and exists (
           select 1
             from (select e', \t\n\r\f' || pg_catalog.chr(11) as delims,
                          pg_catalog.length(i_name) as len) c,
                  pg_catalog.generate_series(1, pg_catalog.length(i_list) - c.len + 1) as p(pos)
            where pg_catalog.substr(i_list, p.pos, c.len) = i_name
              and (p.pos = 1
                   or pg_catalog.strpos(c.delims, pg_catalog.substr(i_list, p.pos - 1, 1)) > 0)
              and (p.pos + c.len > pg_catalog.length(i_list)
                   or pg_catalog.strpos(c.delims, pg_catalog.substr(i_list, p.pos + c.len, 1)) > 0))
$$;
comment on function pgque._trigger_list_has(text, text) is
    'CDC trigger helper: whether a name is in an ignore=/key list (comma or space delimited).';

-- The equality operator the triggers compare values of a type with, as SQL text
-- ('operator(schema.name)'), or NULL when the type has none (values are then compared
-- by their text output). Like PostgreSQL's type cache: the equality of the default
-- btree operator class, else of the default hash class; a domain compares as its base
-- type; an array or composite only when its elements / fields have an equality. As in
-- PgQ, array columns themselves are compared by their text (i_nested false), while
-- arrays inside composites are compared as values (i_nested true).
create or replace function pgque._trigger_eq_operator(i_type oid, i_nested boolean)
returns text language plpgsql stable strict as $$
declare
    v_base oid := i_type;
    v_type record;
    v_intypes oid[];
    v_found record;
begin
    -- Common built-in types whose default btree equality is pg_catalog.= (bool, bytea,
    -- "char", name, int8, int2, int4, text, oid, float4, float8, bpchar, varchar, date,
    -- time, timestamp, timestamptz, interval, timetz, numeric, uuid, jsonb).
    if i_type = any ('{16,17,18,19,20,21,23,25,26,700,701,1042,1043,1082,1083,1114,1184,'
                     '1186,1266,1700,2950,3802}'::oid[]) then
        return 'operator(pg_catalog.=)';
    end if;
    loop
        select t.typtype, t.typbasetype, t.typelem, t.typrelid,
               t.typsubscript = 'pg_catalog.array_subscript_handler'::pg_catalog.regproc
                   and t.typelem <> 0 as is_array
          into v_type
          from pg_catalog.pg_type t
         where t.oid = v_base;
        if not found then
            return null;
        end if;
        exit when v_type.typtype <> 'd';
        v_base := v_type.typbasetype;
    end loop;
    if v_type.is_array and not i_nested then
        return null;
    end if;

    -- The input types a default operator class usable for v_base may have: the type
    -- itself, the matching polymorphic type, or one it is binary coercible to.
    v_intypes := array[v_base, case
                           when v_type.is_array then 'pg_catalog.anyarray'::pg_catalog.regtype
                           when v_type.typtype = 'e' then 'pg_catalog.anyenum'::pg_catalog.regtype
                           when v_type.typtype = 'r' then 'pg_catalog.anyrange'::pg_catalog.regtype
                           when v_type.typtype = 'm'
                               then 'pg_catalog.anymultirange'::pg_catalog.regtype
                           when v_type.typtype = 'c' then 'pg_catalog.record'::pg_catalog.regtype
                       end]
                 || array(select c.casttarget
                            from pg_catalog.pg_cast c
                           where c.castsource = v_base
                             and c.castmethod = 'b'
                             and c.castcontext = 'i');
    select c.opcintype, n.nspname, op.oprname
      into v_found
      from pg_catalog.pg_opclass c
      join pg_catalog.pg_am m on m.oid = c.opcmethod
      join pg_catalog.pg_type it on it.oid = c.opcintype
      join pg_catalog.pg_amop o
        on o.amopfamily = c.opcfamily
       and o.amoplefttype = c.opcintype
       and o.amoprighttype = c.opcintype
       and o.amopstrategy = case m.amname when 'btree' then 3 else 1 end
      join pg_catalog.pg_operator op on op.oid = o.amopopr
      join pg_catalog.pg_namespace n on n.oid = op.oprnamespace
     where m.amname in ('btree', 'hash')
       and c.opcdefault
       and c.opcintype = any (v_intypes)
     order by m.amname = 'btree' desc, c.opcintype = v_base desc, it.typispreferred desc
     limit 1;
    if not found then
        return null;
    end if;

    -- array_eq and record_eq work only when the elements / fields have an equality.
    if v_found.opcintype = 'pg_catalog.anyarray'::pg_catalog.regtype
       and pgque._trigger_eq_operator(v_type.typelem, true) is null then
        return null;
    end if;
    if v_found.opcintype = 'pg_catalog.record'::pg_catalog.regtype
       and exists (select 1
                     from pg_catalog.pg_attribute a
                    where a.attrelid = v_type.typrelid
                      and a.attnum > 0
                      and not a.attisdropped
                      and pgque._trigger_eq_operator(a.atttypid, true) is null) then
        return null;
    end if;
    return pg_catalog.format('operator(%I.%s)', v_found.nspname, v_found.oprname);
end
$$;
comment on function pgque._trigger_eq_operator(oid, boolean) is
    'CDC trigger helper: the equality operator used to tell whether a column changed (NULL: none).';

-- Evaluates a trigger argument expression (ev_type=, when= ...) over a row, as the
-- select list of a query over the row's columns (by name); the first column is the
-- result. The function is STABLE, so the expression runs read-only. Returns the
-- result's text output and type; an empty expression gives NULL and type 0 (PgQ: a
-- query without columns). The expression is the trigger creator's own SQL and,
-- as in PgQ, it runs on the search_path of the session that fired the trigger
-- (i_search_path); pgque's own code around it keeps the pinned path.
create or replace function pgque._trigger_eval(
    i_expr text, i_row record, i_search_path text, out o_value text, out o_type oid)
language plpgsql
stable
set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_rows integer;
begin
    if pg_catalog.btrim(i_expr, e' \t\n\r\f') = '' then
        o_value := null;
        o_type := 0;
        return;
    end if;
    -- Everything but the expression is qualified: it runs on the caller's path.
    perform pg_catalog.set_config('search_path', i_search_path, true);
    execute pg_catalog.format(
        e'select pg_catalog.count(*)::pg_catalog.int4,'
        ' (pg_catalog.array_agg(pg_catalog.pg_typeof(_q._x)::pg_catalog.oid))[1],'
        ' (pg_catalog.array_agg(case when pg_catalog.num_nulls(_q._x) OPERATOR(pg_catalog.=) 0'
        ' then pg_catalog.format(''%%s'', _q._x) end))[1]'
        ' from (select %s\n from (select ($1).*) as _pgq_row) as _q(_x)',
        i_expr)
       into v_rows, o_type, o_value
      using i_row;
    perform pg_catalog.set_config('search_path', 'pgque, pg_catalog, pg_temp', true);
    if v_rows <> 1 then
        raise exception 'Expect 1 row from override query, got %', v_rows
            using detail = 'pgque:trigger_bad_expression';
    end if;
end
$$;
comment on function pgque._trigger_eval(text, record, text) is
    'CDC trigger helper: evaluates an ev_*=/when= trigger argument over a row (read-only).';

-- Encodes the columns of a row that are not omitted as a JSON object; i_values are
-- JSON values already.
create or replace function pgque._trigger_json_row(
    i_names text[], i_values text[], i_omit boolean[])
returns text language sql stable as $$
    select '{'
           || coalesce(pg_catalog.string_agg(
                          pg_catalog.to_json(i_names[i])::text || ':' || i_values[i],
                          ',' order by i), '')
           || '}'
      from pg_catalog.generate_subscripts(i_names, 1) as i
     where not i_omit[i]
$$;
comment on function pgque._trigger_json_row(text[], text[], boolean[]) is
    'CDC trigger helper: a row as a JSON object (jsontriga data).';

-- Encodes the columns of a row that are not omitted as urlencoded name=value pairs
-- (a NULL value: the name alone).
create or replace function pgque._trigger_urlencode_row(
    i_names text[], i_values text[], i_omit boolean[])
returns text language sql stable as $$
    select coalesce(pg_catalog.string_agg(
               pgque._trigger_urlencode(i_names[i])
               || coalesce('=' || pgque._trigger_urlencode(i_values[i]), ''),
               '&' order by i), '')
      from pg_catalog.generate_subscripts(i_names, 1) as i
     where not i_omit[i]
$$;
comment on function pgque._trigger_urlencode_row(text[], text[], boolean[]) is
    'CDC trigger helper: a row as urlencoded name=value pairs (logutriga data).';

-- The body shared by the three triggers. Returns true when a BEFORE trigger must
-- suppress the row change (SKIP). The checks come in PgQ's order, so the same invalid
-- setup raises the same error.
create or replace function pgque._trigger_event(
    i_format text, i_op text, i_when text, i_level text, i_relid oid,
    i_schema text, i_table text, i_args text[], i_new record, i_old record,
    i_search_path text)
returns boolean language plpgsql set search_path = pgque, pg_catalog, pg_temp as $$
declare
    c_fields constant text[] := array['ev_type', 'ev_data', 'ev_extra1', 'ev_extra2',
                                      'ev_extra3', 'ev_extra4'];
    c_magic constant text[] := array['_pgq_ev_type', '_pgq_ev_data', '_pgq_ev_extra1',
                                     '_pgq_ev_extra2', '_pgq_ev_extra3', '_pgq_ev_extra4'];
    -- what delimits the names in ignore= and key lists
    c_delims constant text := '[' || e', \t\n\r\f' || pg_catalog.chr(11) || ']';
    -- types whose text output tells whether two values are equal: bool, bytea, "char",
    -- name, int8, int2, int4, text, oid, varchar, date, time, timestamp, timestamptz, uuid
    c_text_decides constant oid[] :=
        '{16,17,18,19,20,21,23,25,26,1043,1082,1083,1114,1184,2950}';
    v_ev text[];  -- ev_type, ev_data, ev_extra1 .. ev_extra4
    -- arguments
    v_queue text;
    v_skip boolean := false;
    v_backup boolean := false;
    v_deny boolean := false;
    v_ignore text;
    v_pkey text;
    v_expr_kind text[] := '{}';  -- ev_type .. ev_extra4 or when, in argument order
    v_expr_sql text[] := '{}';
    v_arg text;
    v_kind text;
    -- the key list: as written (matched against column names, logutriga's ev_type),
    -- as names (jsontriga's pkey)
    v_keys text;
    v_key_names text[];
    v_key_words text[];     -- the key and ignore= lists split at the delimiters
    v_ignore_words text[];
    -- per column, in attnum order
    v_names text[];
    v_types oid[];
    v_is_magic boolean[];
    v_is_key boolean[];
    v_omit boolean[];  -- not in the data: ignored or _pgq_ev_* columns
    v_text_decides boolean[];
    v_new_vals text[];
    v_old_vals text[];
    v_changed boolean[];
    v_render_new text;
    v_render_old text;
    -- UPDATE: equality checks where the text does not decide
    v_need_cmp boolean;
    v_exact_text boolean;
    v_cmp text[] := '{}';
    v_cmp_cols integer[] := '{}';
    v_equal boolean[];
    v_eq text;
    v_i integer;
    -- sqltriga
    v_set text;
    v_where text;
    -- expressions
    v_value text;
    v_type oid;
    v_when text;
    v_when_type oid;
begin
    -- Changes made in 'local' replication role (a replication tool applying data) are
    -- not captured: no event and no checks.
    if pg_catalog.current_setting('session_replication_role') = 'local' then
        return false;
    end if;
    if i_level <> 'ROW' and i_op <> 'TRUNCATE' then
        raise exception 'pgq Ins/Upd/Del trigger must be fired FOR EACH ROW'
            using detail = 'pgque:trigger_bad_setup';
    end if;

    -- Arguments.
    if coalesce(pg_catalog.cardinality(i_args), 0) < 1 then
        raise exception 'pgq trigger must have destination queue as argument'
            using detail = 'pgque:trigger_bad_argument';
    end if;
    v_queue := i_args[pg_catalog.array_lower(i_args, 1)];
    foreach v_arg in array i_args[pg_catalog.array_lower(i_args, 1) + 1:] loop
        if v_arg = 'SKIP' then
            v_skip := true;
        elsif v_arg = 'backup' then
            v_backup := true;
        elsif v_arg = 'deny' then
            v_deny := true;
        elsif pg_catalog.starts_with(v_arg, 'ignore=') then
            v_ignore := pg_catalog.substr(v_arg, 8);
        elsif pg_catalog.starts_with(v_arg, 'pkey=') then
            v_pkey := pg_catalog.substr(v_arg, 6);
        elsif v_arg ~ '^(ev_type|ev_data|ev_extra[1-4]|when)=' then
            v_kind := pg_catalog.split_part(v_arg, '=', 1);
            if not v_kind = any (v_expr_kind) then  -- the first of a kind counts
                v_expr_kind := v_expr_kind || v_kind;
                v_expr_sql := v_expr_sql || pg_catalog.substr(v_arg, pg_catalog.length(v_kind) + 2);
            end if;
        else
            raise exception 'bad param to pgq trigger' using detail = 'pgque:trigger_bad_argument';
        end if;
    end loop;

    if i_op = 'TRUNCATE' then
        if pg_catalog.cardinality(v_expr_kind) > 0 then
            raise exception 'Custom expressions do not make sense for truncater trigger'
                using detail = 'pgque:trigger_bad_argument';
        elsif v_ignore is not null then
            raise exception 'Column ignore does not make sense for truncate trigger'
                using detail = 'pgque:trigger_bad_argument';
        elsif v_pkey is not null then
            raise exception 'Custom pkey_list does not make sense for truncate trigger'
                using detail = 'pgque:trigger_bad_argument';
        elsif v_backup then
            raise exception 'Backup does not make sense for truncate trigger'
                using detail = 'pgque:trigger_bad_argument';
        end if;
    end if;

    -- The key list: pkey= as written, else the primary key's columns (INCLUDE ones too)
    -- in index order, joined by commas.
    if v_pkey is not null then
        v_keys := v_pkey;
        v_key_names := pg_catalog.regexp_split_to_array(v_pkey, ',');
    else
        select coalesce(pg_catalog.string_agg(a.attname::text, ',' order by k.n), ''),
               coalesce(pg_catalog.array_agg(a.attname::text order by k.n), '{}')
          into v_keys, v_key_names
          from pg_catalog.pg_index i
         cross join lateral pg_catalog.unnest(i.indkey::pg_catalog.int2[])
               with ordinality as k(attnum, n)
          join pg_catalog.pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
         where i.indrelid = i_relid
           and i.indisprimary;
    end if;

    if i_op in ('UPDATE', 'DELETE') and v_keys = '' then
        raise exception 'Update/Delete on table without pkey'
            using detail = 'pgque:trigger_no_pkey';
    end if;
    if v_skip and i_when = 'AFTER' then
        raise exception 'SKIP does not work in AFTER trigger.'
            using detail = 'pgque:trigger_bad_argument';
    end if;
    if v_deny then
        raise exception 'Table ''%.%'' to queue ''%'': change not allowed (%)',
                        i_schema, i_table, v_queue, i_op
            using detail = 'pgque:trigger_denied';
    end if;

    v_ev := array[null, null, i_schema || '.' || i_table, null, null, null];
    v_key_words := pg_catalog.regexp_split_to_array(v_keys, c_delims || '+');
    v_ignore_words := pg_catalog.regexp_split_to_array(v_ignore, c_delims || '+');

    if i_op = 'TRUNCATE' then
        if i_format = 'json' then
            v_ev[1] := pg_catalog.format(
                '{"op":"TRUNCATE","table":[%s,%s],"pkey":[%s]}',
                pg_catalog.to_json(i_schema), pg_catalog.to_json(i_table),
                (select coalesce(pg_catalog.string_agg(pg_catalog.to_json(k)::text, ','), '')
                   from pg_catalog.unnest(v_key_names) as k));
            v_ev[2] := '{}';
        else
            v_ev[1] := 'R';
            v_ev[2] := '';
        end if;
        perform pgque.insert_event(v_queue, v_ev[1], v_ev[2], v_ev[3], v_ev[4], v_ev[5], v_ev[6]);
        return v_skip;
    end if;

    -- The table's columns, and SQL that renders each value of the new ($1) and the old
    -- ($2) row: its text output, or for jsontriga a JSON value (except for the _pgq_ev_*
    -- columns, which are field values). Of the old row of an UPDATE only what is needed
    -- is rendered. A name without delimiter characters is in a list exactly when it is
    -- one of the list's delimited words.
    v_need_cmp := i_op = 'UPDATE' and (i_format = 'sql' or v_ignore is not null);
    select coalesce(pg_catalog.array_agg(c.name order by c.attnum), '{}'),
           coalesce(pg_catalog.array_agg(c.typ order by c.attnum), '{}'),
           coalesce(pg_catalog.array_agg(c.magic order by c.attnum), '{}'),
           coalesce(pg_catalog.array_agg(c.is_key order by c.attnum), '{}'),
           coalesce(pg_catalog.array_agg(c.magic or c.ignored order by c.attnum), '{}'),
           coalesce(pg_catalog.array_agg(c.text_decides order by c.attnum), '{}'),
           coalesce(pg_catalog.string_agg(pg_catalog.format(r.render, r.new_ref), ', '
                                          order by c.attnum), ''),
           coalesce(pg_catalog.string_agg(case when i_op = 'DELETE' or v_backup or v_need_cmp
                                                    or c.is_key
                                               then pg_catalog.format(r.render, r.old_ref)
                                               else 'null' end, ', '
                                          order by c.attnum), '')
      into v_names, v_types, v_is_magic, v_is_key, v_omit, v_text_decides,
           v_render_new, v_render_old
      from (select a.attnum, a.attname::text as name, a.atttypid as typ,
                   a.attgenerated = 's' as generated,
                   a.attname::text = any (c_magic) as magic,
                   case when a.attname !~ c_delims then a.attname::text = any (v_key_words)
                        else pgque._trigger_list_has(v_keys, a.attname::text)
                   end as is_key,
                   case when v_ignore is null then false
                        when a.attname !~ c_delims then a.attname::text = any (v_ignore_words)
                        else pgque._trigger_list_has(v_ignore, a.attname::text)
                   end as ignored,
                   a.atttypid = any (c_text_decides)
                       and coalesce(co.collisdeterministic, true) as text_decides
              from pg_catalog.pg_attribute a
              left join pg_catalog.pg_collation co on co.oid = a.attcollation
             where a.attrelid = i_relid
               and a.attnum > 0
               and not a.attisdropped) c
     cross join lateral (
            select case
                       when i_format <> 'json' or c.magic then
                           'case when pg_catalog.num_nulls(%1$s) = 1 then null'
                           ' else pg_catalog.format(''%%s'', %1$s) end'
                       when c.typ in (20, 21, 23) then  -- int8, int2, int4: JSON numbers
                           'case when pg_catalog.num_nulls(%1$s) = 1 then ''null'''
                           ' else pg_catalog.format(''%%s'', %1$s) end'
                       when c.typ = 16 then  -- bool
                           'case %1$s when true then ''true'' when false then ''false'''
                           ' else ''null'' end'
                       when c.typ in (1082, 1114, 1184) then  -- date, timestamp(tz): ISO 8601
                           'coalesce(pg_catalog.to_json(%1$s)::text, ''null'')'
                       else
                           'case when pg_catalog.num_nulls(%1$s) = 1 then ''null'''
                           ' else pg_catalog.to_json(pg_catalog.format(''%%s'', %1$s))::text end'
                   end as render,
                   -- PL/pgSQL shows stored generated columns as NULL in a BEFORE trigger;
                   -- the row PgQ's C trigger sees on UPDATE still has the old values.
                   pg_catalog.format(case when c.generated and i_op = 'UPDATE' and i_when = 'BEFORE'
                                          then '($2).%I' else '($1).%I' end,
                                     c.name) as new_ref,
                   pg_catalog.format('($2).%I', c.name) as old_ref) r;

    execute pg_catalog.format('select array[%s]::text[], array[%s]::text[]',
                              case when i_op <> 'DELETE' then v_render_new else '' end,
                              case when i_op <> 'INSERT' then v_render_old else '' end)
       into v_new_vals, v_old_vals
      using i_new, i_old;

    if i_op = 'UPDATE' then
        -- Which columns changed: the key columns always, and all of them when updates
        -- of ignored columns only must be recognised. Equal renderings mean equal
        -- values; different ones mean a change unless the type's equality (that of its
        -- default btree or hash operator class) says otherwise, as for 1.0 and 1.00.
        -- With extra_float_digits below 1 float output is rounded, so equal text no
        -- longer means equal values.
        v_exact_text := pg_catalog.current_setting('extra_float_digits')::integer > 0;
        v_changed := array(select (v_need_cmp or v_is_key[i])
                                  and v_new_vals[i] is distinct from v_old_vals[i]
                             from pg_catalog.generate_subscripts(v_names, 1) as i
                            order by i);
        for v_i in 1 .. pg_catalog.cardinality(v_names) loop
            continue when not (v_need_cmp or v_is_key[v_i])
                          or (not v_changed[v_i] and v_exact_text)
                          or v_text_decides[v_i]
                          or v_new_vals[v_i] is null or v_old_vals[v_i] is null;
            v_eq := pgque._trigger_eq_operator(v_types[v_i], false);
            continue when v_eq is null;
            v_cmp_cols := v_cmp_cols || v_i;
            v_cmp := v_cmp || pg_catalog.format('($2).%1$I %2$s ($1).%1$I', v_names[v_i], v_eq);
        end loop;
        if pg_catalog.cardinality(v_cmp_cols) > 0 then
            execute pg_catalog.format('select array[%s]::boolean[]',
                                      pg_catalog.array_to_string(v_cmp, ', '))
               into v_equal
              using i_new, i_old;
            for v_i in 1 .. pg_catalog.cardinality(v_cmp_cols) loop
                v_changed[v_cmp_cols[v_i]] := not coalesce(v_equal[v_i], false);
            end loop;
        end if;

        if true = any (select v_changed[i] and v_is_key[i]
                         from pg_catalog.generate_subscripts(v_names, 1) as i) then
            raise exception 'primary key update not allowed'
                using detail = 'pgque:trigger_pkey_update';
        end if;
        -- An update of ignored (or _pgq_ev_*) columns only produces no event; one that
        -- changed nothing at all still does.
        if v_need_cmp
           and true = any (v_changed)
           and not true = any (select v_changed[i] and not v_omit[i]
                                 from pg_catalog.generate_subscripts(v_names, 1) as i) then
            return v_skip;
        end if;
    end if;

    -- ev_type, ev_data, and the old row for backup.
    if i_format = 'json' then
        v_ev[1] := pg_catalog.format(
            '{"op":%s,"table":[%s,%s],"pkey":[%s]}',
            pg_catalog.to_json(i_op), pg_catalog.to_json(i_schema), pg_catalog.to_json(i_table),
            (select coalesce(pg_catalog.string_agg(pg_catalog.to_json(k)::text, ','), '')
               from pg_catalog.unnest(v_key_names) as k));
        v_ev[2] := pgque._trigger_json_row(
            v_names, case when i_op = 'DELETE' then v_old_vals else v_new_vals end, v_omit);
        if v_backup and i_op = 'UPDATE' then
            v_ev[4] := pgque._trigger_json_row(v_names, v_old_vals, v_omit);
        end if;
    elsif i_format = 'logu' then
        v_ev[1] := pg_catalog.left(i_op, 1) || ':' || v_keys;
        v_ev[2] := pgque._trigger_urlencode_row(
            v_names, case when i_op = 'DELETE' then v_old_vals else v_new_vals end, v_omit);
        if v_backup and i_op = 'UPDATE' then
            v_ev[4] := pgque._trigger_urlencode_row(v_names, v_old_vals, v_omit);
        end if;
    else
        v_ev[1] := pg_catalog.left(i_op, 1);
        if i_op = 'INSERT' then
            v_ev[2] := (
                select pg_catalog.format(
                           '(%s) values (%s)',
                           coalesce(pg_catalog.string_agg(pg_catalog.quote_ident(v_names[i]), ','
                                                          order by i), ''),
                           coalesce(pg_catalog.string_agg(
                                        coalesce(pg_catalog.quote_literal(v_new_vals[i]), 'null'),
                                        ',' order by i), ''))
                  from pg_catalog.generate_subscripts(v_names, 1) as i
                 where not v_omit[i]);
        else
            -- The old row's key, in column order; a NULL key value is an error.
            if not true = any (v_is_key)
               or exists (select 1
                            from pg_catalog.generate_subscripts(v_names, 1) as i
                           where v_is_key[i] and v_old_vals[i] is null) then
                raise exception 'logtriga: Unexpected NULL key value'
                    using detail = 'pgque:trigger_null_key';
            end if;
            select pg_catalog.string_agg(pg_catalog.quote_ident(v_names[i]) || '='
                                         || pg_catalog.quote_literal(v_old_vals[i]),
                                         ' and ' order by i)
              into v_where
              from pg_catalog.generate_subscripts(v_names, 1) as i
             where v_is_key[i];
            if i_op = 'DELETE' then
                v_ev[2] := v_where;
            else
                select pg_catalog.string_agg(pg_catalog.quote_ident(v_names[i]) || '='
                                             || pg_catalog.quote_nullable(v_new_vals[i]),
                                             ',' order by i)
                  into v_set
                  from pg_catalog.generate_subscripts(v_names, 1) as i
                 where v_changed[i] and not v_omit[i];
                if v_set is null then  -- nothing changed: set the first key column to itself
                    select pg_catalog.quote_ident(v_names[i]) || '='
                           || pg_catalog.quote_nullable(v_old_vals[i])
                      into v_set
                      from pg_catalog.generate_subscripts(v_names, 1) as i
                     where v_is_key[i]
                     order by i
                     limit 1;
                end if;
                v_ev[2] := v_set || ' where ' || v_where;
            end if;
        end if;
        if v_backup and i_op = 'UPDATE' then  -- urlencoded, as PgQ's sqltriga does
            v_ev[4] := pgque._trigger_urlencode_row(v_names, v_old_vals, v_omit);
        end if;
    end if;

    -- Overrides: the _pgq_ev_* columns, then the expression arguments in argument order.
    for v_i in 1 .. pg_catalog.cardinality(v_names) loop
        if v_is_magic[v_i] then
            v_ev[pg_catalog.array_position(c_magic, v_names[v_i])] :=
                case when i_op = 'DELETE' then v_old_vals[v_i] else v_new_vals[v_i] end;
        end if;
    end loop;
    for v_i in 1 .. pg_catalog.cardinality(v_expr_kind) loop
        select e.o_value, e.o_type
          into v_value, v_type
          from pgque._trigger_eval(v_expr_sql[v_i],
                                   case when i_op = 'DELETE' then i_old else i_new end,
                                   i_search_path) as e;
        if v_expr_kind[v_i] = 'when' then
            v_when := v_value;
            v_when_type := v_type;
        else
            v_ev[pg_catalog.array_position(c_fields, v_expr_kind[v_i])] := v_value;
        end if;
    end loop;
    if v_when_type is not null then
        if v_when_type <> 'pg_catalog.bool'::pg_catalog.regtype then
            raise exception 'when= query result must be boolean, got=%', v_when_type
                using detail = 'pgque:trigger_bad_expression';
        elsif v_when is null then
            raise exception 'when= should not be NULL'
                using detail = 'pgque:trigger_bad_expression';
        elsif not v_when::boolean then
            return v_skip;
        end if;
    end if;

    perform pgque.insert_event(v_queue, v_ev[1], v_ev[2], v_ev[3], v_ev[4], v_ev[5], v_ev[6]);
    return v_skip;
end
$$;
comment on function pgque._trigger_event(
    text, text, text, text, oid, text, text, text[], record, record, text) is
    'CDC trigger helper: the body of jsontriga, logutriga and sqltriga; true means SKIP the row.';

create or replace function pgque.jsontriga()
returns trigger language plpgsql security invoker as $$
begin
    if pgque._trigger_event('json', tg_op, tg_when, tg_level, tg_relid, tg_table_schema,
                            tg_table_name, tg_argv, new, old,
                            pg_catalog.current_setting('search_path')) then
        return null;
    elsif tg_op OPERATOR(pg_catalog.=) 'DELETE' then
        return old;
    end if;
    return new;
end
$$;
comment on function pgque.jsontriga() is
    'Trigger: queues every row change (and TRUNCATE) as a JSON event. Arguments: queue name, '
    'then SKIP, backup, deny, ignore=cols, pkey=cols, and ev_type=, ev_data=, ev_extra1..4=, '
    'when= expressions.';

create or replace function pgque.logutriga()
returns trigger language plpgsql security invoker as $$
begin
    if pgque._trigger_event('logu', tg_op, tg_when, tg_level, tg_relid, tg_table_schema,
                            tg_table_name, tg_argv, new, old,
                            pg_catalog.current_setting('search_path')) then
        return null;
    elsif tg_op OPERATOR(pg_catalog.=) 'DELETE' then
        return old;
    end if;
    return new;
end
$$;
comment on function pgque.logutriga() is
    'Trigger: queues every row change (and TRUNCATE) as an urlencoded event (type I:/U:/D: + key). '
    'Arguments as for jsontriga.';

create or replace function pgque.sqltriga()
returns trigger language plpgsql security invoker as $$
begin
    if pgque._trigger_event('sql', tg_op, tg_when, tg_level, tg_relid, tg_table_schema,
                            tg_table_name, tg_argv, new, old,
                            pg_catalog.current_setting('search_path')) then
        return null;
    elsif tg_op OPERATOR(pg_catalog.=) 'DELETE' then
        return old;
    end if;
    return new;
end
$$;
comment on function pgque.sqltriga() is
    'Trigger: queues every row change (and TRUNCATE) as a SQL fragment event (type I/U/D). '
    'Arguments as for jsontriga.';

-- file: structure/stale_routines.sql
-- Routines an earlier version had and this one does not: dropped, so that a
-- removed function or overload does not outlive the upgrade.
--
-- The list of this build's routines is the install itself: every routine of
-- the manifest is written with CREATE OR REPLACE in this transaction, which
-- writes a new pg_proc row even for an unchanged definition. A pgque routine
-- whose row is older than this transaction (age(xmin) > 0) is therefore not
-- part of this build. Never dropped: a routine something else depends on (a
-- user's trigger on a CDC trigger function, a view, a default), since that
-- would need CASCADE; and nothing outside schema pgque. Runs after every
-- function file and before grants.sql.
do $stale$
declare
    v_stale text;
begin
    select pg_catalog.string_agg(p.oid::pg_catalog.regprocedure::text, ', ' order by p.oid)
      into v_stale
      from pg_catalog.pg_proc p
     where p.pronamespace = 'pgque'::pg_catalog.regnamespace
       and pg_catalog.age(p.xmin) > 0
       and not exists (
           select 1 from pg_catalog.pg_depend d
            where d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass
              and d.refobjid = p.oid and d.deptype in ('n', 'a'));
    if v_stale is not null then
        execute 'drop routine ' || v_stale;  -- one statement for them all
    end if;
end
$stale$;

-- file: structure/grants.sql
-- Privileges, re-applied by every install.
--
-- Deny by default: PUBLIC gets nothing. pgque_reader consumes, pgque_writer
-- produces (and cannot consume), pgque_admin (a member of both) manages
-- queues and maintenance. Functions run as their owner (SECURITY DEFINER
-- with a pinned search_path), so the roles need EXECUTE only. Readers and
-- admins may SELECT the tables; no pgque role may write, truncate, reference
-- or put a trigger on any of them: every change of pgque's bookkeeping goes
-- through a function that checks what it stores (docs/operations.md,
-- "Security model").

revoke all on all routines in schema pgque from public;
revoke all on all tables in schema pgque from public;
revoke all on all sequences in schema pgque from public;
revoke all on schema pgque from public;
-- Earlier versions granted the admin every table privilege: take them back.
revoke all on all tables in schema pgque from pgque_reader, pgque_writer, pgque_admin;
revoke all on all sequences in schema pgque from pgque_reader, pgque_writer, pgque_admin;

grant usage on schema pgque to pgque_reader, pgque_writer, pgque_admin;
grant select on all tables in schema pgque to pgque_reader;
grant select on all sequences in schema pgque to pgque_reader;
grant select on all tables in schema pgque to pgque_admin;
grant select on all sequences in schema pgque to pgque_admin;

-- The admin may run every public function; internal helpers (names starting
-- with an underscore) are reached only through the functions that use them.
do $grants$
declare
    v_fn regprocedure;
begin
    for v_fn in
        select p.oid::regprocedure
          from pg_catalog.pg_proc p
         where p.pronamespace = 'pgque'::regnamespace
           and p.proname not like '\_%'
           and p.prokind in ('f', 'p')
    loop
        execute pg_catalog.format('grant execute on %s %s to pgque_admin',
                       case when (select prokind from pg_catalog.pg_proc where oid = v_fn) = 'p'
                            then 'procedure' else 'function' end,
                       v_fn);
    end loop;
end
$grants$;

-- Internal functions that admins call: the ticker loops and run_maint()
-- (with the caller's rights), the SDK's Ticker and its consumers' ticks.
grant execute on function
    pgque._ticker_next_slot(timestamptz, timestamptz),
    pgque._move_retry_events(integer),
    pgque._run_extra_maint(text, text),
    pgque._ticker_arm_wake(),
    pgque._consumer_tick(text, interval),
    pgque._ticker_sequences(),
    pgque._tick_stragglers(text)
to pgque_admin;

grant execute on function
    pgque.version(),
    pgque.register_consumer(text, text),
    pgque.register_consumer_at(text, text, bigint),
    pgque.unregister_consumer(text, text),
    pgque.next_batch(text, text),
    pgque.next_batch_info(text, text),
    pgque.next_batch_custom(text, text, interval, int4, interval),
    pgque.get_batch_events(bigint),
    pgque.get_batch_info(bigint),
    pgque.finish_batch(bigint),
    pgque.event_retry(bigint, bigint, timestamptz),
    pgque.event_retry(bigint, bigint, integer),
    pgque.get_queue_info(text),
    pgque.get_consumer_info(text, text),
    pgque.subscribe(text, text),
    pgque.unsubscribe(text, text),
    pgque.receive(text, text, integer),
    pgque.ack(bigint),
    pgque.nack(bigint, pgque.message, interval, text),
    pgque.nack(bigint, bigint, interval, text),
    pgque.dead_letter_event(bigint, bigint, text),
    pgque.dlq_inspect(text, integer),
    pgque.dlq_get(bigint),
    pgque.recent_events(text, integer, text),
    pgque.register_subconsumer(text, text, text, boolean),
    pgque.subscribe_subconsumer(text, text, text, boolean),
    pgque.unregister_subconsumer(text, text, text, integer),
    pgque.unsubscribe_subconsumer(text, text, text, integer),
    pgque.touch_subconsumer(text, text, text),
    pgque.next_batch(text, text, text, interval),
    pgque.next_batch_custom(text, text, text, interval, int4, interval, interval),
    pgque.receive_coop(text, text, text, integer, interval),
    pgque.subscribe_slot(text, text, integer, integer),
    pgque.unsubscribe_slot(text, text, integer),
    pgque.claim_slot(text, text, integer, text, interval),
    pgque.release_slot(text, text, integer, text),
    pgque.receive_partitioned(text, text, integer, integer, text, integer),
    pgque.ack_partitioned(text, text, integer, integer, text),
    pgque.nack_partitioned(text, text, integer, integer, text, pgque.message, interval, text),
    pgque.dead_letter_partitioned(text, text, integer, integer, text, bigint, text)
to pgque_reader;
grant select on pgque.partition_slot_status to pgque_reader;
-- Idempotency keys are nobody's business but send_idem's.
revoke all on pgque.idem from pgque_reader, pgque_admin;
-- The coordination rows: the ticker lease's holder token is the leader's
-- alone (ticker_leader() shows who leads), the mutexes nobody's.
revoke all on pgque.ticker_leader, pgque.mutex, pgque.tick_lock
    from pgque_reader, pgque_admin;
-- Staged, unpublished Spark sink rows belong to the sink's definer functions.
revoke all on pgque.spark_staging, pgque.spark_commits from pgque_reader;

grant execute on function
    pgque.version(),
    pgque.insert_event(text, text, text),
    pgque.insert_event(text, text, text, text, text, text, text),
    pgque.send(text, text),
    pgque.send(text, jsonb),
    pgque.send(text, text, text),
    pgque.send(text, text, jsonb),
    pgque.send(text, text, text, text, text, text, text),
    pgque.send(text, text, jsonb, text, text, text, text),
    pgque.send_batch(text, text[]),
    pgque.send_batch(text, jsonb[]),
    pgque.send_batch(text, text, text[]),
    pgque.send_batch(text, text, jsonb[]),
    pgque.send_batch(text, text[], text[], text[], text[], text[], text[]),
    pgque.send_batch(text, text[], jsonb[], text[], text[], text[], text[]),
    pgque.send_at(text, text, jsonb, timestamptz),
    pgque.send_at(text, text, text, timestamptz),
    pgque.dlq_replay(bigint),
    pgque.dlq_replay_all(text),
    pgque.send(text, text, jsonb, text),
    pgque.send(text, text, text, text),
    pgque.send_idem(text, text, text, text, interval, text),
    pgque.send_idem(text, text, jsonb, text, interval, text)
to pgque_writer;

-- Monitoring and the SQL test helpers are a reader's business; test_send
-- is a writer's.
grant execute on function
    pgque.queue_stats(),
    pgque.consumer_stats(),
    pgque.ticker_leader(),
    pgque.schedules(),
    pgque.queue_health(),
    pgque.otel_metrics(),
    pgque.throughput(text, interval, interval),
    pgque.error_rate(text, interval, interval),
    pgque.in_flight(text),
    pgque.stuck_consumers(interval),
    pgque.latency_percentiles(text, text, interval),
    pgque.test_consume(text, text, text),
    pgque.assert_empty(text),
    pgque.assert_dlq_empty(text)
to pgque_reader;
grant execute on function pgque.test_send(text, jsonb) to pgque_writer;

-- Readers run Spark sources, writers Spark sinks.
grant execute on function
    pgque.spark_range_sql(text, bigint, bigint, integer, integer),
    pgque.spark_read_range(text, bigint, bigint, integer, integer),
    pgque.spark_latest_tick(text),
    pgque.spark_start_tick(text, text, text),
    pgque.spark_next_tick(text, text, bigint, bigint, integer, bigint),
    pgque.spark_advance(text, text, bigint)
to pgque_reader;
grant execute on function
    pgque.spark_latest_tick(text),
    pgque.spark_stage(text, text, bigint, text[], text[], text[], text[], text[], text[]),
    pgque.spark_publish(text, text, text[], bigint[], text, bigint),
    pgque.spark_discard(text)
to pgque_writer;

-- The DML user runs these (SECURITY INVOKER), so pgque_writer needs them, as in PgQ.
grant execute on function
    pgque.jsontriga(),
    pgque.logutriga(),
    pgque.sqltriga(),
    pgque._trigger_urlencode(text),
    pgque._trigger_json_row(text[], text[], boolean[]),
    pgque._trigger_urlencode_row(text[], text[], boolean[]),
    pgque._trigger_list_has(text, text),
    pgque._trigger_eq_operator(oid, boolean),
    pgque._trigger_eval(text, record, text),
    pgque._trigger_event(text, text, text, text, oid, text, text, text[], record, record, text)
to pgque_writer;

-- Owner only: not even the admin.
do $owner_only$
declare
    v_fn regprocedure;
begin
    for v_fn in
        select f from pg_catalog.unnest(array[
            pg_catalog.to_regprocedure('pgque.insert_event_bulk(text, text, text[])'),
            pg_catalog.to_regprocedure('pgque.register_maint_function(regprocedure)'),
            pg_catalog.to_regprocedure('pgque.unregister_maint_function(regprocedure)'),
            pg_catalog.to_regprocedure('pgque.uninstall()')]) f
         where f is not null
    loop
        execute pg_catalog.format('revoke execute on function %s from pgque_admin', v_fn);
    end loop;
end
$owner_only$;

-- The insert routers and the batch readers (the tops and routers, and the
-- middle routers, leaves and readers of the queues that exist; the
-- stale-routine step dropped the previous build's).
do $router$
begin
    perform pgque._rebuild_routers();
end
$router$;

-- file: structure/commit.sql
commit;
