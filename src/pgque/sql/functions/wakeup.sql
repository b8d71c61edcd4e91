-- Wakeups: producers wake a waiting ticker at commit, one NOTIFY per wait.
--
-- A ticker with nothing to do arms the wakeup (_ticker_arm_wake: the
-- sequence pgque.ticker_wake_seq set to 0) and waits on channel
-- pgque_ticker_wake. Every insert path calls _wake after its routed insert:
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
returns void
language plpgsql
as $$
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
-- event sequence and its last tick's, in that order: an event the ticker
-- does not see here draws its number after the arming, so it (or an event
-- of the same arming) notifies at commit. A sequence never drawn from reads
-- 0 (PgQ's gauge reads 1 both before and after a queue's first event).
create or replace function pgque._ticker_arm_wake()
returns table (queue_name text, event_seq bigint, tick_event_seq bigint)
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
begin
    perform pg_catalog.setval('pgque.ticker_wake_seq'::regclass, 0, true);
    return query select s.queue_name, s.event_seq, s.tick_event_seq from pgque._ticker_sequences() s;
end
$$;

-- Internal: every tickable queue's event sequence (0: never drawn from) and
-- the sequence value its last tick recorded (NULL: no tick yet).
create or replace function pgque._ticker_sequences()
returns table (queue_name text, event_seq bigint, tick_event_seq bigint)
language sql stable
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
    select q.queue_name,
           coalesce(pg_catalog.pg_sequence_last_value(q.queue_event_seq::regclass), 0),
           (select t.tick_event_seq from pgque.tick t
             where t.tick_queue = q.queue_id order by t.tick_id desc limit 1)
      from pgque.queue q
     where not q.queue_ticker_paused and not q.queue_external_ticker
$$;
