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
