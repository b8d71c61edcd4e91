CREATE OR REPLACE FUNCTION pgque._read_l0(i_queue_id integer, i_tables integer[], i_lower xid8, i_upper xid8, i_s1 pg_snapshot, i_s2 pg_snapshot, i_in_list xid8[], i_owner integer, i_ttl interval, i_slot integer, i_n integer, i_limit bigint)
 RETURNS TABLE(ev_id bigint, ev_time timestamp with time zone, ev_txid bigint, ev_retry integer, ev_type text, ev_data text, ev_extra1 text, ev_extra2 text, ev_extra3 text, ev_extra4 text)
 LANGUAGE plpgsql
 STABLE
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
 SET jit TO 'off'
 SET max_parallel_workers_per_gather TO '0'
AS $function$
declare
    t integer;
begin
if i_queue_id = 1 then
        foreach t in array i_tables loop
if t = 0 then
            return query select e.ev_id, e.ev_time, e.ev_txid::text::int8 as ev_txid, e.ev_retry, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4 from pgque.event_1_0 e
             where e.ev_txid >= i_lower and e.ev_txid <= i_upper
               and pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s2)
               and not pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s1) and (e.ev_owner is null or e.ev_owner = i_owner) and (i_ttl is null or e.ev_time >= pg_catalog.now() - i_ttl) and (i_n is null or pgque._partition_slot(e.ev_extra1, i_n) = i_slot) order by e.ev_id limit i_limit;
            if i_in_list is not null then
                return query select e.ev_id, e.ev_time, e.ev_txid::text::int8 as ev_txid, e.ev_retry, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4 from pgque.event_1_0 e
                 where e.ev_txid = any (i_in_list) and (e.ev_owner is null or e.ev_owner = i_owner) and (i_ttl is null or e.ev_time >= pg_catalog.now() - i_ttl) and (i_n is null or pgque._partition_slot(e.ev_extra1, i_n) = i_slot) order by e.ev_id limit i_limit;
            end if;
elsif t = 1 then
            return query select e.ev_id, e.ev_time, e.ev_txid::text::int8 as ev_txid, e.ev_retry, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4 from pgque.event_1_1 e
             where e.ev_txid >= i_lower and e.ev_txid <= i_upper
               and pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s2)
               and not pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s1) and (e.ev_owner is null or e.ev_owner = i_owner) and (i_ttl is null or e.ev_time >= pg_catalog.now() - i_ttl) and (i_n is null or pgque._partition_slot(e.ev_extra1, i_n) = i_slot) order by e.ev_id limit i_limit;
            if i_in_list is not null then
                return query select e.ev_id, e.ev_time, e.ev_txid::text::int8 as ev_txid, e.ev_retry, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4 from pgque.event_1_1 e
                 where e.ev_txid = any (i_in_list) and (e.ev_owner is null or e.ev_owner = i_owner) and (i_ttl is null or e.ev_time >= pg_catalog.now() - i_ttl) and (i_n is null or pgque._partition_slot(e.ev_extra1, i_n) = i_slot) order by e.ev_id limit i_limit;
            end if;
elsif t = 2 then
            return query select e.ev_id, e.ev_time, e.ev_txid::text::int8 as ev_txid, e.ev_retry, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4 from pgque.event_1_2 e
             where e.ev_txid >= i_lower and e.ev_txid <= i_upper
               and pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s2)
               and not pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s1) and (e.ev_owner is null or e.ev_owner = i_owner) and (i_ttl is null or e.ev_time >= pg_catalog.now() - i_ttl) and (i_n is null or pgque._partition_slot(e.ev_extra1, i_n) = i_slot) order by e.ev_id limit i_limit;
            if i_in_list is not null then
                return query select e.ev_id, e.ev_time, e.ev_txid::text::int8 as ev_txid, e.ev_retry, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4 from pgque.event_1_2 e
                 where e.ev_txid = any (i_in_list) and (e.ev_owner is null or e.ev_owner = i_owner) and (i_ttl is null or e.ev_time >= pg_catalog.now() - i_ttl) and (i_n is null or pgque._partition_slot(e.ev_extra1, i_n) = i_slot) order by e.ev_id limit i_limit;
            end if;
end if;
        end loop;
        return;
elsif i_queue_id = 2 then
        foreach t in array i_tables loop
if t = 0 then
            return query select e.ev_id, e.ev_time, e.ev_txid::text::int8 as ev_txid, e.ev_retry, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4 from pgque.event_2_0 e
             where e.ev_txid >= i_lower and e.ev_txid <= i_upper
               and pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s2)
               and not pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s1) and (e.ev_owner is null or e.ev_owner = i_owner) and (i_ttl is null or e.ev_time >= pg_catalog.now() - i_ttl) and (i_n is null or pgque._partition_slot(e.ev_extra1, i_n) = i_slot) order by e.ev_id limit i_limit;
            if i_in_list is not null then
                return query select e.ev_id, e.ev_time, e.ev_txid::text::int8 as ev_txid, e.ev_retry, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4 from pgque.event_2_0 e
                 where e.ev_txid = any (i_in_list) and (e.ev_owner is null or e.ev_owner = i_owner) and (i_ttl is null or e.ev_time >= pg_catalog.now() - i_ttl) and (i_n is null or pgque._partition_slot(e.ev_extra1, i_n) = i_slot) order by e.ev_id limit i_limit;
            end if;
elsif t = 1 then
            return query select e.ev_id, e.ev_time, e.ev_txid::text::int8 as ev_txid, e.ev_retry, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4 from pgque.event_2_1 e
             where e.ev_txid >= i_lower and e.ev_txid <= i_upper
               and pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s2)
               and not pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s1) and (e.ev_owner is null or e.ev_owner = i_owner) and (i_ttl is null or e.ev_time >= pg_catalog.now() - i_ttl) and (i_n is null or pgque._partition_slot(e.ev_extra1, i_n) = i_slot) order by e.ev_id limit i_limit;
            if i_in_list is not null then
                return query select e.ev_id, e.ev_time, e.ev_txid::text::int8 as ev_txid, e.ev_retry, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4 from pgque.event_2_1 e
                 where e.ev_txid = any (i_in_list) and (e.ev_owner is null or e.ev_owner = i_owner) and (i_ttl is null or e.ev_time >= pg_catalog.now() - i_ttl) and (i_n is null or pgque._partition_slot(e.ev_extra1, i_n) = i_slot) order by e.ev_id limit i_limit;
            end if;
elsif t = 2 then
            return query select e.ev_id, e.ev_time, e.ev_txid::text::int8 as ev_txid, e.ev_retry, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4 from pgque.event_2_2 e
             where e.ev_txid >= i_lower and e.ev_txid <= i_upper
               and pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s2)
               and not pg_catalog.pg_visible_in_snapshot(e.ev_txid, i_s1) and (e.ev_owner is null or e.ev_owner = i_owner) and (i_ttl is null or e.ev_time >= pg_catalog.now() - i_ttl) and (i_n is null or pgque._partition_slot(e.ev_extra1, i_n) = i_slot) order by e.ev_id limit i_limit;
            if i_in_list is not null then
                return query select e.ev_id, e.ev_time, e.ev_txid::text::int8 as ev_txid, e.ev_retry, e.ev_type, e.ev_data, e.ev_extra1, e.ev_extra2, e.ev_extra3, e.ev_extra4 from pgque.event_2_2 e
                 where e.ev_txid = any (i_in_list) and (e.ev_owner is null or e.ev_owner = i_owner) and (i_ttl is null or e.ev_time >= pg_catalog.now() - i_ttl) and (i_n is null or pgque._partition_slot(e.ev_extra1, i_n) = i_slot) order by e.ev_id limit i_limit;
            end if;
end if;
        end loop;
        return;
end if;
    raise exception 'pgque internal error: no batch reader for queue id %', i_queue_id
        using detail = 'pgque:assertion_failed';
end
$function$
