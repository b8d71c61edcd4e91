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
