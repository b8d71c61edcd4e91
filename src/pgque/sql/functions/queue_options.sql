-- Queue options: create_queue with options, pause and resume.

create or replace function pgque.create_queue(i_queue text, i_options jsonb)
returns integer
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_created integer;
    v_key text;
    v_value jsonb;
begin
    if i_options is not null and pg_catalog.jsonb_typeof(i_options) <> 'object' then
        raise exception 'create_queue: options must be a JSON object, got % (queue %)',
            pg_catalog.jsonb_typeof(i_options), i_queue using detail = 'pgque:invalid_argument';
    end if;
    v_created := pgque.create_queue(i_queue);
    -- Each option goes through set_queue_config in this transaction: a bad
    -- one raises, and the queue is not created either.
    for v_key, v_value in select * from pg_catalog.jsonb_each(coalesce(i_options, '{}')) loop
        if pg_catalog.jsonb_typeof(v_value) not in ('string', 'number', 'boolean', 'null') then
            raise exception 'create_queue: option % of queue % must be a string, number or boolean, got %',
                v_key, i_queue, pg_catalog.jsonb_typeof(v_value)
                using detail = 'pgque:invalid_argument';
        end if;
        perform pgque.set_queue_config(i_queue, v_key, v_value #>> '{}');
    end loop;
    return v_created;
end
$$;
comment on function pgque.create_queue(text, jsonb) is
    'Creates a queue and applies each option (set_queue_config names, e.g. {"max_retries": 3}) in the same transaction. Returns 1, or 0 when it existed.';

create or replace function pgque.pause_queue(i_queue text)
returns void
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
begin
    perform pgque.set_queue_config(i_queue, 'ticker_paused', 'true');
end
$$;
comment on function pgque.pause_queue(text) is
    'Stops ticking the queue: sends still succeed, consumers get nothing new until resume_queue().';

create or replace function pgque.resume_queue(i_queue text)
returns void
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
begin
    perform pgque.set_queue_config(i_queue, 'ticker_paused', 'false');
end
$$;
comment on function pgque.resume_queue(text) is
    'Resumes ticking a paused queue.';
