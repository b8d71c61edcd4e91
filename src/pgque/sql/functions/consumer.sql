-- Registering and unregistering consumers.

-- Internal: the id of the queue a consumer registers on, or the error for a
-- missing one: PgQ's text (clients match it), with the queue's name appended
-- when i_named (the modern API) and always in the HINT.
create or replace function pgque._registration_queue(i_queue text, i_named boolean)
returns integer
language plpgsql stable
as $$
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

create or replace function pgque.register_consumer_at(
    x_queue_name text, x_consumer_name text, x_tick_pos bigint)
returns integer
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_queue_id integer;
    v_co_id integer;
    v_tick_id bigint;
begin
    v_queue_id := pgque._registration_queue(x_queue_name, false);
    if coalesce(x_consumer_name, '') = '' then
        raise exception 'consumer name must not be empty' using detail = 'pgque:invalid_argument';
    end if;

    -- The consumer row is locked, so an unregister elsewhere cannot delete it
    -- under us and two registrations of one name run one after the other.
    insert into pgque.consumer (co_name) values (x_consumer_name) on conflict (co_name) do nothing;
    select co_id into v_co_id from pgque.consumer where co_name = x_consumer_name for update;

    if x_tick_pos is not null then
        perform 1 from pgque.tick where tick_queue = v_queue_id and tick_id = x_tick_pos;
        if not found then
            raise exception 'cannot reposition, tick not found: %', x_tick_pos
                using detail = 'pgque:tick_not_found';
        end if;
    end if;

    perform 1 from pgque.subscription
     where sub_queue = v_queue_id and sub_consumer = v_co_id for update;
    if found then
        if x_tick_pos is not null then
            -- Repositioning drops the open batch, if any.
            update pgque.subscription
               set sub_last_tick = x_tick_pos, sub_batch = null, sub_next_tick = null,
                   sub_active = pg_catalog.now()
             where sub_queue = v_queue_id and sub_consumer = v_co_id;
        end if;
        return 0;
    end if;

    if x_tick_pos is null then
        select tick_id into v_tick_id from pgque.tick
         where tick_queue = v_queue_id order by tick_id desc limit 1;
        if not found then
            raise exception 'No ticks for this queue.  Please run ticker on database.'
                using detail = 'pgque:no_ticks';
        end if;
    else
        v_tick_id := x_tick_pos;
    end if;

    insert into pgque.subscription (sub_queue, sub_consumer, sub_last_tick)
    values (v_queue_id, v_co_id, v_tick_id);
    perform pgque.log_event('info', 'consumer', 'registered', pg_catalog.jsonb_build_object(
        'queue', x_queue_name, 'consumer', x_consumer_name, 'tick', v_tick_id));
    return 1;
end
$$;
comment on function pgque.register_consumer_at(text, text, bigint) is
    'Subscribes a consumer at the given tick, or moves an existing one there (dropping its open batch). Returns 1 when new, else 0.';

create or replace function pgque.register_consumer(x_queue_name text, x_consumer_id text)
returns integer
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
begin
    return pgque.register_consumer_at(x_queue_name, x_consumer_id, null);
end
$$;
comment on function pgque.register_consumer(text, text) is
    'Subscribes a consumer (the second argument is its name) at the latest tick. Returns 1 when new, 0 when already subscribed.';

create or replace function pgque.unregister_consumer(x_queue_name text, x_consumer_name text)
returns integer
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_sub record;
begin
    select s.sub_id, s.sub_queue, s.sub_consumer, s.sub_role into v_sub
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
     where q.queue_name = x_queue_name and c.co_name = x_consumer_name
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
            x_queue_name, pg_catalog.split_part(x_consumer_name, '.', 1),
            pg_catalog.substr(x_consumer_name, pg_catalog.strpos(x_consumer_name, '.') + 1), 0);
    end if;

    -- Pending retries belong to this registration only.
    delete from pgque.retry_queue where ev_owner = v_sub.sub_id and ev_queue = v_sub.sub_queue;
    delete from pgque.subscription
     where sub_queue = v_sub.sub_queue and sub_consumer = v_sub.sub_consumer;
    delete from pgque.consumer c
     where c.co_id = v_sub.sub_consumer
       and not exists (select 1 from pgque.subscription s where s.sub_consumer = c.co_id);
    perform pgque.log_event('info', 'consumer', 'unregistered', pg_catalog.jsonb_build_object(
        'queue', x_queue_name, 'consumer', x_consumer_name));
    return 1;
end
$$;
comment on function pgque.unregister_consumer(text, text) is
    'Removes a subscription and its pending retries. Returns 1, or 0 when it did not exist.';
