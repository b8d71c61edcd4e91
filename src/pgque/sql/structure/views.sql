-- Views over the tables (created after upgrade.sql, so every column they
-- read exists).

-- Partition slots (functions/partition.sql) at a glance.
-- Replaced only when its definition changed: CREATE OR REPLACE VIEW takes
-- an ACCESS EXCLUSIVE lock, which would wait for any reader's transaction
-- that read the view, and stall the install behind it. The new definition
-- is written as a scratch view first and compared as PostgreSQL prints both.
do $view$
declare
    v_select constant text := $select$
select q.queue_name, pc.co_name as consumer, k.slot, pc.n,
       -- An expired lease has no owner any more (lease_until keeps its value).
       case when ps.lease_until > pg_catalog.clock_timestamp() then ps.lease_owner end as lease_owner,
       ps.lease_until, coalesce(ps.epoch, 0) as epoch,
       s.sub_last_tick as last_tick,
       greatest(coalesce(last.tick_event_seq - t.tick_event_seq, 0), 0) as pending_events
  from pgque.partition_consumer pc
  join pgque.queue q on q.queue_id = pc.queue_id
  cross join lateral pg_catalog.generate_series(0, pc.n - 1) as k(slot)
  left join pgque.partition_slot ps
         on ps.queue_id = pc.queue_id and ps.co_name = pc.co_name and ps.slot = k.slot
  left join pgque.consumer c on c.co_name = pc.co_name || '#' || k.slot || '/' || pc.n
  left join pgque.subscription s on s.sub_queue = pc.queue_id and s.sub_consumer = c.co_id
  left join pgque.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
  left join lateral (
      select lt.tick_event_seq from pgque.tick lt
       where lt.tick_queue = pc.queue_id order by lt.tick_id desc limit 1) last on true
$select$;
begin
    execute 'create view pgque._view_candidate as ' || v_select;
    if pg_catalog.pg_get_viewdef(pg_catalog.to_regclass('pgque.partition_slot_status'))
       is distinct from pg_catalog.pg_get_viewdef(pg_catalog.to_regclass('pgque._view_candidate')) then
        execute 'create or replace view pgque.partition_slot_status as ' || v_select;
    end if;
    drop view pgque._view_candidate;
end
$view$;
comment on view pgque.partition_slot_status is
    'Every slot 0..n-1 of each partitioned consumer: its live lease (expired owners masked), epoch, position and pending events (never NULL or negative).';
