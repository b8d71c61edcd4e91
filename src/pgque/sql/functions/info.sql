-- Information functions: queue and consumer figures for monitoring.
-- Event counts come from sequences, which also count rolled-back and retried
-- inserts, so they are estimates.

create or replace function pgque.get_queue_info(
    i_queue_name text default null,
    out queue_name text, out queue_ntables integer, out queue_cur_table integer,
    out queue_rotation_period interval, out queue_switch_time timestamptz,
    out queue_external_ticker boolean, out queue_ticker_paused boolean,
    out queue_ticker_max_count integer, out queue_ticker_max_lag interval,
    out queue_ticker_idle_period interval, out ticker_lag interval,
    out ev_per_sec float8, out ev_new bigint, out last_tick_id bigint)
returns setof record language sql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
    select q.queue_name, q.queue_ntables, q.queue_cur_table,
           q.queue_rotation_period, q.queue_switch_time,
           q.queue_external_ticker, q.queue_ticker_paused,
           q.queue_ticker_max_count, q.queue_ticker_max_lag,
           q.queue_ticker_idle_period,
           pg_catalog.now() - last.tick_time,
           case when last.tick_time > old.tick_time then
               (last.tick_event_seq - old.tick_event_seq)::float8
               / extract(epoch from last.tick_time - old.tick_time)::float8
           end,
           pgque._event_seq_now(q.queue_id) - last.tick_event_seq,
           last.tick_id
      from pgque.queue q
      left join lateral (
          select t.tick_id, t.tick_time, t.tick_event_seq from pgque.tick t
           where t.tick_queue = q.queue_id order by t.tick_id desc limit 1) last on true
      left join lateral (
          -- The rate's base: the oldest tick among the last 20 tick ids (PgQ's window).
          select t.tick_time, t.tick_event_seq from pgque.tick t
           where t.tick_queue = q.queue_id and t.tick_id >= last.tick_id - 20
           order by t.tick_id limit 1) old on true
     where i_queue_name is null or q.queue_name = i_queue_name
     order by q.queue_name
$$;
comment on function pgque.get_queue_info(text) is
    'Configuration, ticker lag, event rate, unticked events and last tick of one queue, or of all '
    '(the name left out or NULL).';

create or replace function pgque.get_consumer_info(
    i_queue_name text default null, i_consumer_name text default null,
    out queue_name text, out consumer_name text, out lag interval, out last_seen interval,
    out last_tick bigint, out current_batch bigint, out next_tick bigint,
    out pending_events bigint)
returns setof record language sql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
    select q.queue_name, c.co_name,
           pg_catalog.now() - t.tick_time,
           pg_catalog.now() - s.sub_active,
           s.sub_last_tick, s.sub_batch, s.sub_next_tick,
           last.tick_event_seq - t.tick_event_seq
      from pgque.subscription s
      join pgque.queue q on q.queue_id = s.sub_queue
      join pgque.consumer c on c.co_id = s.sub_consumer
      left join pgque.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
      left join lateral (
          select lt.tick_event_seq from pgque.tick lt
           where lt.tick_queue = s.sub_queue order by lt.tick_id desc limit 1) last on true
     where (i_queue_name is null or q.queue_name = i_queue_name)
       and (i_consumer_name is null or c.co_name = i_consumer_name)
     order by q.queue_name, c.co_name
$$;
comment on function pgque.get_consumer_info(text, text) is
    'Position, lag, last activity, open batch and pending events of consumers: of one queue, '
    'of one consumer on it, or of all (a name left out or NULL matches all).';

create or replace function pgque.get_batch_cursor(
    i_batch_id bigint, i_cursor_name text, i_quick_limit int4, i_extra_where text,
    out ev_id bigint, out ev_time timestamptz, out ev_txid bigint, out ev_retry int4,
    out ev_type text, out ev_data text,
    out ev_extra1 text, out ev_extra2 text, out ev_extra3 text, out ev_extra4 text)
returns setof record language plpgsql
-- Runs as the caller: i_extra_where is trusted SQL, hence admin only.
security invoker
set search_path = pgque, pg_catalog, pg_temp
-- JIT: see batch_reader.sql.
set jit = off as $$
declare
    v_sql text;
begin
    v_sql := pgque.batch_event_sql(i_batch_id);
    if i_extra_where is not null then
        v_sql := 'select * from (' || v_sql || ') b where ' || i_extra_where || ' order by 1';
    end if;
    execute pg_catalog.format('declare %I no scroll cursor for %s', i_cursor_name, v_sql);
    return query execute pg_catalog.format('fetch %s from %I', i_quick_limit, i_cursor_name);
end
$$;
comment on function pgque.get_batch_cursor(bigint, text, int4, text) is
    'Opens a cursor over the batch''s events (optionally filtered by trusted SQL) and returns the first i_quick_limit rows; FETCH the rest.';

create or replace function pgque.get_batch_cursor(
    i_batch_id bigint, i_cursor_name text, i_quick_limit int4,
    out ev_id bigint, out ev_time timestamptz, out ev_txid bigint, out ev_retry int4,
    out ev_type text, out ev_data text,
    out ev_extra1 text, out ev_extra2 text, out ev_extra3 text, out ev_extra4 text)
returns setof record
language sql strict
security invoker
set search_path = pgque, pg_catalog, pg_temp
as $$ select * from pgque.get_batch_cursor(i_batch_id, i_cursor_name, i_quick_limit, null) $$;
comment on function pgque.get_batch_cursor(bigint, text, int4) is
    'Opens a cursor over the batch''s events and returns the first i_quick_limit rows; FETCH the rest.';
