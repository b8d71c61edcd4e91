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
