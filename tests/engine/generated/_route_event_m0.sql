CREATE OR REPLACE FUNCTION pgque._route_event_m0(i_queue_id integer, i_table integer, i_ev_id bigint, i_ev_time timestamp with time zone, i_ev_owner integer, i_ev_retry integer, i_ev_type text, i_ev_data text, i_ev_extra1 text, i_ev_extra2 text, i_ev_extra3 text, i_ev_extra4 text)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
declare
    k integer := i_queue_id / 16;
begin
if k < 64 then
if k < 32 then
if k < 16 then
if k < 8 then
if k < 4 then
if k = 0 then
    return pgque._route_event_l0(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 1 then
    return pgque._route_event_l1(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 2 then
    return pgque._route_event_l2(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 3 then
    return pgque._route_event_l3(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 4 then
    return pgque._route_event_l4(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 5 then
    return pgque._route_event_l5(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 6 then
    return pgque._route_event_l6(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 7 then
    return pgque._route_event_l7(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

else
if k < 12 then
if k = 8 then
    return pgque._route_event_l8(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 9 then
    return pgque._route_event_l9(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 10 then
    return pgque._route_event_l10(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 11 then
    return pgque._route_event_l11(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 12 then
    return pgque._route_event_l12(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 13 then
    return pgque._route_event_l13(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 14 then
    return pgque._route_event_l14(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 15 then
    return pgque._route_event_l15(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

end if;

else
if k < 24 then
if k < 20 then
if k = 16 then
    return pgque._route_event_l16(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 17 then
    return pgque._route_event_l17(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 18 then
    return pgque._route_event_l18(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 19 then
    return pgque._route_event_l19(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 20 then
    return pgque._route_event_l20(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 21 then
    return pgque._route_event_l21(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 22 then
    return pgque._route_event_l22(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 23 then
    return pgque._route_event_l23(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

else
if k < 28 then
if k = 24 then
    return pgque._route_event_l24(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 25 then
    return pgque._route_event_l25(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 26 then
    return pgque._route_event_l26(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 27 then
    return pgque._route_event_l27(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 28 then
    return pgque._route_event_l28(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 29 then
    return pgque._route_event_l29(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 30 then
    return pgque._route_event_l30(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 31 then
    return pgque._route_event_l31(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

end if;

end if;

else
if k < 48 then
if k < 40 then
if k < 36 then
if k = 32 then
    return pgque._route_event_l32(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 33 then
    return pgque._route_event_l33(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 34 then
    return pgque._route_event_l34(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 35 then
    return pgque._route_event_l35(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 36 then
    return pgque._route_event_l36(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 37 then
    return pgque._route_event_l37(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 38 then
    return pgque._route_event_l38(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 39 then
    return pgque._route_event_l39(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

else
if k < 44 then
if k = 40 then
    return pgque._route_event_l40(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 41 then
    return pgque._route_event_l41(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 42 then
    return pgque._route_event_l42(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 43 then
    return pgque._route_event_l43(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 44 then
    return pgque._route_event_l44(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 45 then
    return pgque._route_event_l45(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 46 then
    return pgque._route_event_l46(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 47 then
    return pgque._route_event_l47(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

end if;

else
if k < 56 then
if k < 52 then
if k = 48 then
    return pgque._route_event_l48(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 49 then
    return pgque._route_event_l49(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 50 then
    return pgque._route_event_l50(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 51 then
    return pgque._route_event_l51(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 52 then
    return pgque._route_event_l52(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 53 then
    return pgque._route_event_l53(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 54 then
    return pgque._route_event_l54(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 55 then
    return pgque._route_event_l55(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

else
if k < 60 then
if k = 56 then
    return pgque._route_event_l56(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 57 then
    return pgque._route_event_l57(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 58 then
    return pgque._route_event_l58(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 59 then
    return pgque._route_event_l59(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 60 then
    return pgque._route_event_l60(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 61 then
    return pgque._route_event_l61(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 62 then
    return pgque._route_event_l62(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 63 then
    return pgque._route_event_l63(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

end if;

end if;

end if;

else
if k < 96 then
if k < 80 then
if k < 72 then
if k < 68 then
if k = 64 then
    return pgque._route_event_l64(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 65 then
    return pgque._route_event_l65(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 66 then
    return pgque._route_event_l66(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 67 then
    return pgque._route_event_l67(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 68 then
    return pgque._route_event_l68(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 69 then
    return pgque._route_event_l69(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 70 then
    return pgque._route_event_l70(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 71 then
    return pgque._route_event_l71(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

else
if k < 76 then
if k = 72 then
    return pgque._route_event_l72(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 73 then
    return pgque._route_event_l73(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 74 then
    return pgque._route_event_l74(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 75 then
    return pgque._route_event_l75(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 76 then
    return pgque._route_event_l76(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 77 then
    return pgque._route_event_l77(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 78 then
    return pgque._route_event_l78(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 79 then
    return pgque._route_event_l79(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

end if;

else
if k < 88 then
if k < 84 then
if k = 80 then
    return pgque._route_event_l80(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 81 then
    return pgque._route_event_l81(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 82 then
    return pgque._route_event_l82(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 83 then
    return pgque._route_event_l83(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 84 then
    return pgque._route_event_l84(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 85 then
    return pgque._route_event_l85(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 86 then
    return pgque._route_event_l86(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 87 then
    return pgque._route_event_l87(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

else
if k < 92 then
if k = 88 then
    return pgque._route_event_l88(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 89 then
    return pgque._route_event_l89(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 90 then
    return pgque._route_event_l90(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 91 then
    return pgque._route_event_l91(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 92 then
    return pgque._route_event_l92(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 93 then
    return pgque._route_event_l93(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 94 then
    return pgque._route_event_l94(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 95 then
    return pgque._route_event_l95(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

end if;

end if;

else
if k < 112 then
if k < 104 then
if k < 100 then
if k = 96 then
    return pgque._route_event_l96(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 97 then
    return pgque._route_event_l97(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 98 then
    return pgque._route_event_l98(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 99 then
    return pgque._route_event_l99(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 100 then
    return pgque._route_event_l100(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 101 then
    return pgque._route_event_l101(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 102 then
    return pgque._route_event_l102(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 103 then
    return pgque._route_event_l103(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

else
if k < 108 then
if k = 104 then
    return pgque._route_event_l104(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 105 then
    return pgque._route_event_l105(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 106 then
    return pgque._route_event_l106(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 107 then
    return pgque._route_event_l107(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 108 then
    return pgque._route_event_l108(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 109 then
    return pgque._route_event_l109(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 110 then
    return pgque._route_event_l110(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 111 then
    return pgque._route_event_l111(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

end if;

else
if k < 120 then
if k < 116 then
if k = 112 then
    return pgque._route_event_l112(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 113 then
    return pgque._route_event_l113(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 114 then
    return pgque._route_event_l114(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 115 then
    return pgque._route_event_l115(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 116 then
    return pgque._route_event_l116(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 117 then
    return pgque._route_event_l117(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 118 then
    return pgque._route_event_l118(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 119 then
    return pgque._route_event_l119(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

else
if k < 124 then
if k = 120 then
    return pgque._route_event_l120(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 121 then
    return pgque._route_event_l121(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 122 then
    return pgque._route_event_l122(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 123 then
    return pgque._route_event_l123(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

else
if k = 124 then
    return pgque._route_event_l124(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 125 then
    return pgque._route_event_l125(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 126 then
    return pgque._route_event_l126(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
elsif k = 127 then
    return pgque._route_event_l127(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end if;

end if;

end if;

end if;

end if;

end if;
    return pgque._insert_dynamic(i_queue_id, i_table, i_ev_id, i_ev_time, i_ev_owner, i_ev_retry, i_ev_type, i_ev_data, i_ev_extra1, i_ev_extra2, i_ev_extra3, i_ev_extra4);
end
$function$
