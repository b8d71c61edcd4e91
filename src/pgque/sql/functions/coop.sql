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

-- Internal: checks cooperative names; returns the member's consumer name.
create or replace function pgque._coop_member_name(
    i_queue text, i_consumer text, i_subconsumer text)
returns text
language plpgsql immutable
as $$
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
returns integer
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_member_name text := pgque._coop_member_name(i_queue, i_consumer, i_subconsumer);
    v_main record;
    v_member record;
    v_co_id integer;
    v_created integer := 0;
begin
    perform pgque._registration_queue(i_queue, true);
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
    insert into pgque.consumer (co_name) values (v_member_name) on conflict (co_name) do nothing;
    select co_id into v_co_id from pgque.consumer where co_name = v_member_name for update;
    insert into pgque.subscription (sub_id, sub_queue, sub_consumer, sub_last_tick, sub_role)
    values (v_main.sub_id, v_main.sub_queue, v_co_id, null, 'coop_member');
    perform pgque.log_event('info', 'consumer', 'subconsumer registered', jsonb_build_object(
        'queue', i_queue, 'consumer', i_consumer, 'subconsumer', i_subconsumer));
    return 1;
end
$$;
comment on function pgque.register_subconsumer(text, text, text, boolean) is
    'Adds a subconsumer to a cooperative consumer, creating the group if needed (converting a normal consumer only with i_convert_normal). Returns 1 when something was created, else 0.';

create or replace function pgque.subscribe_subconsumer(
    i_queue text, i_consumer text, i_subconsumer text, i_convert_normal boolean default false)
returns integer
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
begin
    return pgque.register_subconsumer(i_queue, i_consumer, i_subconsumer, i_convert_normal);
end
$$;
comment on function pgque.subscribe_subconsumer(text, text, text, boolean) is
    'Alias of register_subconsumer.';

-- Internal: the nack policy for every event of an open batch at once.
create or replace function pgque._nack_batch(i_batch_id bigint, i_retry_after interval, i_reason text)
returns integer
language plpgsql
as $$
declare
    v_max_retries integer;
    v_event pgque.event_template;
    v_count integer := 0;
begin
    select coalesce(q.queue_max_retries, 5) into v_max_retries
      from pgque.subscription s join pgque.queue q on q.queue_id = s.sub_queue
     where s.sub_batch = i_batch_id;
    for v_event in
        select * from pgque._batch_events_by_id(i_batch_id, null)
         where coalesce(ev_retry, 0) >= v_max_retries
    loop
        perform pgque._dead_letter(i_batch_id, v_event, i_reason);
        v_count := v_count + 1;
    end loop;
    insert into pgque.retry_queue
        (ev_retry_after, ev_queue, ev_id, ev_time, ev_txid, ev_owner, ev_retry,
         ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
    select current_timestamp + i_retry_after, s.sub_queue, e.ev_id, e.ev_time, null, s.sub_id,
           coalesce(e.ev_retry, 0) + 1, e.ev_type, e.ev_data,
           e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4
      from pgque._batch_events_by_id(i_batch_id, null) e
      join pgque.subscription s on s.sub_batch = i_batch_id
     where coalesce(e.ev_retry, 0) < v_max_retries
    on conflict (ev_owner, ev_id) do nothing;
    return v_count;
end
$$;

create or replace function pgque.unregister_subconsumer(
    i_queue text, i_consumer text, i_subconsumer text, i_batch_handling integer default 0)
returns integer
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
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
    perform pgque.log_event('info', 'consumer', 'subconsumer unregistered', jsonb_build_object(
        'queue', i_queue, 'consumer', i_consumer, 'subconsumer', i_subconsumer));
    return 1;
end
$$;
comment on function pgque.unregister_subconsumer(text, text, text, integer) is
    'Removes a subconsumer; with an open batch only when i_batch_handling = 1, which first retries or dead-letters its events. Returns 1, or 0 when not registered.';

create or replace function pgque.unsubscribe_subconsumer(
    i_queue text, i_consumer text, i_subconsumer text, i_batch_handling integer default 0)
returns integer
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
begin
    return pgque.unregister_subconsumer(i_queue, i_consumer, i_subconsumer, i_batch_handling);
end
$$;
comment on function pgque.unsubscribe_subconsumer(text, text, text, integer) is
    'Alias of unregister_subconsumer.';

create or replace function pgque.touch_subconsumer(i_queue text, i_consumer text, i_subconsumer text)
returns integer
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_count integer;
begin
    update pgque.subscription s set sub_active = now()
      from pgque.queue q, pgque.consumer c
     where q.queue_id = s.sub_queue and c.co_id = s.sub_consumer
       and q.queue_name = i_queue
       and c.co_name = pgque._coop_member_name(i_queue, i_consumer, i_subconsumer)
       and s.sub_role = 'coop_member';
    get diagnostics v_count = row_count;
    return v_count;
end
$$;
comment on function pgque.touch_subconsumer(text, text, text) is
    'Heartbeat of a subconsumer (its last-seen time), so others do not take over its batch. Returns rows touched.';

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
    if i_dead_interval < interval '0' then
        raise exception 'dead_interval must be a non-negative interval or NULL, got % (consumer % on queue %)',
            i_dead_interval, v_member_name, i_queue using detail = 'pgque:invalid_argument';
    end if;
    select s.sub_queue, s.sub_consumer, s.sub_id, s.sub_batch, s.sub_last_tick, s.sub_next_tick
      into v_member
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
     where q.queue_name = i_queue and c.co_name = v_member_name and s.sub_role = 'coop_member'
       for no key update of s;
    if not found then
        raise exception 'Not subscriber to queue: %/%', i_queue, v_member_name
            using detail = 'pgque:consumer_not_found';
    end if;

    -- The member's open batch again; the call doubles as a heartbeat.
    if v_member.sub_batch is not null then
        update pgque.subscription set sub_active = now()
         where sub_queue = v_member.sub_queue and sub_consumer = v_member.sub_consumer;
        batch_id := v_member.sub_batch;
        prev_tick_id := v_member.sub_last_tick;
        next_tick_id := v_member.sub_next_tick;
        return;
    end if;

    -- One member of the group at a time from here: the main row is the cursor.
    select m.sub_consumer, m.sub_last_tick, t.tick_time, t.tick_event_seq into v_main
      from pgque.subscription m
      join pgque.tick t on t.tick_queue = m.sub_queue and t.tick_id = m.sub_last_tick
     where m.sub_queue = v_member.sub_queue and m.sub_id = v_member.sub_id
       and m.sub_role = 'coop_main'
       for no key update of m;
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
           and now() - s.sub_active > i_dead_interval  -- no overflow for any interval
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
                   sub_next_tick = next_tick_id, sub_active = now()
             where sub_queue = v_member.sub_queue and sub_consumer = v_member.sub_consumer;
            perform pgque.log_event('warning', 'consumer', 'batch taken over', jsonb_build_object(
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
       or (i_min_lag is not null and v_next.tick_time > now() - i_min_lag) then
        return;
    end if;

    batch_id := pg_catalog.nextval('pgque.batch_id_seq');
    prev_tick_id := v_main.sub_last_tick;
    next_tick_id := v_next.tick_id;
    update pgque.subscription
       set sub_batch = batch_id, sub_last_tick = prev_tick_id, sub_next_tick = next_tick_id,
           sub_active = now()
     where sub_queue = v_member.sub_queue and sub_consumer = v_member.sub_consumer;
    update pgque.subscription set sub_last_tick = next_tick_id, sub_active = now()
     where sub_queue = v_member.sub_queue and sub_consumer = v_main.sub_consumer;
end
$$;
comment on function pgque.next_batch_custom(text, text, text, interval, int4, interval, interval) is
    'Cooperative form: the subconsumer''s open batch, a dead member''s batch (taken over under a new id), or the group''s next batch under the thresholds.';

create or replace function pgque.next_batch(
    i_queue text, i_consumer text, i_subconsumer text, i_dead_interval interval default null)
returns bigint
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
begin
    return (pgque.next_batch_custom(i_queue, i_consumer, i_subconsumer, null, null, null,
                                    i_dead_interval)).batch_id;
end
$$;
comment on function pgque.next_batch(text, text, text, interval) is
    'Cooperative form of next_batch for one subconsumer. Returns the batch id or NULL.';

create or replace function pgque.receive_coop(
    i_queue text, i_consumer text, i_subconsumer text,
    i_max_return integer default 100, i_dead_interval interval default null)
returns setof pgque.message
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_batch_id bigint;
    v_returned bigint;
    v_windows integer := 0;
begin
    if i_max_return is null or i_max_return < 1 then
        raise exception 'pgque.receive_coop: max_return must be >= 1, got %',
            coalesce(i_max_return::text, 'NULL') using detail = 'pgque:invalid_argument';
    end if;
    perform pgque.register_subconsumer(i_queue, i_consumer, i_subconsumer, false);
    loop
        v_batch_id := (pgque.next_batch_custom(i_queue, i_consumer, i_subconsumer, null, null, null,
                                               i_dead_interval)).batch_id;
        if v_batch_id is null then
            return;
        end if;
        return query select * from pgque._batch_messages(v_batch_id, i_max_return);
        get diagnostics v_returned = row_count;
        if v_returned > 0 then
            return;
        end if;
        perform pgque.finish_batch(v_batch_id);
        v_windows := v_windows + 1;
        exit when v_windows >= 100;
    end loop;
end
$$;
comment on function pgque.receive_coop(text, text, text, integer, interval) is
    'Cooperative receive: registers the subconsumer if needed and returns up to i_max_return messages of its batch (taking over a batch idle longer than i_dead_interval). Empty batches are finished internally.';
