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
