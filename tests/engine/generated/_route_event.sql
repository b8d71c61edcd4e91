CREATE OR REPLACE FUNCTION pgque._route_event(i_queue_id integer, i_table integer, i_ev_id bigint, i_ev_time timestamp with time zone, i_ev_owner integer, i_ev_retry integer, i_ev_type text, i_ev_data text, i_ev_extra1 text, i_ev_extra2 text, i_ev_extra3 text, i_ev_extra4 text)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
declare
    m integer := i_queue_id / 2048;
begin
if m = 0 then
    return pgque._route_event_m0(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;
    return pgque._insert_dynamic(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end
$function$
