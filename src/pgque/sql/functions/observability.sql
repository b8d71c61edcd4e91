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
