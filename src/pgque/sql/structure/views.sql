-- Views over the tables (created after upgrade.sql, so every column they
-- read exists).

-- Partition slots (functions/partition.sql) at a glance.
create or replace view pgque.partition_slot_status as
select q.queue_name, ps.co_name as consumer, ps.slot, pc.n,
       ps.lease_owner, ps.lease_until, ps.epoch,
       s.sub_last_tick as last_tick,
       last.tick_event_seq - t.tick_event_seq as pending_events
  from pgque.partition_slot ps
  join pgque.partition_consumer pc on pc.queue_id = ps.queue_id and pc.co_name = ps.co_name
  join pgque.queue q on q.queue_id = ps.queue_id
  left join pgque.consumer c on c.co_name = ps.co_name || '#' || ps.slot || '/' || pc.n
  left join pgque.subscription s on s.sub_queue = ps.queue_id and s.sub_consumer = c.co_id
  left join pgque.tick t on t.tick_queue = s.sub_queue and t.tick_id = s.sub_last_tick
  left join lateral (
      select lt.tick_event_seq from pgque.tick lt
       where lt.tick_queue = ps.queue_id order by lt.tick_id desc limit 1) last on true;
comment on view pgque.partition_slot_status is
    'Every partition slot: its lease, epoch, position and estimated pending events.';
