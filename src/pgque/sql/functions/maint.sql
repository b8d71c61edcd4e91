-- Maintenance: table rotation, retry moves and the maint() round.
--
-- Rotation recycles a queue's oldest event table with TRUNCATE, so events
-- are never deleted one by one. It runs in two steps in two transactions:
-- step 1 switches writers to the next (emptied) table and records its txid
-- in queue_switch_step1; step 2, in a later transaction, records a txid
-- assigned after step 1 committed in queue_switch_step2. Batches that end
-- before step 1 read only the previous table, batches that start after
-- step 2 only the current one, the rest both.

create or replace function pgque.maint_rotate_tables_step1(i_queue_name text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q pgque.queue%rowtype;
    v_oldest_xmin xid8;
    v_oldest_tick bigint;
    v_next_table text;
begin
    -- Never wait: a transaction that received or acked may hold the queue's
    -- row (a key-share lock, through a foreign key) until it ends. Step 1
    -- changes no key column, so it does not conflict with those; any other
    -- holder makes this round skip the queue, and the next round retries
    -- (queue_health's rotation_health warns when that lasts).
    select * into q from pgque.queue
     where queue_name = i_queue_name
       and queue_rotation_period is not null
       and queue_switch_step2 is not null
       and queue_switch_time + queue_rotation_period < current_timestamp
       for no key update skip locked;
    if not found then
        return 0;
    end if;
    if pg_catalog.pg_current_xact_id() < q.queue_switch_step1 then
        raise exception 'Invalid PgQ state: queue % was rotated by a future txid (txid counter went backwards?)',
            i_queue_name using detail = 'pgque:invalid_state';
    end if;

    -- The table about to be emptied was last written before the previous
    -- step 2: rotate only when every consumer's position is past it.
    select sub_last_tick into v_oldest_tick from pgque.subscription
     where sub_queue = q.queue_id and sub_last_tick is not null
     order by sub_last_tick limit 1;
    if found then
        select pg_catalog.pg_snapshot_xmin(tick_snapshot) into v_oldest_xmin
          from pgque.tick where tick_queue = q.queue_id and tick_id = v_oldest_tick;
        if not found then
            raise exception 'pgque corruption: queue % has a consumer at missing tick %',
                i_queue_name, v_oldest_tick using detail = 'pgque:corruption';
        end if;
        if v_oldest_xmin <= q.queue_switch_step2 then
            return 0;
        end if;
    end if;

    v_next_table := pgque._queue_relation(
        q, ((q.queue_cur_table + 1) % q.queue_ntables)::text);
    begin
        execute 'lock table ' || v_next_table || ' in access exclusive mode nowait';
    exception when lock_not_available then
        -- Someone (pg_dump, a long reader) holds the table: try next round.
        return 0;
    end;
    execute 'truncate ' || v_next_table;

    update pgque.queue
       set queue_cur_table = (queue_cur_table + 1) % queue_ntables,
           queue_switch_time = current_timestamp,
           queue_switch_step1 = pg_catalog.pg_current_xact_id(),
           queue_switch_step2 = null
     where queue_id = q.queue_id;

    perform pgque.log_event('info', 'rotation', 'step 1', pg_catalog.jsonb_build_object(
        'queue', i_queue_name, 'table', (q.queue_cur_table + 1) % q.queue_ntables));
    -- Ticks below the previous step 2 can no longer start a batch.
    delete from pgque.tick
     where tick_queue = q.queue_id
       and pg_catalog.pg_snapshot_xmin(tick_snapshot) < q.queue_switch_step2;
    return 0;
end
$$;
comment on function pgque.maint_rotate_tables_step1(text) is
    'Rotates the queue''s event tables when due and no consumer needs the oldest one. Returns 0.';

create or replace function pgque.maint_rotate_tables_step2()
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    -- Only rotations committed by an earlier transaction: step 2 in the
    -- same transaction as step 1 would lose events of racing writers.
    -- Rows another transaction holds are skipped, not waited for.
    update pgque.queue
       set queue_switch_step2 = pg_catalog.pg_current_xact_id()
     where queue_id in (
            select queue_id from pgque.queue
             where queue_switch_step2 is null
               and queue_switch_step1 < pg_catalog.pg_current_xact_id()
               for no key update skip locked);
    if found then
        perform pgque.log_event('info', 'rotation', 'step 2', '{}');
    end if;
    return 0;
end
$$;
comment on function pgque.maint_rotate_tables_step2() is
    'Completes rotations whose step 1 committed in an earlier transaction. Returns 0.';

create or replace function pgque.maint_tables_to_vacuum()
returns setof text language sql stable
security definer set search_path = pgque, pg_catalog, pg_temp as $$
    -- The bookkeeping tables churn with every batch and tick; they are listed
    -- even with autovacuum on, whose naptime is too slow for them.
    select t from pg_catalog.unnest(array[
        'pgque.subscription', 'pgque.consumer', 'pgque.queue',
        'pgque.tick', 'pgque.retry_queue', 'pgque.delayed_events', 'pgque.dead_letter']) t
     where pg_catalog.to_regclass(t) is not null
$$;
comment on function pgque.maint_tables_to_vacuum() is
    'The hot bookkeeping tables to VACUUM regularly (in separate statements: VACUUM cannot run in a function).';

-- Internal: the queues whose rotation is due (step 1), by name.
create or replace function pgque._rotation_due()
returns setof text language sql stable as $$
    select queue_name from pgque.queue
     where queue_rotation_period is not null
       and queue_switch_step2 is not null
       and queue_switch_time + queue_rotation_period < current_timestamp
     order by queue_name
$$;

-- Internal: every queue's extra maintenance functions (queue_extra_maint),
-- by queue name, each queue's in its order.
create or replace function pgque._extra_maint(out queue_name text, out maint_function text)
returns setof record language sql stable as $$
    select q.queue_name, f.maint_function
      from pgque.queue q,
           pg_catalog.unnest(q.queue_extra_maint) with ordinality as f(maint_function, n)
     where q.queue_extra_maint is not null
     order by q.queue_name, f.n
$$;

create or replace function pgque.maint_operations(out func_name text, out func_arg text)
returns setof record language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_queue text;
    v_rotation_due boolean := false;
    v_func text;
begin
    for v_queue in select pgque._rotation_due() loop
        func_name := 'pgque.maint_rotate_tables_step1';
        func_arg := v_queue;
        v_rotation_due := true;
        return next;
    end loop;

    if v_rotation_due or exists (select 1 from pgque.queue where queue_switch_step2 is null) then
        func_name := 'pgque.maint_rotate_tables_step2';
        func_arg := null;
        return next;
    end if;

    -- Only what maint() itself would run: a daemon runs these as it is.
    return query
        select e.maint_function, e.queue_name from pgque._extra_maint() e
         where pgque._allowed_maint_function(e.maint_function) is not null;

    for v_func in select t from pgque.maint_tables_to_vacuum() t loop
        func_name := 'vacuum';
        func_arg := v_func;
        return next;
    end loop;
end
$$;
comment on function pgque.maint_operations() is
    'What a maintenance daemon should run, each call in its own transaction: (func_name, func_arg) rows.';

-- Internal: the function a queue_extra_maint entry names, when maint() may
-- run it: pgque's own pgque.maint_*(text), or one an owner registered with
-- register_maint_function(). Compared by OID, never by name. NULL otherwise.
create or replace function pgque._allowed_maint_function(i_function text)
returns regprocedure language plpgsql stable set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_proc regprocedure;
begin
    begin
        v_proc := pg_catalog.to_regprocedure(i_function || '(text)');
    exception when others then
        return null;  -- not a function name at all
    end;
    if v_proc is null then
        return null;
    end if;
    if exists (select 1 from pg_catalog.pg_proc p
                where p.oid = v_proc and p.pronamespace = 'pgque'::regnamespace
                  and p.proname like 'maint\_%')
       or exists (select 1 from pgque.maint_function m
                   where pg_catalog.to_regprocedure(m.mf_function || '(text)') = v_proc)
    then
        return v_proc;
    end if;
    return null;
end
$$;

-- Internal: runs one queue_extra_maint function, when it is allowed to.
create or replace function pgque._run_extra_maint(i_function text, i_queue_name text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_proc regprocedure := pgque._allowed_maint_function(i_function);
    v_result integer;
begin
    if v_proc is null then
        raise warning 'pgque.maint: skipping % for queue %: not pgque''s own maint_* function and not registered with pgque.register_maint_function()',
            i_function, i_queue_name;
        return 0;
    end if;
    execute pg_catalog.format('select %s($1)', v_proc::regproc) into v_result using i_queue_name;
    return coalesce(v_result, 0);
end
$$;

create or replace function pgque.register_maint_function(i_function regprocedure)
returns integer language plpgsql strict
security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_proc record;
begin
    select n.nspname, p.proname, p.pronargs, p.proargtypes, p.prorettype, p.prokind
      into v_proc
      from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
     where p.oid = i_function;
    if v_proc.prokind <> 'f' or v_proc.pronargs <> 1
       or v_proc.proargtypes[0] <> 'pg_catalog.text'::regtype
       or v_proc.prorettype not in ('pg_catalog.int4'::regtype, 'pg_catalog.int8'::regtype)
    then
        raise exception 'register_maint_function: % must be a function taking one text argument (the queue name) and returning integer',
            i_function using detail = 'pgque:invalid_argument';
    end if;
    insert into pgque.maint_function (mf_function)
    values (pg_catalog.quote_ident(v_proc.nspname) || '.' || pg_catalog.quote_ident(v_proc.proname))
    on conflict do nothing;
    return case when found then 1 else 0 end;
end
$$;
comment on function pgque.register_maint_function(regprocedure) is
    'Owner only: allows a function f(queue text) returning integer in queue_extra_maint (set with set_queue_config(queue, ''extra_maint'', ...)); maint() runs it as pgque''s owner. Returns 1, or 0 when already allowed.';

create or replace function pgque.unregister_maint_function(i_function regprocedure)
returns integer language plpgsql strict
security definer set search_path = pgque, pg_catalog, pg_temp as $$
begin
    delete from pgque.maint_function m
     where pg_catalog.to_regprocedure(m.mf_function || '(text)') = i_function;
    return case when found then 1 else 0 end;
end
$$;
comment on function pgque.unregister_maint_function(regprocedure) is
    'Owner only: withdraws a register_maint_function() permission; maint() skips the function from then on. Returns 1, or 0 when it was not registered.';

create or replace function pgque.maint()
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q record;
    v_queue text;
    v_total integer := 0;
begin
    -- 1. Complete rotations begun by an earlier maint() (or step 1 call).
    v_total := v_total + pgque.maint_rotate_tables_step2();
    -- 2. Every due retry, set-based, no cap; then due delayed messages.
    v_total := v_total + pgque._move_retry_events(null);
    v_total := v_total + pgque.maint_deliver_delayed();
    -- 3. Rotation step 1 where due; step 2 follows in the next round.
    for v_queue in select pgque._rotation_due() loop
        v_total := v_total + pgque.maint_rotate_tables_step1(v_queue);
    end loop;
    -- 4. Per-queue extra maintenance functions.
    for q in select * from pgque._extra_maint() loop
        v_total := v_total + pgque._run_extra_maint(q.maint_function, q.queue_name);
    end loop;
    return v_total;
end
$$;
comment on function pgque.maint() is
    'One maintenance round: completes earlier rotations, moves due retries and delayed messages, starts due rotations, runs extra maintenance. Returns the sum of their results.';

-- maint()'s work with a transaction per operation, as PgQ's maintenance
-- daemon runs maint_operations(): a queue whose step waits or fails holds
-- back nothing that other queues' steps already did. A procedure that
-- commits runs as its caller and cannot pin search_path, so every function,
-- operator and type is qualified (tests/security runs it on a hostile path).
create or replace procedure pgque.run_maint()
language plpgsql
as $$
declare
    v_op record;
    v_ops integer := 0;
    v_failures integer := 0;
    v_last_error pg_catalog.text;
begin
    -- Inside a transaction block this fails at once (invalid transaction
    -- termination).
    commit;
    perform pgque.maint_rotate_tables_step2();
    commit;
    perform pgque._move_retry_events(null);
    commit;
    perform pgque.maint_deliver_delayed();
    commit;
    for v_op in select o.func_name, o.func_arg from pgque.maint_operations() o loop
        v_ops := v_ops OPERATOR(pg_catalog.+) 1;
        begin
            if v_op.func_name OPERATOR(pg_catalog.=) 'pgque.maint_rotate_tables_step1' then
                perform pgque.maint_rotate_tables_step1(v_op.func_arg);
            elsif v_op.func_name OPERATOR(pg_catalog.=) 'pgque.maint_rotate_tables_step2' then
                perform pgque.maint_rotate_tables_step2();
            elsif v_op.func_name OPERATOR(pg_catalog.<>) 'vacuum' then
                -- VACUUM cannot run here (the pgque_vacuum job does it).
                perform pgque._run_extra_maint(v_op.func_name, v_op.func_arg);
            end if;
        exception when query_canceled then
            raise;
        when others then
            -- One failing operation does not stop the others; reported at the end.
            v_failures := v_failures OPERATOR(pg_catalog.+) 1;
            v_last_error := pg_catalog.concat_ws(': ', v_op.func_name, v_op.func_arg, sqlerrm);
        end;
        commit;
    end loop;
    if v_failures OPERATOR(pg_catalog.>) 0 then
        raise exception 'pgque.run_maint: % of % operations failed; last: %',
            v_failures, v_ops, v_last_error using detail = 'pgque:maint_failed';
    end if;
end
$$;
comment on procedure pgque.run_maint() is
    'CALL outside a transaction block: maint()''s work, one operation per transaction (rotation steps per queue, retries, delayed messages, extra maintenance), so no queue waits for another (what the pg_cron and pg_timetable maint jobs run).';

