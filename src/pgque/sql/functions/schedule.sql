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
