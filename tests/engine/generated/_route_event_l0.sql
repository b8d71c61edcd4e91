CREATE OR REPLACE FUNCTION pgque._route_event_l0(i_queue_id integer, i_table integer, i_ev_id bigint, i_ev_time timestamp with time zone, i_ev_owner integer, i_ev_retry integer, i_ev_type text, i_ev_data text, i_ev_extra1 text, i_ev_extra2 text, i_ev_extra3 text, i_ev_extra4 text)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
begin
if i_queue_id = 1 then
if i_table = 0 then
    insert into pgque.event_1_0 (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4) values (i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
    return 1;
elsif i_table = 1 then
    insert into pgque.event_1_1 (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4) values (i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
    return 1;
elsif i_table = 2 then
    insert into pgque.event_1_2 (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4) values (i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
    return 1;
end if;

elsif i_queue_id = 2 then
if i_table = 0 then
    insert into pgque.event_2_0 (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4) values (i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
    return 1;
elsif i_table = 1 then
    insert into pgque.event_2_1 (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4) values (i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
    return 1;
elsif i_table = 2 then
    insert into pgque.event_2_2 (ev_id, ev_time, ev_owner, ev_retry, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4) values (i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
    return 1;
end if;

end if;
    return pgque._insert_dynamic(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end
$function$
