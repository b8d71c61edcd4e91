-- Delayed delivery: send_at() parks a message in delayed_events until its
-- time; maint_deliver_delayed() (run by maint()) moves due rows into their
-- queues as new events.

-- Internal: the shared body of both send_at overloads.
create or replace function pgque._send_at(
    i_queue text, i_type text, i_payload text, i_deliver_at timestamptz)
returns bigint language plpgsql as $$
declare
    v_id bigint;
begin
    if i_deliver_at is null then
        perform pgque._refuse_null('send_at', 'deliver_at', i_queue);
    end if;
    if not pg_catalog.isfinite(i_deliver_at) then
        raise exception 'send_at: deliver_at must be a finite time, got % (queue %)',
            i_deliver_at, i_queue using detail = 'pgque:invalid_argument';
    end if;
    if i_deliver_at <= pg_catalog.now() then
        return pgque._insert_event(i_queue, null, pg_catalog.now(), null, null, i_type, i_payload,
                                   null, null, null, null);
    end if;
    perform pgque._queue_row(i_queue);
    insert into pgque.delayed_events (de_queue_name, de_deliver_at, de_type, de_data)
    values (i_queue, i_deliver_at, i_type, i_payload)
    returning de_id into v_id;
    return v_id;
end
$$;

create or replace function pgque.send_at(
    i_queue text, i_type text, i_payload jsonb, i_deliver_at timestamptz)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._send_at(i_queue, i_type, i_payload::text, i_deliver_at); end $$;
comment on function pgque.send_at(text, text, jsonb, timestamptz) is
    'Sends a JSON message for delivery at i_deliver_at. Returns the event id when that time has come, else the delayed_events id (de_id).';

create or replace function pgque.send_at(
    i_queue text, i_type text, i_payload text, i_deliver_at timestamptz)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque._send_at(i_queue, i_type, i_payload, i_deliver_at); end $$;
comment on function pgque.send_at(text, text, text, timestamptz) is
    'Sends a verbatim text message for delivery at i_deliver_at. Returns the event id when that time has come, else the delayed_events id (de_id).';

create or replace function pgque.maint_deliver_delayed()
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
    v_moved integer;
    v_total integer := 0;
begin
    -- The txid first, then the current tables (see _insert_event).
    perform pg_catalog.pg_current_xact_id();
    for q in
        select qu.* from pgque.queue qu
         where not qu.queue_disable_insert
           and exists (select 1 from pgque.delayed_events d
                        where d.de_queue_name = qu.queue_name
                          and d.de_deliver_at <= current_timestamp)
         order by qu.queue_id
    loop
        -- Rows another mover holds are left to it.
        execute 'with due as (select de_id from pgque.delayed_events'
             || '  where de_queue_name = $1 and de_deliver_at <= current_timestamp'
             || '  order by de_deliver_at, de_id for update skip locked),'
             || ' moved as (delete from pgque.delayed_events d using due'
             || '  where d.de_id = due.de_id returning d.*)'
             || ' insert into ' || pgque._event_table_name(q, q.queue_cur_table)
             || ' (ev_id, ev_time, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)'
             || ' select pg_catalog.nextval($2), pg_catalog.now(), de_type, de_data,'
             || '  de_extra1, de_extra2, de_extra3, de_extra4'
             || ' from (select * from moved order by de_deliver_at, de_id) m'
          using q.queue_name, pgque._queue_relation(q, 'event_seq');
        get diagnostics v_moved = row_count;
        v_total := v_total + v_moved;
    end loop;
    return v_total;
end
$$;
comment on function pgque.maint_deliver_delayed() is
    'Moves every due delayed message into its queue as a new event (type and extras kept). Returns how many.';

create or replace function pgque.cancel_delayed(i_de_id bigint)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if i_de_id is null then
        raise exception 'cancel_delayed: de_id must not be NULL' using detail = 'pgque:invalid_argument';
    end if;
    delete from pgque.delayed_events where de_id = i_de_id;
    return case when found then 1 else 0 end;
end
$$;
comment on function pgque.cancel_delayed(bigint) is
    'Cancels a message send_at() is holding for later delivery (its de_id). Returns 1, or 0 when there is none: never sent, already delivered, or cancelled.';
