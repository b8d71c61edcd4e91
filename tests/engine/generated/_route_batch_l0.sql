CREATE OR REPLACE FUNCTION pgque._route_batch_l0(i_queue_id integer, i_table integer, i_ids bigint[], i_payloads text[], i_types text[], i_type text, i_extra1 text[], i_extra2 text[], i_extra3 text[], i_extra4 text[])
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
begin
if i_queue_id = 1 then
if i_table = 0 then
    insert into pgque.event_1_0 (ev_id, ev_time, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4) select id, pg_catalog.now(), coalesce(t, i_type), p, e1, e2, e3, e4 from unnest(i_ids, i_payloads, i_types, i_extra1, i_extra2, i_extra3, i_extra4) as b(id, p, t, e1, e2, e3, e4);
    return 1;
elsif i_table = 1 then
    insert into pgque.event_1_1 (ev_id, ev_time, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4) select id, pg_catalog.now(), coalesce(t, i_type), p, e1, e2, e3, e4 from unnest(i_ids, i_payloads, i_types, i_extra1, i_extra2, i_extra3, i_extra4) as b(id, p, t, e1, e2, e3, e4);
    return 1;
elsif i_table = 2 then
    insert into pgque.event_1_2 (ev_id, ev_time, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4) select id, pg_catalog.now(), coalesce(t, i_type), p, e1, e2, e3, e4 from unnest(i_ids, i_payloads, i_types, i_extra1, i_extra2, i_extra3, i_extra4) as b(id, p, t, e1, e2, e3, e4);
    return 1;
end if;

elsif i_queue_id = 2 then
if i_table = 0 then
    insert into pgque.event_2_0 (ev_id, ev_time, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4) select id, pg_catalog.now(), coalesce(t, i_type), p, e1, e2, e3, e4 from unnest(i_ids, i_payloads, i_types, i_extra1, i_extra2, i_extra3, i_extra4) as b(id, p, t, e1, e2, e3, e4);
    return 1;
elsif i_table = 1 then
    insert into pgque.event_2_1 (ev_id, ev_time, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4) select id, pg_catalog.now(), coalesce(t, i_type), p, e1, e2, e3, e4 from unnest(i_ids, i_payloads, i_types, i_extra1, i_extra2, i_extra3, i_extra4) as b(id, p, t, e1, e2, e3, e4);
    return 1;
elsif i_table = 2 then
    insert into pgque.event_2_2 (ev_id, ev_time, ev_type, ev_data, ev_extra1, ev_extra2, ev_extra3, ev_extra4) select id, pg_catalog.now(), coalesce(t, i_type), p, e1, e2, e3, e4 from unnest(i_ids, i_payloads, i_types, i_extra1, i_extra2, i_extra3, i_extra4) as b(id, p, t, e1, e2, e3, e4);
    return 1;
end if;

end if;
    return pgque._insert_batch_dynamic(i_queue_id, i_table, i_ids, i_payloads, i_types, i_type, i_extra1, i_extra2, i_extra3, i_extra4);
end
$function$
