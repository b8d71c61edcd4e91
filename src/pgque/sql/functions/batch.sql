-- Batches: opening, reading and finishing them.
--
-- A batch is the set of events whose producing transaction is visible in the
-- end tick's snapshot and not in the start tick's. The subscription row holds
-- the open batch (sub_batch, sub_next_tick); there is no batch table.

create or replace function pgque.find_tick_helper(
    i_queue_id int4, i_prev_tick_id int8, i_prev_tick_time timestamptz,
    i_prev_tick_seq int8, i_min_count int8, i_min_interval interval,
    out next_tick_id int8, out next_tick_time timestamptz, out next_tick_seq int8)
language plpgsql stable security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_ok boolean := false;
    v_too_far boolean := false;
begin
    -- Start from the newest tick after the position.
    select tick_id, tick_time, tick_event_seq
      into next_tick_id, next_tick_time, next_tick_seq
      from pgque.tick
     where tick_queue = i_queue_id and tick_id > i_prev_tick_id
     order by tick_id desc limit 1;
    if not found then
        return;
    end if;

    if i_min_count is not null then
        v_ok := v_ok or next_tick_seq - i_prev_tick_seq >= i_min_count;
        v_too_far := v_too_far or next_tick_seq - i_prev_tick_seq > 2 * i_min_count;
    end if;
    if i_min_interval is not null then
        v_ok := v_ok or next_tick_time - i_prev_tick_time >= i_min_interval;
        v_too_far := v_too_far or next_tick_time - i_prev_tick_time > 2 * i_min_interval;
    end if;

    -- The newest tick overshoots a threshold by more than 2x: take the first
    -- tick that reaches one instead, so batches stay near the asked size.
    if v_too_far then
        select tick_id, tick_time, tick_event_seq
          into next_tick_id, next_tick_time, next_tick_seq
          from pgque.tick
         where tick_queue = i_queue_id and tick_id > i_prev_tick_id
           and ((i_min_count is not null and tick_event_seq - i_prev_tick_seq >= i_min_count)
             or (i_min_interval is not null and tick_time - i_prev_tick_time >= i_min_interval))
         order by tick_id limit 1;
    end if;

    if not v_ok then
        next_tick_id := null;
        next_tick_time := null;
        next_tick_seq := null;
    end if;
end
$$;
comment on function pgque.find_tick_helper(int4, int8, timestamptz, int8, int8, interval) is
    'Finds the end tick of a batch from the given position under min_count / min_interval.';

create or replace function pgque.next_batch_custom(
    i_queue_name text, i_consumer_name text,
    i_min_lag interval, i_min_count int4, i_min_interval interval,
    out batch_id bigint,
    out cur_tick_id bigint, out prev_tick_id bigint,
    out cur_tick_time timestamptz, out prev_tick_time timestamptz,
    out cur_tick_event_seq bigint, out prev_tick_event_seq bigint)
language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if pg_catalog.strpos(i_consumer_name, '#') > 0 then
        perform pgque._refuse_reserved_name(i_consumer_name, 'use pgque.receive_partitioned()');
    end if;
    select * into batch_id, cur_tick_id, prev_tick_id, cur_tick_time, prev_tick_time,
                  cur_tick_event_seq, prev_tick_event_seq
      from pgque._next_batch_custom(i_queue_name, i_consumer_name,
                                    i_min_lag, i_min_count, i_min_interval);
end
$$;
comment on function pgque.next_batch_custom(text, text, interval, int4, interval) is
    'Opens the consumer''s next batch under min_lag / min_count / min_interval, or returns the open one. All NULL when there is none.';

-- Internal: next_batch_custom for any consumer, a partition slot's too
-- (receive_partitioned), the body of the legacy next_batch forms.
create or replace function pgque._next_batch_custom(
    i_queue_name text, i_consumer_name text,
    i_min_lag interval, i_min_count int4, i_min_interval interval,
    out batch_id bigint,
    out cur_tick_id bigint, out prev_tick_id bigint,
    out cur_tick_time timestamptz, out prev_tick_time timestamptz,
    out cur_tick_event_seq bigint, out prev_tick_event_seq bigint)
language plpgsql
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off as $$
declare
    s record;
    v_last record;
    v_next record;
begin
    -- The row lock makes a concurrent caller wait and then get the same batch.
    -- The row is locked by a query of that table alone: after waiting, the
    -- lock returns the row's latest version (a caller that waited while the
    -- batch was finished then starts at the new position), and its last tick
    -- is read after. Each row is found by its whole key, the two ids by their
    -- names first, whatever the statistics say: as one join, a plan made
    -- while the queue and consumer tables had been VACUUMed with one row each
    -- (the Ticker's maintenance does so when it starts) walked every
    -- subscription and merged it with every tick of its queue, and a session
    -- keeps its plan (0.3 ms per batch after a few thousand ticks, measured).
    select sub.sub_queue, sub.sub_consumer, sub.sub_id, sub.sub_batch, sub.sub_last_tick,
           sub.sub_next_tick, sub.sub_role
      into s
      from pgque.subscription sub
     where sub.sub_queue = (select q.queue_id from pgque.queue q where q.queue_name = i_queue_name)
       and sub.sub_consumer = (select c.co_id from pgque.consumer c where c.co_name = i_consumer_name)
       for no key update of sub;
    if not found then
        raise exception 'Not subscriber to queue: %/%',
            coalesce(i_queue_name, 'NULL'), coalesce(i_consumer_name, 'NULL')
            using detail = 'pgque:consumer_not_found',
                  hint = 'Subscribe the consumer first: select pgque.subscribe('
                         || coalesce(pg_catalog.quote_literal(i_queue_name), 'NULL') || ', '
                         || coalesce(pg_catalog.quote_literal(i_consumer_name), 'NULL') || ');';
    end if;
    -- Cooperative groups hand out batches through their own functions. A
    -- group without members gets no batch here (all NULL): its main row
    -- never holds one. Upstream returns a batch id it records nowhere.
    if s.sub_role = 'coop_main' then
        perform 1 from pgque.subscription m
         where m.sub_queue = s.sub_queue and m.sub_id = s.sub_id and m.sub_role = 'coop_member';
        if found then
            raise exception 'consumer % on queue % is a cooperative main consumer; use cooperative receive/next_batch with a subconsumer',
                i_consumer_name, i_queue_name using detail = 'pgque:cooperative_consumer';
        end if;
        prev_tick_id := null;
        prev_tick_time := null;
        prev_tick_event_seq := null;
        return;
    elsif s.sub_role = 'coop_member' then
        raise exception 'consumer % on queue % is a cooperative subconsumer; use receive_coop / next_batch (cooperative form) instead of the legacy 5-arg next_batch_custom',
            i_consumer_name, i_queue_name using detail = 'pgque:cooperative_consumer';
    end if;
    select t.tick_id, t.tick_time, t.tick_event_seq into v_last
      from pgque.tick t
     where t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick;
    if not found then
        raise exception 'pgque corruption: consumer % on queue % points at missing tick %',
            i_consumer_name, i_queue_name, s.sub_last_tick using detail = 'pgque:corruption';
    end if;

    prev_tick_id := v_last.tick_id;
    prev_tick_time := v_last.tick_time;
    prev_tick_event_seq := v_last.tick_event_seq;

    -- An open batch is returned again unchanged, whatever the arguments.
    if s.sub_batch is not null then
        select tick_id, tick_time, tick_event_seq into v_next
          from pgque.tick where tick_queue = s.sub_queue and tick_id = s.sub_next_tick;
        if not found then
            raise exception 'pgque corruption: batch % of consumer % on queue % ends at missing tick %',
                s.sub_batch, i_consumer_name, i_queue_name, s.sub_next_tick
                using detail = 'pgque:corruption';
        end if;
        batch_id := s.sub_batch;
        cur_tick_id := v_next.tick_id;
        cur_tick_time := v_next.tick_time;
        cur_tick_event_seq := v_next.tick_event_seq;
        return;
    end if;

    if i_min_count is null and i_min_interval is null then
        select tick_id, tick_time, tick_event_seq into v_next
          from pgque.tick
         where tick_queue = s.sub_queue and tick_id > v_last.tick_id
         order by tick_id limit 1;
    else
        select h.next_tick_id as tick_id, h.next_tick_time as tick_time,
               h.next_tick_seq as tick_event_seq
          into v_next
          from pgque.find_tick_helper(s.sub_queue, v_last.tick_id, v_last.tick_time,
                                      v_last.tick_event_seq, i_min_count, i_min_interval) h;
    end if;

    if v_next.tick_id is null
       or (i_min_lag is not null and v_next.tick_time > pg_catalog.now() - i_min_lag) then
        prev_tick_id := null;
        prev_tick_time := null;
        prev_tick_event_seq := null;
        return;
    end if;

    batch_id := pg_catalog.nextval('pgque.batch_id_seq');
    cur_tick_id := v_next.tick_id;
    cur_tick_time := v_next.tick_time;
    cur_tick_event_seq := v_next.tick_event_seq;
    update pgque.subscription
       set sub_batch = batch_id, sub_next_tick = cur_tick_id, sub_active = pg_catalog.now()
     where sub_queue = s.sub_queue and sub_consumer = s.sub_consumer;
end
$$;

create or replace function pgque.next_batch_info(
    i_queue_name text, i_consumer_name text,
    out batch_id bigint,
    out cur_tick_id bigint, out prev_tick_id bigint,
    out cur_tick_time timestamptz, out prev_tick_time timestamptz,
    out cur_tick_event_seq bigint, out prev_tick_event_seq bigint)
language sql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ select * from pgque.next_batch_custom(i_queue_name, i_consumer_name, null, null, null) $$;
comment on function pgque.next_batch_info(text, text) is
    'Opens the consumer''s next batch (or returns the open one) with its tick ids, times and event sequence values.';

create or replace function pgque.next_batch(i_queue_name text, i_consumer_name text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    if pg_catalog.strpos(i_consumer_name, '#') > 0 then
        perform pgque._refuse_reserved_name(i_consumer_name, 'use pgque.receive_partitioned()');
    end if;
    return (pgque._next_batch_custom(i_queue_name, i_consumer_name, null, null, null)).batch_id;
end
$$;
comment on function pgque.next_batch(text, text) is
    'Opens the consumer''s next batch, or returns the open one. Returns its id, or NULL when there is no new tick.';


-- The cooperative forms, for one subconsumer of a group (see coop.sql).
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
    if pg_catalog.strpos(v_member_name, '#') > 0 then
        perform pgque._refuse_reserved_name(i_consumer, null);
        perform pgque._refuse_reserved_name(i_subconsumer, null);
    end if;
    if i_dead_interval < interval '0' then
        raise exception 'dead_interval must be a non-negative interval or NULL, got % (consumer % on queue %)',
            i_dead_interval, v_member_name, i_queue using detail = 'pgque:invalid_argument';
    end if;
    -- By key, as in the plain next_batch_custom above.
    select s.sub_queue, s.sub_consumer, s.sub_id, s.sub_batch, s.sub_last_tick, s.sub_next_tick
      into v_member
      from pgque.subscription s
     where s.sub_queue = (select q.queue_id from pgque.queue q where q.queue_name = i_queue)
       and s.sub_consumer = (select c.co_id from pgque.consumer c where c.co_name = v_member_name)
       and s.sub_role = 'coop_member'
       for no key update of s;
    if not found then
        raise exception 'Not subscriber to queue: %/%', i_queue, v_member_name
            using detail = 'pgque:consumer_not_found';
    end if;

    -- The member's open batch again; the call doubles as a heartbeat.
    if v_member.sub_batch is not null then
        update pgque.subscription set sub_active = pg_catalog.now()
         where sub_queue = v_member.sub_queue and sub_consumer = v_member.sub_consumer;
        batch_id := v_member.sub_batch;
        prev_tick_id := v_member.sub_last_tick;
        next_tick_id := v_member.sub_next_tick;
        return;
    end if;

    -- One member of the group at a time from here: the main row is the cursor.
    -- Locked by a query of that row alone: after waiting for another member,
    -- the lock returns the row's latest version (a join would re-check the
    -- old tick against the moved position and find nothing).
    select m.sub_consumer, m.sub_last_tick into v_main
      from pgque.subscription m
     where m.sub_queue = v_member.sub_queue and m.sub_id = v_member.sub_id
       and m.sub_role = 'coop_main'
       for no key update of m;
    if not found then
        raise exception 'pgque corruption: cooperative consumer % on queue % has no main position',
            i_consumer, i_queue using detail = 'pgque:corruption';
    end if;
    select v_main.sub_consumer as sub_consumer, v_main.sub_last_tick as sub_last_tick,
           t.tick_time, t.tick_event_seq into v_main
      from pgque.tick t
     where t.tick_queue = v_member.sub_queue and t.tick_id = v_main.sub_last_tick;
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
           and pg_catalog.now() - s.sub_active > i_dead_interval  -- no overflow for any interval
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
                   sub_next_tick = next_tick_id, sub_active = pg_catalog.now()
             where sub_queue = v_member.sub_queue and sub_consumer = v_member.sub_consumer;
            perform pgque.log_event('warning', 'consumer', 'batch taken over', pg_catalog.jsonb_build_object(
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
       or (i_min_lag is not null and v_next.tick_time > pg_catalog.now() - i_min_lag) then
        return;
    end if;

    batch_id := pg_catalog.nextval('pgque.batch_id_seq');
    prev_tick_id := v_main.sub_last_tick;
    next_tick_id := v_next.tick_id;
    update pgque.subscription
       set sub_batch = batch_id, sub_last_tick = prev_tick_id, sub_next_tick = next_tick_id,
           sub_active = pg_catalog.now()
     where sub_queue = v_member.sub_queue and sub_consumer = v_member.sub_consumer;
    update pgque.subscription set sub_last_tick = next_tick_id, sub_active = pg_catalog.now()
     where sub_queue = v_member.sub_queue and sub_consumer = v_main.sub_consumer;
end
$$;
comment on function pgque.next_batch_custom(text, text, text, interval, int4, interval, interval) is
    'Cooperative form: the subconsumer''s open batch, a dead member''s batch (taken over under a new id), or the group''s next batch under the thresholds.';

create or replace function pgque.next_batch(
    i_queue text, i_consumer text, i_subconsumer text, i_dead_interval interval default null)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return (pgque.next_batch_custom(i_queue, i_consumer, i_subconsumer, null, null, null, i_dead_interval)).batch_id; end $$;
comment on function pgque.next_batch(text, text, text, interval) is
    'Cooperative form of next_batch for one subconsumer. Returns the batch id or NULL.';

-- Internal: which event tables (numbers) can hold events of a batch from
-- snapshot i_s1 to i_s2, given the queue's rotation state. At most two: the
-- rotation rule guarantees no batch reaches the table before the previous one.
create or replace function pgque._batch_table_numbers(
    i_queue pgque.queue, i_s1 pg_snapshot, i_s2 pg_snapshot)
returns integer[] language plpgsql stable as $$
declare
    v_prev integer := (i_queue.queue_cur_table + i_queue.queue_ntables - 1) % i_queue.queue_ntables;
begin
    if pg_catalog.pg_snapshot_xmax(i_s2) < i_queue.queue_switch_step1 then
        -- Cut entirely before the last rotation.
        return array[v_prev];
    elsif i_queue.queue_switch_step2 is not null
          and pg_catalog.pg_snapshot_xmin(i_s1) > i_queue.queue_switch_step2 then
        -- Started after every writer could see the rotation.
        return array[i_queue.queue_cur_table];
    end if;
    return array[i_queue.queue_cur_table, v_prev];
end
$$;

-- Internal: the names of those tables (_batch_table_numbers).
create or replace function pgque._batch_tables(q pgque.queue, i_s1 pg_snapshot, i_s2 pg_snapshot)
returns text[] language sql stable as $$
    select pg_catalog.array_agg(pgque._event_table_name(q, t) order by o)
      from pg_catalog.unnest(pgque._batch_table_numbers(q, i_s1, i_s2)) with ordinality u(t, o)
$$;

-- Internal: an open batch's queue row, its consumer's sub_id and the
-- snapshots of its two ticks; batch_not_found when the batch is not open.
create or replace function pgque._batch_range(
    i_batch_id bigint,
    out queue pgque.queue, out sub_id integer, out s1 pg_snapshot, out s2 pg_snapshot)
language plpgsql stable
as $$
declare
    v_queue_id integer;
begin
    -- Each tick by its whole key (two joins to pgque.tick let the planner
    -- look the second one up by the queue alone: every tick the queue kept).
    select s.sub_queue, s.sub_id,
           (select t.tick_snapshot from pgque.tick t
             where t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick),
           (select t.tick_snapshot from pgque.tick t
             where t.tick_queue = s.sub_queue and t.tick_id = s.sub_next_tick)
      into v_queue_id, sub_id, s1, s2
      from pgque.subscription s
     where s.sub_batch = i_batch_id;
    if v_queue_id is null or s1 is null or s2 is null then
        raise exception 'batch not found' using detail = 'pgque:batch_not_found';
    end if;
    select * into queue from pgque.queue q where q.queue_id = v_queue_id;
end
$$;

create or replace function pgque.batch_event_tables(x_batch_id bigint)
returns setof text language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    b record := pgque._batch_range(x_batch_id);
begin
    return query select pgque.quote_fqname(t)
                   from pg_catalog.unnest(pgque._batch_tables(b.queue, b.s1, b.s2)) t;
end
$$;
comment on function pgque.batch_event_tables(bigint) is
    'The event tables the batch''s events can be in.';

-- Internal: the bounds of the events between snapshots i_s1 and i_s2: those
-- whose txid is from lower_txid to upper_txid and visible in i_s2 but not
-- in i_s1, and those of txid_list (running at i_s1, finished at i_s2, too
-- far below the range to fold into it). NULL txid_list: none.
create or replace function pgque._tick_range_bounds(
    i_s1 pg_snapshot, i_s2 pg_snapshot,
    out lower_txid xid8, out upper_txid xid8, out txid_list xid8[])
language plpgsql immutable
as $$
declare
    v_lower bigint := pg_catalog.pg_snapshot_xmax(i_s1)::text::bigint;
    v_xid bigint;
    v_list bigint[] := '{}';
begin
    upper_txid := pg_catalog.pg_snapshot_xmax(i_s2);
    -- Nothing was running at s1 (its xmin is its xmax): no txid of (b) below,
    -- and no query to run (the usual case of a quiet moment).
    if pg_catalog.pg_snapshot_xmin(i_s1) = pg_catalog.pg_snapshot_xmax(i_s1) then
        lower_txid := pg_catalog.pg_snapshot_xmax(i_s1);
        return;
    end if;
    -- Membership: visible in s2, not visible in s1. Such txids are either
    -- (a) from xmax(s1) up to xmax(s2), checked against both snapshots, or
    -- (b) running at s1 and no longer at s2: xip(s1) minus xip(s2), matched
    -- exactly. Txids of (b) close below the range's lower bound are folded
    -- into the range (which re-checks visibility), keeping the list short.
    for v_xid in
        select x::text::bigint from pg_catalog.pg_snapshot_xip(i_s1) x
        except
        select x::text::bigint from pg_catalog.pg_snapshot_xip(i_s2) x
        order by 1 desc
    loop
        if v_xid >= v_lower - 100 then
            v_lower := v_xid;
        else
            v_list := v_list || v_xid;
        end if;
    end loop;
    lower_txid := v_lower::text::xid8;
    if pg_catalog.cardinality(v_list) > 0 then
        txid_list := v_list::text[]::xid8[];
    end if;
end
$$;

-- Internal: the event columns of a query over event tables, written once:
-- get_batch_events' result, in PgQ's order, each column prefixed with
-- i_prefix (a table alias and a dot, or '').
create or replace function pgque._event_columns(i_prefix text)
returns text language sql immutable as $$
    select pg_catalog.format(
        '%1$sev_id, %1$sev_time, %1$sev_txid::text::int8 as ev_txid, %1$sev_retry, %1$sev_type,'
        || ' %1$sev_data, %1$sev_extra1, %1$sev_extra2, %1$sev_extra3, %1$sev_extra4', i_prefix)
$$;

-- Internal: the SQL selecting the events of queue i_queue whose transaction is
-- visible in snapshot i_s2 and not in i_s1 (the events between two ticks),
-- unordered, with i_filter (SQL starting with ' and ') added to each part.
-- The one builder of a tick range's query: batch_event_sql (batches) and
-- spark_range_sql (the Spark reader) differ only in their filter.
create or replace function pgque._tick_range_sql(
    i_queue pgque.queue, i_s1 pg_snapshot, i_s2 pg_snapshot, i_filter text)
returns text language plpgsql stable as $$
declare
    r record := pgque._tick_range_bounds(i_s1, i_s2);
    v_parts text[] := '{}';
    v_table text;
    v_columns constant text := pgque._event_columns('');
begin
    foreach v_table in array pgque._batch_tables(i_queue, i_s1, i_s2) loop
        v_parts := v_parts || pg_catalog.format(
            'select %s from %s where ev_txid >= %L::xid8 and ev_txid <= %L::xid8'
            ' and pg_catalog.pg_visible_in_snapshot(ev_txid, %L::pg_snapshot)'
            ' and not pg_catalog.pg_visible_in_snapshot(ev_txid, %L::pg_snapshot)%s',
            v_columns, pgque.quote_fqname(v_table), r.lower_txid, r.upper_txid, i_s2, i_s1, i_filter);
        if r.txid_list is not null then
            v_parts := v_parts || pg_catalog.format(
                'select %s from %s where ev_txid = any (%L::xid8[])%s',
                v_columns, pgque.quote_fqname(v_table), r.txid_list, i_filter);
        end if;
    end loop;
    return pg_catalog.array_to_string(v_parts, ' union all ');
end
$$;

create or replace function pgque.batch_event_sql(x_batch_id bigint)
returns text language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    b record := pgque._batch_range(x_batch_id);
begin
    -- The consumer's own retry copies (ev_owner) are part of its batches.
    return pgque._tick_range_sql(
               b.queue, b.s1, b.s2,
               pg_catalog.format(' and (ev_owner is null or ev_owner = %s)', b.sub_id))
        || ' order by 1';
end
$$;
comment on function pgque.batch_event_sql(bigint) is
    'The SQL that reads the batch''s events.';

create or replace function pgque.get_batch_events(
    x_batch_id bigint,
    out ev_id bigint, out ev_time timestamptz, out ev_txid bigint, out ev_retry int4,
    out ev_type text, out ev_data text,
    out ev_extra1 text, out ev_extra2 text, out ev_extra3 text, out ev_extra4 text)
returns setof record language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off as $$
declare
    a record;
begin
    perform pgque._refuse_slot_batch(x_batch_id, 'use pgque.receive_partitioned()');
    a := pgque._batch_read_args(x_batch_id);
    -- Through the batch readers (batch_reader.sql): cached plans.
    if a.merge then
        return query
        select * from pgque._read_batch(a.queue_id, a.tables, a.lower_txid, a.upper_txid,
                                        a.s1, a.s2, a.txid_list, a.owner, null, null, null, null) r
         order by r.ev_id;
    else
        return query
        select * from pgque._read_batch(a.queue_id, a.tables, a.lower_txid, a.upper_txid,
                                        a.s1, a.s2, a.txid_list, a.owner, null, null, null, null);
    end if;
end
$$;
comment on function pgque.get_batch_events(bigint) is
    'All events of the open batch, ordered by ev_id.';

create or replace function pgque.finish_batch(x_batch_id bigint)
returns integer language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off
-- ack (receive.sql) is the same: not a partition slot's batch
-- (ack_partitioned closes those, under the slot's lease), nor a cooperative main's.
as $$
begin
    return pgque.ack(x_batch_id);
end
$$;
comment on function pgque.finish_batch(bigint) is
    'Closes the batch and moves the consumer to its end tick. Returns 1, or 0 with a WARNING when the batch is not open.';

-- Internal: finish_batch for any batch, a partition slot's too.
create or replace function pgque._finish_batch(i_batch_id bigint)
returns integer language plpgsql
-- Keyed lookups whatever the statistics say (docs/development.md, "Planner settings").
set enable_seqscan = off set enable_bitmapscan = off set jit = off as $$
begin
    -- A cooperative member has no position of its own (the group's main row
    -- holds it): between batches it points nowhere, holding back no rotation.
    -- (ack closes the usual batch the same way itself: keep the two alike.)
    update pgque.subscription
       set sub_active = pg_catalog.now(),
           sub_last_tick = case when sub_role = 'coop_member' then null else sub_next_tick end,
           sub_next_tick = null, sub_batch = null
     where sub_batch = i_batch_id and sub_role <> 'coop_main';
    if not found then
        if exists (select 1 from pgque.subscription where sub_batch = i_batch_id) then
            raise exception 'cannot finish cooperative main consumer batch % as normal active consumer',
                i_batch_id using detail = 'pgque:cooperative_consumer';
        end if;
        -- Finishing twice is not an error.
        raise warning 'finish_batch: batch % not found', i_batch_id;
        return 0;
    end if;
    return 1;
end
$$;

create or replace function pgque.get_batch_info(
    x_batch_id bigint,
    out queue_name text, out consumer_name text,
    out batch_start timestamptz, out batch_end timestamptz,
    out prev_tick_id bigint, out tick_id bigint, out lag interval,
    out seq_start bigint, out seq_end bigint)
language sql stable
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
    select q.queue_name, c.co_name, t1.tick_time, t2.tick_time,
           t1.tick_id, t2.tick_id, pg_catalog.now() - t2.tick_time,
           t1.tick_event_seq, t2.tick_event_seq
      from (select 1) one
      left join pgque.subscription s on s.sub_batch = x_batch_id
      left join pgque.queue q on q.queue_id = s.sub_queue
      left join pgque.consumer c on c.co_id = s.sub_consumer
      -- Each tick by its whole key (offset 0 keeps the subqueries apart: two
      -- plain joins let the planner find the second tick by the queue alone).
      left join lateral (select * from pgque.tick t
                          where t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
                         offset 0) t1 on true
      left join lateral (select * from pgque.tick t
                          where t.tick_queue = s.sub_queue and t.tick_id = s.sub_next_tick
                         offset 0) t2 on true
$$;
comment on function pgque.get_batch_info(bigint) is
    'Queue, consumer, ticks, times and lag of a batch; all NULL for an unknown batch.';
