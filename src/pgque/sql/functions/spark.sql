-- Spark connector support: tick-range reads for the streaming and batch
-- source, consumer positioning, and the sinks' staging (its tables,
-- spark_staging and spark_commits, are in structure/tables.sql).
--
-- Spark's offsets are tick ids. A micro-batch reads the events between two
-- ticks of a queue under the engine's snapshot rule (visible in the end
-- tick's snapshot, not in the start tick's), split into N disjoint
-- partitions by ev_id % N. Retry copies (ev_owner set) belong to the
-- consumer that nacked them and are never part of a tick range. The query's
-- consumer only pins retention: Spark's checkpoint decides what was read.
--
-- Sinks: every Spark task stages its rows under the write's id and its own
-- stage id (spark_stage); the driver publishes the stages its tasks reported
-- into the queue, set-based and in one transaction (spark_publish), and a
-- streaming query records (query id, batch id) in the same transaction, so a
-- replayed micro-batch publishes nothing. Abort and failed tasks leave
-- nothing behind but staged rows, removed by write id (spark_discard).

-- Internal: tick i_tick of queue i_queue, or the error for a tick that does
-- not exist, saying whether rotation removed it or it was never made.
create or replace function pgque._spark_tick(i_queue pgque.queue, i_tick bigint)
returns pgque.tick language plpgsql stable as $$
declare
    v_tick pgque.tick;
    v_oldest bigint;
    v_latest bigint;
begin
    select * into v_tick from pgque.tick where tick_queue = i_queue.queue_id and tick_id = i_tick;
    if found then
        return v_tick;
    end if;
    select pg_catalog.min(tick_id), pg_catalog.max(tick_id) into v_oldest, v_latest
      from pgque.tick where tick_queue = i_queue.queue_id;
    if v_oldest is not null and i_tick < v_oldest then
        raise exception 'queue %: tick % was rotated away (oldest retained tick is %); the events after it are no longer complete',
            i_queue.queue_name, i_tick, v_oldest
            using detail = 'pgque:tick_not_found',
                  hint = 'The Spark checkpoint (or the asked start) is older than the queue retains: restart the query from a new checkpoint, with startingPosition consumer or latest.';
    end if;
    raise exception 'queue %: tick % does not exist (latest tick is %)',
        i_queue.queue_name, i_tick, coalesce(v_latest::text, 'none')
        using detail = 'pgque:tick_not_found',
              hint = 'Is the checkpoint from another database, or was the queue dropped and created again?';
end
$$;
comment on function pgque._spark_tick(pgque.queue, bigint) is
    'Internal: a tick of a queue, or tick_not_found: rotated away, or never made.';

create or replace function pgque.spark_range_sql(
    i_queue_name text, i_from_tick bigint, i_to_tick bigint,
    i_part integer default 0, i_nparts integer default 1)
returns text language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue;
    v_s1 pg_snapshot;
    v_s2 pg_snapshot;
    v_filter text := ' and ev_owner is null';
begin
    if i_from_tick is null or i_to_tick is null then
        raise exception 'spark_range_sql: the ticks must not be NULL'
            using detail = 'pgque:invalid_argument';
    end if;
    if i_from_tick > i_to_tick then
        raise exception 'spark_range_sql: start tick % is after end tick %', i_from_tick, i_to_tick
            using detail = 'pgque:invalid_argument';
    end if;
    if i_nparts is null or i_nparts < 1 or i_part is null or i_part < 0 or i_part >= i_nparts then
        raise exception 'spark_range_sql: partition % of % is not one of 0 .. n-1 with n >= 1',
            coalesce(i_part::text, 'NULL'), coalesce(i_nparts::text, 'NULL')
            using detail = 'pgque:invalid_argument';
    end if;
    q := pgque._queue_row(i_queue_name, 'NULL');
    -- Rotation step 1 takes this row FOR NO KEY UPDATE and skips it when
    -- locked: while the caller's transaction lasts, no event table can be
    -- truncated under its read (a KEY SHARE lock would not conflict).
    perform 1 from pgque.queue where queue_id = q.queue_id for share;
    select * into q from pgque.queue where queue_id = q.queue_id;

    v_s1 := (pgque._spark_tick(q, i_from_tick)).tick_snapshot;
    v_s2 := (pgque._spark_tick(q, i_to_tick)).tick_snapshot;
    -- Retry copies (ev_owner set) belong to the consumer that nacked them;
    -- partitions split by ev_id. An empty range (one tick) selects nothing.
    if i_nparts > 1 then
        v_filter := v_filter || pg_catalog.format(' and ev_id %% %s = %s', i_nparts, i_part);
    end if;
    return pgque._tick_range_sql(q, v_s1, v_s2, v_filter);
end
$$;
comment on function pgque.spark_range_sql(text, bigint, bigint, integer, integer) is
    'The SQL reading partition i_part of i_nparts (ev_id % n) of the events between two ticks, without retry copies. Locks the queue against rotation until the transaction ends: run the SQL in the same transaction. Raises tick_not_found for a rotated-away tick.';

create or replace function pgque.spark_read_range(
    i_queue_name text, i_from_tick bigint, i_to_tick bigint,
    i_part integer default 0, i_nparts integer default 1,
    out ev_id bigint, out ev_time timestamptz, out ev_txid bigint, out ev_retry int4,
    out ev_type text, out ev_data text,
    out ev_extra1 text, out ev_extra2 text, out ev_extra3 text, out ev_extra4 text)
returns setof record language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    return query execute
        'select * from ('
        || pgque.spark_range_sql(i_queue_name, i_from_tick, i_to_tick, i_part, i_nparts)
        || ') r order by ev_id';
end
$$;
comment on function pgque.spark_read_range(text, bigint, bigint, integer, integer) is
    'The events between two ticks (one ev_id % n partition of them), ordered by ev_id, without retry copies. Raises tick_not_found for a rotated-away tick.';

create or replace function pgque.spark_latest_tick(
    i_queue_name text,
    out tick_id bigint, out tick_time timestamptz, out tick_event_seq bigint)
language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    q pgque.queue := pgque._queue_row(i_queue_name, 'NULL');
begin
    select t.tick_id, t.tick_time, t.tick_event_seq
      into tick_id, tick_time, tick_event_seq
      from pgque.tick t where t.tick_queue = q.queue_id
     order by t.tick_id desc limit 1;
end
$$;
comment on function pgque.spark_latest_tick(text) is
    'The queue''s latest tick with its time and event sequence value (all NULL without ticks); raises queue_not_found.';

-- Internal: the consumer's subscription row, or an error.
create or replace function pgque._spark_subscription(q pgque.queue, i_consumer_name text)
returns pgque.subscription language plpgsql stable as $$
declare
    s pgque.subscription;
begin
    select sub.* into s
      from pgque.subscription sub join pgque.consumer c on c.co_id = sub.sub_consumer
     where sub.sub_queue = q.queue_id and c.co_name = i_consumer_name;
    if not found then
        raise exception 'consumer % is not subscribed to queue % (unregistered while the Spark query ran?)',
            coalesce(i_consumer_name, 'NULL'), q.queue_name
            using detail = 'pgque:consumer_not_found',
                  hint = 'Rotation may have removed events the query still needs; restart it from a new checkpoint.';
    end if;
    if s.sub_role <> 'normal' then
        raise exception 'consumer % on queue % is a cooperative consumer; a Spark query needs a consumer of its own',
            i_consumer_name, q.queue_name using detail = 'pgque:cooperative_consumer';
    end if;
    return s;
end
$$;
comment on function pgque._spark_subscription(pgque.queue, text) is
    'Internal: the subscription of a Spark query''s consumer, or consumer_not_found.';

create or replace function pgque.spark_start_tick(
    i_queue_name text, i_consumer_name text, i_position text default 'consumer')
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue := pgque._queue_row(i_queue_name, 'NULL');
    v_tick bigint;
begin
    if coalesce(i_consumer_name, '') = '' then
        raise exception 'spark_start_tick: the consumer name must not be empty'
            using detail = 'pgque:invalid_argument';
    end if;
    if i_position is null or i_position = 'consumer' then
        -- New: at the latest tick. Known: where it is.
        perform pgque.register_consumer_at(i_queue_name, i_consumer_name, null);
        return (pgque._spark_subscription(q, i_consumer_name)).sub_last_tick;
    elsif i_position = 'latest' then
        select tick_id into v_tick from pgque.tick
         where tick_queue = q.queue_id order by tick_id desc limit 1;
        if not found then
            raise exception 'No ticks for this queue.  Please run ticker on database.'
                using detail = 'pgque:no_ticks';
        end if;
    elsif i_position ~ '^[0-9]{1,18}$' then
        v_tick := i_position::bigint;
        perform pgque._spark_tick(q, v_tick);
    else
        raise exception 'startingPosition must be consumer, latest or a tick id, not %', i_position
            using detail = 'pgque:invalid_argument';
    end if;
    perform pgque.register_consumer_at(i_queue_name, i_consumer_name, v_tick);
    perform pgque._spark_subscription(q, i_consumer_name);
    return v_tick;
end
$$;
comment on function pgque.spark_start_tick(text, text, text) is
    'Start tick of a new Spark query: ''consumer'' = the consumer''s position (registered at the latest tick if new), ''latest'' = the latest tick, or a tick id; the consumer is moved there. Returns the tick.';

create or replace function pgque.spark_next_tick(
    i_queue_name text, i_consumer_name text, i_from_tick bigint,
    i_max_tick bigint default null, i_max_ticks integer default null,
    i_max_events bigint default null)
returns bigint language plpgsql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue := pgque._queue_row(i_queue_name, 'NULL');
    v_from_seq bigint;
    v_end bigint;
begin
    if i_from_tick is null then
        raise exception 'spark_next_tick: the start tick must not be NULL'
            using detail = 'pgque:invalid_argument';
    end if;
    if i_consumer_name is not null then
        perform pgque._spark_subscription(q, i_consumer_name);
    end if;
    v_from_seq := (pgque._spark_tick(q, i_from_tick)).tick_event_seq;
    -- The furthest tick within the limits; at least one tick when any is
    -- newer (a tick range cannot be split). Event counts come from the
    -- event sequence, an estimate.
    select pg_catalog.max(t.tick_id) filter (where t.n = 1 or i_max_events is null
                                  or t.tick_event_seq - v_from_seq <= i_max_events)
      into v_end
      from (select tick_id, tick_event_seq, pg_catalog.row_number() over (order by tick_id) as n
              from pgque.tick
             where tick_queue = q.queue_id and tick_id > i_from_tick
               and (i_max_tick is null or tick_id <= i_max_tick)
             order by tick_id
             limit i_max_ticks) t;
    return coalesce(v_end, i_from_tick);
end
$$;
comment on function pgque.spark_next_tick(text, text, bigint, bigint, integer, bigint) is
    'End tick of the next Spark micro-batch from i_from_tick: the furthest tick up to i_max_tick, within i_max_ticks ticks and about i_max_events events (at least one tick); i_from_tick when none is newer. Checks the consumer (when given) is still subscribed.';

create or replace function pgque.spark_advance(
    i_queue_name text, i_consumer_name text, i_tick bigint)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue := pgque._queue_row(i_queue_name, 'NULL');
begin
    if i_tick is null then
        raise exception 'spark_advance: the tick must not be NULL'
            using detail = 'pgque:invalid_argument';
    end if;
    -- Never re-create a consumer someone removed: its events may be gone.
    perform pgque._spark_subscription(q, i_consumer_name);
    perform pgque._spark_tick(q, i_tick);
    return pgque.register_consumer_at(i_queue_name, i_consumer_name, i_tick);
end
$$;
comment on function pgque.spark_advance(text, text, bigint) is
    'Moves a Spark query''s consumer to the tick Spark has committed (register_consumer_at); raises consumer_not_found when it was unregistered. Returns 0.';

-- A write's tasks and its end (publish or abort) meet on an advisory lock of
-- the write id: every stager holds it shared until its transaction ends, the
-- end takes it exclusively, so it waits for the stagers still running (a
-- failed task's writer may still commit what it was handed) before dropping
-- the write's rows. A batch write (a random id, never reused) is then marked
-- over in spark_commits (batch id -1), and a task that stages afterwards is
-- refused; a streaming write ('<query id>:<batch id>') is replayed under the
-- same id, so it is not marked, and what a late task stages is dropped by the
-- query's next publish.

-- Internal: the advisory lock key of a write id (second half; the first is
-- pgque._spark_lock_class()).
create or replace function pgque._spark_write_key(i_write_id text)
returns integer
language sql immutable
as $$ select pg_catalog.hashtext(i_write_id) $$;
comment on function pgque._spark_write_key(text) is
    'Internal: the advisory lock key of a Spark write id.';

-- Internal: the class of the Spark writes' advisory locks.
create or replace function pgque._spark_lock_class()
returns integer
language sql immutable
as $$ select 1936749419 $$;
comment on function pgque._spark_lock_class() is
    'Internal: the first key of the Spark writes'' advisory locks (''spkk'').';

-- Internal: whether a write id is a batch write's (a streaming one holds ':').
create or replace function pgque._spark_is_batch_write(i_write_id text)
returns boolean
language sql immutable
as $$ select pg_catalog.strpos(i_write_id, ':') = 0 $$;
comment on function pgque._spark_is_batch_write(text) is
    'Internal: true for a batch write id, false for a streaming one (<query id>:<batch id>).';

-- Internal: end a write: wait (up to 30 s) for its stagers still running;
-- mark a batch write over. Returns false when the batch write was over
-- already.
create or replace function pgque._spark_end_write(i_write_id text, i_queue_name text,
                                                  i_events bigint)
returns boolean language plpgsql as $$
declare
    v_timeout text := pg_catalog.current_setting('lock_timeout');
begin
    perform pg_catalog.set_config('lock_timeout', '30s', true);
    begin
        perform pg_catalog.pg_advisory_xact_lock(pgque._spark_lock_class(),
                                                 pgque._spark_write_key(i_write_id));
    exception when lock_not_available then
        -- A task that hangs: go on; what it stages later stays until spark_cleanup.
        null;
    end;
    perform pg_catalog.set_config('lock_timeout', v_timeout, true);
    if not pgque._spark_is_batch_write(i_write_id) then
        return true;
    end if;
    insert into pgque.spark_commits (query_id, batch_id, queue_name, events)
    values (i_write_id, -1, coalesce(i_queue_name, ''), i_events)
    on conflict (query_id, batch_id) do nothing;
    return found;
end
$$;
comment on function pgque._spark_end_write(text, text, bigint) is
    'Internal: waits for a Spark write''s running stagers (advisory lock, 30 s at most) and marks a batch write over (spark_commits, batch id -1); false when it was over already.';

create or replace function pgque.spark_stage(
    i_write_id text, i_stage_id text, i_first_seq bigint,
    i_types text[], i_payloads text[],
    i_extra1 text[], i_extra2 text[], i_extra3 text[], i_extra4 text[])
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n integer := coalesce(pg_catalog.cardinality(i_payloads), 0);
    v_null integer;
begin
    if coalesce(i_write_id, '') = '' or coalesce(i_stage_id, '') = '' or i_first_seq is null then
        raise exception 'spark_stage: write id, stage id and first seq must be given'
            using detail = 'pgque:invalid_argument';
    end if;
    if (i_types is not null and pg_catalog.cardinality(i_types) <> n)
       or (i_extra1 is not null and pg_catalog.cardinality(i_extra1) <> n)
       or (i_extra2 is not null and pg_catalog.cardinality(i_extra2) <> n)
       or (i_extra3 is not null and pg_catalog.cardinality(i_extra3) <> n)
       or (i_extra4 is not null and pg_catalog.cardinality(i_extra4) <> n) then
        raise exception 'spark_stage: every array must have the % elements of the payloads', n
            using detail = 'pgque:invalid_argument';
    end if;
    -- Held until the task's transaction ends: the write's end waits for it.
    perform pg_catalog.pg_advisory_xact_lock_shared(pgque._spark_lock_class(),
                                                    pgque._spark_write_key(i_write_id));
    if pgque._spark_is_batch_write(i_write_id) and exists (
        select 1 from pgque.spark_commits where query_id = i_write_id and batch_id = -1) then
        raise exception 'spark_stage: write % is over (published or aborted); this task''s rows are not staged',
            i_write_id using detail = 'pgque:invalid_argument';
    end if;
    v_null := pg_catalog.array_position(i_payloads, null);
    if v_null is not null then
        raise exception 'spark_stage: payload % of the chunk is NULL', v_null
            using detail = 'pgque:invalid_argument';
    end if;
    -- ROWS FROM over the arrays, not subscripts: subscripting a text array
    -- walks it from the start, quadratic in the chunk size.
    insert into pgque.spark_staging
           (write_id, stage_id, seq, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)
    select i_write_id, i_stage_id, i_first_seq + b.k - 1, b.t, b.p, b.e1, b.e2, b.e3, b.e4
      from rows from (pg_catalog.unnest(i_payloads), pg_catalog.unnest(i_types),
                      pg_catalog.unnest(i_extra1), pg_catalog.unnest(i_extra2),
                      pg_catalog.unnest(i_extra3), pg_catalog.unnest(i_extra4))
           with ordinality as b(p, t, e1, e2, e3, e4, k);
    return n;
end
$$;
comment on function pgque.spark_stage(text, text, bigint, text[], text[], text[], text[], text[], text[]) is
    'Stages rows of a Spark task (parallel arrays, payloads not NULL) under its write and stage id, numbered from i_first_seq; holds the write''s lock shared until the transaction ends, and refuses a batch write that is over. Returns the number staged.';

-- Internal: drop a write's staged rows, those of failed task attempts
-- included; for a streaming query (write id '<query id>:<batch id>') also
-- what earlier micro-batches of the query left (aborts see no write id when
-- every task failed).
create or replace function pgque._spark_drop_staged(i_write_id text, i_query_id text)
returns void language plpgsql as $$
begin
    if i_query_id is null then
        delete from pgque.spark_staging where write_id = i_write_id;
    else
        delete from pgque.spark_staging
         where write_id = i_write_id
            or (pg_catalog.left(write_id, pg_catalog.length(i_query_id) + 1) = i_query_id || ':');
    end if;
end
$$;
comment on function pgque._spark_drop_staged(text, text) is
    'Internal: removes a Spark write''s staged rows, and for a streaming query those its earlier micro-batches left.';

create or replace function pgque.spark_publish(
    i_queue_name text, i_write_id text, i_stage_ids text[], i_counts bigint[],
    i_query_id text default null, i_batch_id bigint default null)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_bad record;
    v_table text;
    v_total bigint := 0;
    v_work_mem text;
begin
    perform pgque._queue_row(i_queue_name, 'NULL');
    if coalesce(i_write_id, '') = '' then
        raise exception 'spark_publish: the write id must be given'
            using detail = 'pgque:invalid_argument';
    end if;
    if coalesce(pg_catalog.cardinality(i_stage_ids), 0)
       <> coalesce(pg_catalog.cardinality(i_counts), 0) then
        raise exception 'spark_publish: % stage ids but % counts',
            coalesce(pg_catalog.cardinality(i_stage_ids), 0),
            coalesce(pg_catalog.cardinality(i_counts), 0)
            using detail = 'pgque:invalid_argument';
    end if;
    if (i_query_id is null) <> (i_batch_id is null) then
        raise exception 'spark_publish: query id and batch id go together'
            using detail = 'pgque:invalid_argument';
    end if;
    if (select pg_catalog.count(distinct s) from pg_catalog.unnest(i_stage_ids) s)
       <> coalesce(pg_catalog.cardinality(i_stage_ids), 0) then
        raise exception 'spark_publish: a stage id is listed twice' using detail = 'pgque:invalid_argument';
    end if;

    -- Wait for the write's stagers still running (a failed attempt's
    -- rows are dropped below, after it ended); a batch write published or
    -- aborted before publishes nothing again.
    if not pgque._spark_end_write(i_write_id, i_queue_name, 0) then
        raise exception 'spark_publish: write % is over already (published or aborted)', i_write_id
            using detail = 'pgque:invalid_argument';
    end if;

    if i_query_id is not null then
        -- A batch published before (Spark replays the last micro-batch when
        -- its commit log entry is missing): publish nothing, clean up.
        insert into pgque.spark_commits (query_id, batch_id, queue_name, events)
        values (i_query_id, i_batch_id, i_queue_name,
                coalesce((select pg_catalog.sum(c) from pg_catalog.unnest(i_counts) c), 0))
        on conflict (query_id, batch_id) do nothing;
        if not found then
            perform pgque._spark_drop_staged(i_write_id, i_query_id);
            return 0;
        end if;
        -- Keep a window of recent batches per query.
        delete from pgque.spark_commits
         where query_id = i_query_id and batch_id < i_batch_id - 1000;
    end if;

    -- In task order, then row order, set-based into the table writers fill
    -- now (current_event_table takes the txid first, as every insert does);
    -- ev_id comes from the table's default, the queue's event sequence. The
    -- sort of a big write stays in memory.
    v_work_mem := pg_catalog.current_setting('work_mem');
    perform pg_catalog.set_config('work_mem', '256MB', true);
    v_table := pgque.current_event_table(i_queue_name);
    execute 'insert into ' || pgque.quote_fqname(v_table)
         || ' (ev_time, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4)'
         || ' select pg_catalog.now(), coalesce(s.ev_type, ''default''), s.ev_data,'
         || ' s.ev_extra1, s.ev_extra2, s.ev_extra3, s.ev_extra4'
         || ' from pg_catalog.unnest($1) with ordinality as o(stage_id, k)'
         || ' join pgque.spark_staging s on s.write_id = $2 and s.stage_id = o.stage_id'
         || ' order by o.k, s.seq'
      using i_stage_ids, i_write_id;
    get diagnostics v_total = row_count;
    perform pg_catalog.set_config('work_mem', v_work_mem, true);

    -- Every reported row must be there: nothing half-sent. A stage is one
    -- task's transaction, so it holds its reported count or fewer (a crash
    -- emptied the unlogged table): the total tells; the raise undoes the
    -- insert, and only then are the stages counted one by one, to name one.
    if v_total <> coalesce((select pg_catalog.sum(c) from pg_catalog.unnest(i_counts) c), 0) then
        for v_bad in
            select e.stage_id, e.expected, coalesce(f.found, 0) as found
              from rows from (pg_catalog.unnest(i_stage_ids), pg_catalog.unnest(i_counts))
                   as e(stage_id, expected)
              left join (select s.stage_id, pg_catalog.count(*) as found
                           from pgque.spark_staging s
                          where s.write_id = i_write_id and s.stage_id = any (i_stage_ids)
                          group by s.stage_id) f on f.stage_id = e.stage_id
             where e.expected is distinct from coalesce(f.found, 0)
             limit 1
        loop
            raise exception 'spark_publish: task stage % of write % staged % rows, % are there; nothing was published',
                v_bad.stage_id, i_write_id, v_bad.expected, v_bad.found
                using detail = 'pgque:staging_incomplete',
                      hint = 'The staging table is unlogged: a server crash empties it. Run the write again.';
        end loop;
    end if;
    perform pgque._spark_drop_staged(i_write_id, i_query_id);
    return v_total;
end
$$;
comment on function pgque.spark_publish(text, text, text[], bigint[], text, bigint) is
    'Publishes the staged rows of the listed task stages (each with its expected row count) into the queue in one transaction, then drops the write''s staged rows. With a query id and batch id, a batch published before publishes nothing. Returns the number of events sent.';

create or replace function pgque.spark_discard(i_write_id text)
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n bigint;
begin
    -- After the write's running stagers ended; a batch write is over for good.
    perform pgque._spark_end_write(i_write_id, null, -1);
    delete from pgque.spark_staging where write_id = i_write_id;
    get diagnostics n = row_count;
    return n;
end
$$;
comment on function pgque.spark_discard(text) is
    'Removes every row staged under a write id (an aborted or failed Spark write), after waiting for its running stagers; a batch write id is over for good. Returns how many.';

create or replace function pgque.spark_cleanup(i_older_than interval default '1 day')
returns bigint language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    n bigint;
begin
    -- Left by Spark drivers that died between staging and publishing.
    delete from pgque.spark_staging where staged_at < pg_catalog.now() - i_older_than;
    get diagnostics n = row_count;
    -- Batch writes that are over (spark_stage refuses them for as long as they are kept).
    delete from pgque.spark_commits
     where batch_id = -1 and committed_at < pg_catalog.now() - i_older_than;
    return n;
end
$$;
comment on function pgque.spark_cleanup(interval) is
    'Removes staged Spark rows older than the interval (writes whose driver died). Returns how many.';
