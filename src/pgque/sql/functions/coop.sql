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
