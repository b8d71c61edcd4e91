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
