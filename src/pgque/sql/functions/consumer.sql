-- Registering and unregistering consumers.

-- Internal: the id of the queue a consumer registers on, or the error for a
-- missing one: PgQ's text (clients match it), with the queue's name appended
-- when i_named (the modern API) and always in the HINT.
create or replace function pgque._registration_queue(i_queue text, i_named boolean)
returns integer language plpgsql stable as $$
declare
    v_queue_id integer;
begin
    select queue_id into v_queue_id from pgque.queue where queue_name = i_queue;
    if not found then
        raise exception '%', 'Event queue not created yet'
                             || case when i_named then ': ' || coalesce(i_queue, '<NULL>') else '' end
            using detail = 'pgque:queue_not_found',
                  hint = 'There is no queue ' || coalesce(pg_catalog.quote_literal(i_queue), 'NULL')
                         || '; create it with pgque.create_queue(), or check the name.';
    end if;
    return v_queue_id;
end
$$;

-- Internal: refuses a consumer name of pgque's own: one with '#' (a partition
-- slot's subscription is named '<consumer>#<slot>/<n>', see partition.sql).
-- The public functions that register, open, close or move a consumer call
-- it; pgque's own code reaches its subscriptions through the internal
-- functions (_register_consumer_at, _next_batch_custom, _finish_batch ...).
-- A slot's name with i_hint (what to use instead) is partition_slot; any
-- other name with '#', or a slot's with a NULL hint, is invalid_argument.
create or replace function pgque._refuse_reserved_name(i_consumer text, i_hint text)
returns void language plpgsql as $$
begin
    if coalesce(pg_catalog.strpos(i_consumer, '#'), 0) = 0 then
        return;
    elsif i_hint is not null and pgque._is_slot_consumer(i_consumer) then
        raise exception 'consumer % is a partition slot consumer; %', i_consumer, i_hint
            using detail = 'pgque:partition_slot';
    end if;
    raise exception 'consumer name must not contain the reserved character #: %', i_consumer
        using detail = 'pgque:invalid_argument',
              hint = 'Names with # are reserved for the subscriptions of partition slots.';
end
$$;

create or replace function pgque.register_consumer_at(
    x_queue_name text, x_consumer_name text, x_tick_pos bigint)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    -- A missing queue is reported first, as before names were checked.
    perform pgque._registration_queue(x_queue_name, false);
    perform pgque._refuse_reserved_name(x_consumer_name, null);
    return pgque._register_consumer_at(x_queue_name, x_consumer_name, x_tick_pos);
end
$$;
comment on function pgque.register_consumer_at(text, text, bigint) is
    'Subscribes a consumer at the given tick, or moves an existing one there (dropping its open batch). Returns 1 when new, else 0.';

-- Internal: register_consumer_at for any name, pgque's own (a slot's) too.
create or replace function pgque._register_consumer_at(
    i_queue text, i_consumer text, i_tick_pos bigint)
returns integer language plpgsql as $$
declare
    v_queue_id integer;
    v_co_id integer;
    v_tick_id bigint;
begin
    v_queue_id := pgque._registration_queue(i_queue, false);
    perform pgque._check_name('consumer', i_consumer);

    -- The consumer row is locked, so an unregister elsewhere cannot delete it
    -- under us and two registrations of one name run one after the other.
    insert into pgque.consumer (co_name) values (i_consumer) on conflict (co_name) do nothing;
    select co_id into v_co_id from pgque.consumer where co_name = i_consumer for update;

    if i_tick_pos is not null then
        perform 1 from pgque.tick where tick_queue = v_queue_id and tick_id = i_tick_pos;
        if not found then
            raise exception 'cannot reposition, tick not found: %', i_tick_pos
                using detail = 'pgque:tick_not_found';
        end if;
    end if;

    perform 1 from pgque.subscription
     where sub_queue = v_queue_id and sub_consumer = v_co_id for update;
    if found then
        if i_tick_pos is not null then
            -- Repositioning drops the open batch, if any.
            update pgque.subscription
               set sub_last_tick = i_tick_pos, sub_batch = null, sub_next_tick = null,
                   sub_active = pg_catalog.now()
             where sub_queue = v_queue_id and sub_consumer = v_co_id;
        end if;
        return 0;
    end if;

    if i_tick_pos is null then
        select tick_id into v_tick_id from pgque.tick
         where tick_queue = v_queue_id order by tick_id desc limit 1;
        if not found then
            raise exception 'No ticks for this queue.  Please run ticker on database.'
                using detail = 'pgque:no_ticks';
        end if;
    else
        v_tick_id := i_tick_pos;
    end if;

    insert into pgque.subscription (sub_queue, sub_consumer, sub_last_tick)
    values (v_queue_id, v_co_id, v_tick_id);
    perform pgque.log_event('info', 'consumer', 'registered', pg_catalog.jsonb_build_object(
        'queue', i_queue, 'consumer', i_consumer, 'tick', v_tick_id));
    return 1;
end
$$;

create or replace function pgque.register_consumer(x_queue_name text, x_consumer_id text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque.register_consumer_at(x_queue_name, x_consumer_id, null); end $$;
comment on function pgque.register_consumer(text, text) is
    'Subscribes a consumer (the second argument is its name) at the latest tick. Returns 1 when new, 0 when already subscribed.';

create or replace function pgque.unregister_consumer(x_queue_name text, x_consumer_name text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_slot text[];
begin
    -- A partition slot's subscription goes as unsubscribe_slot removes it,
    -- with its lease row (drop_queue's force path comes here too). Names
    -- with '#' that are no slot's (earlier versions let register_consumer
    -- make them) can still be removed.
    if pgque._is_slot_consumer(x_consumer_name) then
        v_slot := pg_catalog.regexp_match(x_consumer_name, '^(.*)#([0-9]+)/([0-9]+)$');
        perform 1
           from pgque.queue q
           join pgque.partition_slot ps on ps.queue_id = q.queue_id
           join pgque.partition_consumer pc on pc.queue_id = ps.queue_id and pc.co_name = ps.co_name
           join pgque.subscription s on s.sub_queue = q.queue_id
           join pgque.consumer c on c.co_id = s.sub_consumer
          where q.queue_name = x_queue_name and c.co_name = x_consumer_name
            and ps.co_name = v_slot[1] and ps.slot::text = v_slot[2] and pc.n::text = v_slot[3];
        if found then
            perform pgque.unsubscribe_slot(x_queue_name, v_slot[1], v_slot[2]::integer);
            return 1;
        end if;
    end if;
    return pgque._unregister_consumer(x_queue_name, x_consumer_name);
end
$$;
comment on function pgque.unregister_consumer(text, text) is
    'Removes a subscription and its pending retries (a partition slot''s as unsubscribe_slot does). Returns 1, or 0 when it did not exist.';

-- Internal: unregister_consumer for any name, a slot's subscription alone too.
create or replace function pgque._unregister_consumer(i_queue text, i_consumer text)
returns integer language plpgsql as $$
declare
    v_sub record;
begin
    select s.sub_id, s.sub_queue, s.sub_consumer, s.sub_role into v_sub
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
     where q.queue_name = i_queue and c.co_name = i_consumer
       for update of s, c;
    if not found then
        return 0;
    end if;
    if v_sub.sub_role = 'coop_main' then
        raise exception 'cannot unregister cooperative main consumer with registered subconsumers'
            using detail = 'pgque:cooperative_consumer';
    elsif v_sub.sub_role = 'coop_member' then
        -- Retries belong to the whole group (shared sub_id): keep them.
        return pgque.unregister_subconsumer(
            i_queue, pg_catalog.split_part(i_consumer, '.', 1),
            pg_catalog.substr(i_consumer, pg_catalog.strpos(i_consumer, '.') + 1), 0);
    end if;

    -- Pending retries belong to this registration only.
    delete from pgque.retry_queue where ev_owner = v_sub.sub_id and ev_queue = v_sub.sub_queue;
    delete from pgque.subscription
     where sub_queue = v_sub.sub_queue and sub_consumer = v_sub.sub_consumer;
    delete from pgque.consumer c
     where c.co_id = v_sub.sub_consumer
       and not exists (select 1 from pgque.subscription s where s.sub_consumer = c.co_id);
    perform pgque.log_event('info', 'consumer', 'unregistered', pg_catalog.jsonb_build_object(
        'queue', i_queue, 'consumer', i_consumer));
    return 1;
end
$$;
