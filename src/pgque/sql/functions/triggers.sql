-- CDC triggers: turn row changes into queue events (PgQ's jsontriga, logutriga, sqltriga).
--
--   create trigger t after insert or update or delete on tbl
--       for each row execute function pgque.jsontriga('queue' [, arg ...]);
--   create trigger t_trunc after truncate on tbl
--       for each statement execute function pgque.jsontriga('queue');
--
-- Every change becomes one event, inserted with pgque.insert_event(queue, type, data,
-- extra1..extra4). ev_extra1 is 'schema.table' (unquoted). The three formats:
--
-- * jsontriga (recommended): ev_type is the JSON object
--   {"op":"INSERT|UPDATE|DELETE|TRUNCATE","table":["schema","table"],"pkey":["col",...]};
--   ev_data is a JSON object of the row's columns in column order. int2/int4/int8 are
--   JSON numbers, bool JSON booleans, NULL null; timestamptz, timestamp and date are ISO
--   8601 strings ("2009-09-19T11:59:48.599+00:00"); every other type (domains included)
--   is the JSON string of the type's text output. TRUNCATE: data {}.
-- * logutriga: ev_type is 'I:', 'U:' or 'D:' followed by the key column list;
--   ev_data is urlencoded 'col=value&col2=value' (NULL: the bare column name; bytes
--   other than A-Z a-z 0-9 - . _ as %xx in lowercase hex, space as +). TRUNCATE: 'R', ''.
-- * sqltriga: ev_type is 'I', 'U' or 'D'; ev_data is a SQL fragment: INSERT
--   '(c1,c2) values (''v1'',null)', UPDATE 'c2=''v'',c3=NULL where k=''1''' (only the
--   changed columns; when nothing changed the first key column is set to itself),
--   DELETE 'k=''1'' and k2=''2'''. Identifiers as quote_ident, values as quote_literal
--   (E'' strings when backslashes are involved). TRUNCATE: 'R', ''.
--
-- The row that is encoded is the new row, or the old one for DELETE. Values use the
-- type's output function, so they follow the session's DateStyle, IntervalStyle etc.
--
-- Trigger arguments after the queue name, in any order:
--   SKIP          BEFORE trigger only: the event is produced but the row change is not
--   backup        UPDATE: the old row, in the same encoding (urlencoded for sqltriga),
--                 goes to ev_extra2
--   deny          refuse every change (and TRUNCATE) with an error
--   ignore=a,b    leave the columns out of the data; an UPDATE that changes only
--                 ignored columns (or _pgq_ev_* columns) produces no event. sqltriga
--                 always drops such updates.
--   pkey=a,b      the key columns, instead of the primary key (jsontriga's "pkey" is
--                 this text split at commas); of several ignore= or pkey= the last counts
--   ev_type=, ev_data=, ev_extra1= .. ev_extra4=, when=
--                 SQL expressions over the row's columns (write them as bare column
--                 names), evaluated read-only, in argument order; the first of each
--                 kind counts. The result's text output replaces the field; when= must
--                 give a boolean and the event is produced only if it is true.
-- Columns named _pgq_ev_type, _pgq_ev_data and _pgq_ev_extra1..4 (deprecated) replace
-- that field with their value (NULL included) and are left out of the data; an
-- expression argument for the same field wins.
--
-- Key columns: a column is a key column when its name appears in the key list (the
-- pkey= text, or the primary key columns joined by ',') delimited by commas, white
-- space or the ends of the list, exactly as PgQ matches names. UPDATE and DELETE need
-- a non-empty key list; an UPDATE may not change a key column. Whether a column
-- changed is decided by the equality of its type's default btree (else hash) operator
-- class, as for 1.0 and 1.00, or by the text output for types without one (json, box)
-- and, as in PgQ, for array columns.
--
-- In session_replication_role 'local' the triggers do nothing (no event, no checks,
-- SKIP ignored). In 'replica' ordinary triggers do not fire at all; make the trigger
-- ENABLE ALWAYS or ENABLE REPLICA to capture changes there.
--
-- Privileges: the triggers and their helpers are SECURITY INVOKER, like PgQ's: they
-- run as the user doing the DML, who must be able to reach pgque.insert_event, i.e.
-- be a member of pgque_writer (which gets EXECUTE on the functions below). Trigger
-- argument expressions run as that user too, read-only, with the caller's search_path.
-- Functions, types and catalogs are schema-qualified; operators are left to
-- pg_catalog's implicit place at the head of the search path, except in the generated
-- value comparisons, which name the operator's schema.

-- Urlencodes a text value byte by byte in the database encoding.
create or replace function pgque._trigger_urlencode(i_value text)
returns text language sql stable strict as $$
    select case
        when i_value ~ '^[A-Za-z0-9._-]*$' then i_value
        else (
            select pg_catalog.string_agg(
                       case
                           when b.v between 48 and 57 or b.v between 65 and 90
                                or b.v between 97 and 122 or b.v in (45, 46, 95)
                               then pg_catalog.chr(b.v)
                           when b.v = 32 then '+'
                           else '%' || pg_catalog.lpad(pg_catalog.to_hex(b.v), 2, '0')
                       end,
                       '' order by x.i)
              from (select pg_catalog.convert_to(i_value, pg_catalog.getdatabaseencoding())
                               as bytes) s,
                   pg_catalog.generate_series(0, pg_catalog.length(s.bytes) - 1) as x(i),
                   lateral (select pg_catalog.get_byte(s.bytes, x.i) as v) b)
    end
$$;
comment on function pgque._trigger_urlencode(text) is
    'CDC trigger helper: urlencodes a value as logutriga does (%xx lowercase, + for space).';

-- True when i_name occurs in i_list delimited by a comma, white space or an end of the
-- list (PgQ's matching of ignore= and key column names; no trimming, no quoting).
create or replace function pgque._trigger_list_has(i_list text, i_name text)
returns boolean language sql immutable strict as $$
    select pg_catalog.strpos(i_list, i_name) > 0
       and exists (
           select 1
             from (select e', \t\n\r\f' || pg_catalog.chr(11) as delims,
                          pg_catalog.length(i_name) as len) c,
                  pg_catalog.generate_series(1, pg_catalog.length(i_list) - c.len + 1) as p(pos)
            where pg_catalog.substr(i_list, p.pos, c.len) = i_name
              and (p.pos = 1
                   or pg_catalog.strpos(c.delims, pg_catalog.substr(i_list, p.pos - 1, 1)) > 0)
              and (p.pos + c.len > pg_catalog.length(i_list)
                   or pg_catalog.strpos(c.delims, pg_catalog.substr(i_list, p.pos + c.len, 1)) > 0))
$$;
comment on function pgque._trigger_list_has(text, text) is
    'CDC trigger helper: whether a name is in an ignore=/key list (comma or space delimited).';

-- The equality operator the triggers compare values of a type with, as SQL text
-- ('operator(schema.name)'), or NULL when the type has none (values are then compared
-- by their text output). Like PostgreSQL's type cache: the equality of the default
-- btree operator class, else of the default hash class; a domain compares as its base
-- type; an array or composite only when its elements / fields have an equality. As in
-- PgQ, array columns themselves are compared by their text (i_nested false), while
-- arrays inside composites are compared as values (i_nested true).
create or replace function pgque._trigger_eq_operator(i_type oid, i_nested boolean)
returns text language plpgsql stable strict as $$
declare
    v_base oid := i_type;
    v_type record;
    v_intypes oid[];
    v_found record;
begin
    -- Common built-in types whose default btree equality is pg_catalog.= (bool, bytea,
    -- "char", name, int8, int2, int4, text, oid, float4, float8, bpchar, varchar, date,
    -- time, timestamp, timestamptz, interval, timetz, numeric, uuid, jsonb).
    if i_type = any ('{16,17,18,19,20,21,23,25,26,700,701,1042,1043,1082,1083,1114,1184,'
                     '1186,1266,1700,2950,3802}'::oid[]) then
        return 'operator(pg_catalog.=)';
    end if;
    loop
        select t.typtype, t.typbasetype, t.typelem, t.typrelid,
               t.typsubscript = 'pg_catalog.array_subscript_handler'::pg_catalog.regproc
                   and t.typelem <> 0 as is_array
          into v_type
          from pg_catalog.pg_type t
         where t.oid = v_base;
        if not found then
            return null;
        end if;
        exit when v_type.typtype <> 'd';
        v_base := v_type.typbasetype;
    end loop;
    if v_type.is_array and not i_nested then
        return null;
    end if;

    -- The input types a default operator class usable for v_base may have: the type
    -- itself, the matching polymorphic type, or one it is binary coercible to.
    v_intypes := array[v_base, case
                           when v_type.is_array then 'pg_catalog.anyarray'::pg_catalog.regtype
                           when v_type.typtype = 'e' then 'pg_catalog.anyenum'::pg_catalog.regtype
                           when v_type.typtype = 'r' then 'pg_catalog.anyrange'::pg_catalog.regtype
                           when v_type.typtype = 'm'
                               then 'pg_catalog.anymultirange'::pg_catalog.regtype
                           when v_type.typtype = 'c' then 'pg_catalog.record'::pg_catalog.regtype
                       end]
                 || array(select c.casttarget
                            from pg_catalog.pg_cast c
                           where c.castsource = v_base
                             and c.castmethod = 'b'
                             and c.castcontext = 'i');
    select c.opcintype, n.nspname, op.oprname
      into v_found
      from pg_catalog.pg_opclass c
      join pg_catalog.pg_am m on m.oid = c.opcmethod
      join pg_catalog.pg_type it on it.oid = c.opcintype
      join pg_catalog.pg_amop o
        on o.amopfamily = c.opcfamily
       and o.amoplefttype = c.opcintype
       and o.amoprighttype = c.opcintype
       and o.amopstrategy = case m.amname when 'btree' then 3 else 1 end
      join pg_catalog.pg_operator op on op.oid = o.amopopr
      join pg_catalog.pg_namespace n on n.oid = op.oprnamespace
     where m.amname in ('btree', 'hash')
       and c.opcdefault
       and c.opcintype = any (v_intypes)
     order by m.amname = 'btree' desc, c.opcintype = v_base desc, it.typispreferred desc
     limit 1;
    if not found then
        return null;
    end if;

    -- array_eq and record_eq work only when the elements / fields have an equality.
    if v_found.opcintype = 'pg_catalog.anyarray'::pg_catalog.regtype
       and pgque._trigger_eq_operator(v_type.typelem, true) is null then
        return null;
    end if;
    if v_found.opcintype = 'pg_catalog.record'::pg_catalog.regtype
       and exists (select 1
                     from pg_catalog.pg_attribute a
                    where a.attrelid = v_type.typrelid
                      and a.attnum > 0
                      and not a.attisdropped
                      and pgque._trigger_eq_operator(a.atttypid, true) is null) then
        return null;
    end if;
    return pg_catalog.format('operator(%I.%s)', v_found.nspname, v_found.oprname);
end
$$;
comment on function pgque._trigger_eq_operator(oid, boolean) is
    'CDC trigger helper: the equality operator used to tell whether a column changed (NULL: none).';

-- Evaluates a trigger argument expression (ev_type=, when= ...) over a row, as the
-- select list of a query over the row's columns (by name); the first column is the
-- result. The function is STABLE, so the expression runs read-only. Returns the
-- result's text output and type; an empty expression gives NULL and type 0 (PgQ: a
-- query without columns). The expression is the trigger creator's own SQL and,
-- as in PgQ, it runs on the search_path of the session that fired the trigger
-- (i_search_path); pgque's own code around it keeps the pinned path.
create or replace function pgque._trigger_eval(
    i_expr text, i_row record, i_search_path text, out o_value text, out o_type oid)
language plpgsql
stable
set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_rows integer;
begin
    if pg_catalog.btrim(i_expr, e' \t\n\r\f') = '' then
        o_value := null;
        o_type := 0;
        return;
    end if;
    -- Everything but the expression is qualified: it runs on the caller's path.
    perform pg_catalog.set_config('search_path', i_search_path, true);
    execute pg_catalog.format(
        e'select pg_catalog.count(*)::pg_catalog.int4,'
        ' (pg_catalog.array_agg(pg_catalog.pg_typeof(_q._x)::pg_catalog.oid))[1],'
        ' (pg_catalog.array_agg(case when pg_catalog.num_nulls(_q._x) OPERATOR(pg_catalog.=) 0'
        ' then pg_catalog.format(''%%s'', _q._x) end))[1]'
        ' from (select %s\n from (select ($1).*) as _pgq_row) as _q(_x)',
        i_expr)
       into v_rows, o_type, o_value
      using i_row;
    perform pg_catalog.set_config('search_path', 'pgque, pg_catalog, pg_temp', true);
    if v_rows <> 1 then
        raise exception 'Expect 1 row from override query, got %', v_rows
            using detail = 'pgque:trigger_bad_expression';
    end if;
end
$$;
comment on function pgque._trigger_eval(text, record, text) is
    'CDC trigger helper: evaluates an ev_*=/when= trigger argument over a row (read-only).';

-- Encodes the columns of a row that are not omitted as a JSON object; i_values are
-- JSON values already.
create or replace function pgque._trigger_json_row(
    i_names text[], i_values text[], i_omit boolean[])
returns text language sql stable as $$
    select '{'
           || coalesce(pg_catalog.string_agg(
                          pg_catalog.to_json(i_names[i])::text || ':' || i_values[i],
                          ',' order by i), '')
           || '}'
      from pg_catalog.generate_subscripts(i_names, 1) as i
     where not i_omit[i]
$$;
comment on function pgque._trigger_json_row(text[], text[], boolean[]) is
    'CDC trigger helper: a row as a JSON object (jsontriga data).';

-- Encodes the columns of a row that are not omitted as urlencoded name=value pairs
-- (a NULL value: the name alone).
create or replace function pgque._trigger_urlencode_row(
    i_names text[], i_values text[], i_omit boolean[])
returns text language sql stable as $$
    select coalesce(pg_catalog.string_agg(
               pgque._trigger_urlencode(i_names[i])
               || coalesce('=' || pgque._trigger_urlencode(i_values[i]), ''),
               '&' order by i), '')
      from pg_catalog.generate_subscripts(i_names, 1) as i
     where not i_omit[i]
$$;
comment on function pgque._trigger_urlencode_row(text[], text[], boolean[]) is
    'CDC trigger helper: a row as urlencoded name=value pairs (logutriga data).';

-- The body shared by the three triggers. Returns true when a BEFORE trigger must
-- suppress the row change (SKIP). The checks come in PgQ's order, so the same invalid
-- setup raises the same error.
create or replace function pgque._trigger_event(
    i_format text, i_op text, i_when text, i_level text, i_relid oid,
    i_schema text, i_table text, i_args text[], i_new record, i_old record,
    i_search_path text)
returns boolean language plpgsql set search_path = pgque, pg_catalog, pg_temp as $$
declare
    c_fields constant text[] := array['ev_type', 'ev_data', 'ev_extra1', 'ev_extra2',
                                      'ev_extra3', 'ev_extra4'];
    c_magic constant text[] := array['_pgq_ev_type', '_pgq_ev_data', '_pgq_ev_extra1',
                                     '_pgq_ev_extra2', '_pgq_ev_extra3', '_pgq_ev_extra4'];
    -- what delimits the names in ignore= and key lists
    c_delims constant text := '[' || e', \t\n\r\f' || pg_catalog.chr(11) || ']';
    -- types whose text output tells whether two values are equal: bool, bytea, "char",
    -- name, int8, int2, int4, text, oid, varchar, date, time, timestamp, timestamptz, uuid
    c_text_decides constant oid[] :=
        '{16,17,18,19,20,21,23,25,26,1043,1082,1083,1114,1184,2950}';
    v_ev text[];  -- ev_type, ev_data, ev_extra1 .. ev_extra4
    -- arguments
    v_queue text;
    v_skip boolean := false;
    v_backup boolean := false;
    v_deny boolean := false;
    v_ignore text;
    v_pkey text;
    v_expr_kind text[] := '{}';  -- ev_type .. ev_extra4 or when, in argument order
    v_expr_sql text[] := '{}';
    v_arg text;
    v_kind text;
    -- the key list: as written (matched against column names, logutriga's ev_type),
    -- as names (jsontriga's pkey)
    v_keys text;
    v_key_names text[];
    v_key_words text[];     -- the key and ignore= lists split at the delimiters
    v_ignore_words text[];
    -- per column, in attnum order
    v_names text[];
    v_types oid[];
    v_is_magic boolean[];
    v_is_key boolean[];
    v_omit boolean[];  -- not in the data: ignored or _pgq_ev_* columns
    v_text_decides boolean[];
    v_new_vals text[];
    v_old_vals text[];
    v_changed boolean[];
    v_render_new text;
    v_render_old text;
    -- UPDATE: equality checks where the text does not decide
    v_need_cmp boolean;
    v_exact_text boolean;
    v_cmp text[] := '{}';
    v_cmp_cols integer[] := '{}';
    v_equal boolean[];
    v_eq text;
    v_i integer;
    -- sqltriga
    v_set text;
    v_where text;
    -- expressions
    v_value text;
    v_type oid;
    v_when text;
    v_when_type oid;
begin
    -- Changes made in 'local' replication role (a replication tool applying data) are
    -- not captured: no event and no checks.
    if pg_catalog.current_setting('session_replication_role') = 'local' then
        return false;
    end if;
    if i_level <> 'ROW' and i_op <> 'TRUNCATE' then
        raise exception 'pgq Ins/Upd/Del trigger must be fired FOR EACH ROW'
            using detail = 'pgque:trigger_bad_setup';
    end if;

    -- Arguments.
    if coalesce(pg_catalog.cardinality(i_args), 0) < 1 then
        raise exception 'pgq trigger must have destination queue as argument'
            using detail = 'pgque:trigger_bad_argument';
    end if;
    v_queue := i_args[pg_catalog.array_lower(i_args, 1)];
    foreach v_arg in array i_args[pg_catalog.array_lower(i_args, 1) + 1:] loop
        if v_arg = 'SKIP' then
            v_skip := true;
        elsif v_arg = 'backup' then
            v_backup := true;
        elsif v_arg = 'deny' then
            v_deny := true;
        elsif pg_catalog.starts_with(v_arg, 'ignore=') then
            v_ignore := pg_catalog.substr(v_arg, 8);
        elsif pg_catalog.starts_with(v_arg, 'pkey=') then
            v_pkey := pg_catalog.substr(v_arg, 6);
        elsif v_arg ~ '^(ev_type|ev_data|ev_extra[1-4]|when)=' then
            v_kind := pg_catalog.split_part(v_arg, '=', 1);
            if not v_kind = any (v_expr_kind) then  -- the first of a kind counts
                v_expr_kind := v_expr_kind || v_kind;
                v_expr_sql := v_expr_sql || pg_catalog.substr(v_arg, pg_catalog.length(v_kind) + 2);
            end if;
        else
            raise exception 'bad param to pgq trigger' using detail = 'pgque:trigger_bad_argument';
        end if;
    end loop;

    if i_op = 'TRUNCATE' then
        if pg_catalog.cardinality(v_expr_kind) > 0 then
            raise exception 'Custom expressions do not make sense for truncater trigger'
                using detail = 'pgque:trigger_bad_argument';
        elsif v_ignore is not null then
            raise exception 'Column ignore does not make sense for truncate trigger'
                using detail = 'pgque:trigger_bad_argument';
        elsif v_pkey is not null then
            raise exception 'Custom pkey_list does not make sense for truncate trigger'
                using detail = 'pgque:trigger_bad_argument';
        elsif v_backup then
            raise exception 'Backup does not make sense for truncate trigger'
                using detail = 'pgque:trigger_bad_argument';
        end if;
    end if;

    -- The key list: pkey= as written, else the primary key's columns (INCLUDE ones too)
    -- in index order, joined by commas.
    if v_pkey is not null then
        v_keys := v_pkey;
        v_key_names := pg_catalog.regexp_split_to_array(v_pkey, ',');
    else
        select coalesce(pg_catalog.string_agg(a.attname::text, ',' order by k.n), ''),
               coalesce(pg_catalog.array_agg(a.attname::text order by k.n), '{}')
          into v_keys, v_key_names
          from pg_catalog.pg_index i
         cross join lateral pg_catalog.unnest(i.indkey::pg_catalog.int2[])
               with ordinality as k(attnum, n)
          join pg_catalog.pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
         where i.indrelid = i_relid
           and i.indisprimary;
    end if;

    if i_op in ('UPDATE', 'DELETE') and v_keys = '' then
        raise exception 'Update/Delete on table without pkey'
            using detail = 'pgque:trigger_no_pkey';
    end if;
    if v_skip and i_when = 'AFTER' then
        raise exception 'SKIP does not work in AFTER trigger.'
            using detail = 'pgque:trigger_bad_argument';
    end if;
    if v_deny then
        raise exception 'Table ''%.%'' to queue ''%'': change not allowed (%)',
                        i_schema, i_table, v_queue, i_op
            using detail = 'pgque:trigger_denied';
    end if;

    v_ev := array[null, null, i_schema || '.' || i_table, null, null, null];
    v_key_words := pg_catalog.regexp_split_to_array(v_keys, c_delims || '+');
    v_ignore_words := pg_catalog.regexp_split_to_array(v_ignore, c_delims || '+');

    if i_op = 'TRUNCATE' then
        if i_format = 'json' then
            v_ev[1] := pg_catalog.format(
                '{"op":"TRUNCATE","table":[%s,%s],"pkey":[%s]}',
                pg_catalog.to_json(i_schema), pg_catalog.to_json(i_table),
                (select coalesce(pg_catalog.string_agg(pg_catalog.to_json(k)::text, ','), '')
                   from pg_catalog.unnest(v_key_names) as k));
            v_ev[2] := '{}';
        else
            v_ev[1] := 'R';
            v_ev[2] := '';
        end if;
        perform pgque.insert_event(v_queue, v_ev[1], v_ev[2], v_ev[3], v_ev[4], v_ev[5], v_ev[6]);
        return v_skip;
    end if;

    -- The table's columns, and SQL that renders each value of the new ($1) and the old
    -- ($2) row: its text output, or for jsontriga a JSON value (except for the _pgq_ev_*
    -- columns, which are field values). Of the old row of an UPDATE only what is needed
    -- is rendered. A name without delimiter characters is in a list exactly when it is
    -- one of the list's delimited words.
    v_need_cmp := i_op = 'UPDATE' and (i_format = 'sql' or v_ignore is not null);
    select coalesce(pg_catalog.array_agg(c.name order by c.attnum), '{}'),
           coalesce(pg_catalog.array_agg(c.typ order by c.attnum), '{}'),
           coalesce(pg_catalog.array_agg(c.magic order by c.attnum), '{}'),
           coalesce(pg_catalog.array_agg(c.is_key order by c.attnum), '{}'),
           coalesce(pg_catalog.array_agg(c.magic or c.ignored order by c.attnum), '{}'),
           coalesce(pg_catalog.array_agg(c.text_decides order by c.attnum), '{}'),
           coalesce(pg_catalog.string_agg(pg_catalog.format(r.render, r.new_ref), ', '
                                          order by c.attnum), ''),
           coalesce(pg_catalog.string_agg(case when i_op = 'DELETE' or v_backup or v_need_cmp
                                                    or c.is_key
                                               then pg_catalog.format(r.render, r.old_ref)
                                               else 'null' end, ', '
                                          order by c.attnum), '')
      into v_names, v_types, v_is_magic, v_is_key, v_omit, v_text_decides,
           v_render_new, v_render_old
      from (select a.attnum, a.attname::text as name, a.atttypid as typ,
                   a.attgenerated = 's' as generated,
                   a.attname::text = any (c_magic) as magic,
                   case when a.attname !~ c_delims then a.attname::text = any (v_key_words)
                        else pgque._trigger_list_has(v_keys, a.attname::text)
                   end as is_key,
                   case when v_ignore is null then false
                        when a.attname !~ c_delims then a.attname::text = any (v_ignore_words)
                        else pgque._trigger_list_has(v_ignore, a.attname::text)
                   end as ignored,
                   a.atttypid = any (c_text_decides)
                       and coalesce(co.collisdeterministic, true) as text_decides
              from pg_catalog.pg_attribute a
              left join pg_catalog.pg_collation co on co.oid = a.attcollation
             where a.attrelid = i_relid
               and a.attnum > 0
               and not a.attisdropped) c
     cross join lateral (
            select case
                       when i_format <> 'json' or c.magic then
                           'case when pg_catalog.num_nulls(%1$s) = 1 then null'
                           ' else pg_catalog.format(''%%s'', %1$s) end'
                       when c.typ in (20, 21, 23) then  -- int8, int2, int4: JSON numbers
                           'case when pg_catalog.num_nulls(%1$s) = 1 then ''null'''
                           ' else pg_catalog.format(''%%s'', %1$s) end'
                       when c.typ = 16 then  -- bool
                           'case %1$s when true then ''true'' when false then ''false'''
                           ' else ''null'' end'
                       when c.typ in (1082, 1114, 1184) then  -- date, timestamp(tz): ISO 8601
                           'coalesce(pg_catalog.to_json(%1$s)::text, ''null'')'
                       else
                           'case when pg_catalog.num_nulls(%1$s) = 1 then ''null'''
                           ' else pg_catalog.to_json(pg_catalog.format(''%%s'', %1$s))::text end'
                   end as render,
                   -- PL/pgSQL shows stored generated columns as NULL in a BEFORE trigger;
                   -- the row PgQ's C trigger sees on UPDATE still has the old values.
                   pg_catalog.format(case when c.generated and i_op = 'UPDATE' and i_when = 'BEFORE'
                                          then '($2).%I' else '($1).%I' end,
                                     c.name) as new_ref,
                   pg_catalog.format('($2).%I', c.name) as old_ref) r;

    execute pg_catalog.format('select array[%s]::text[], array[%s]::text[]',
                              case when i_op <> 'DELETE' then v_render_new else '' end,
                              case when i_op <> 'INSERT' then v_render_old else '' end)
       into v_new_vals, v_old_vals
      using i_new, i_old;

    if i_op = 'UPDATE' then
        -- Which columns changed: the key columns always, and all of them when updates
        -- of ignored columns only must be recognised. Equal renderings mean equal
        -- values; different ones mean a change unless the type's equality (that of its
        -- default btree or hash operator class) says otherwise, as for 1.0 and 1.00.
        -- With extra_float_digits below 1 float output is rounded, so equal text no
        -- longer means equal values.
        v_exact_text := pg_catalog.current_setting('extra_float_digits')::integer > 0;
        v_changed := array(select (v_need_cmp or v_is_key[i])
                                  and v_new_vals[i] is distinct from v_old_vals[i]
                             from pg_catalog.generate_subscripts(v_names, 1) as i
                            order by i);
        for v_i in 1 .. pg_catalog.cardinality(v_names) loop
            continue when not (v_need_cmp or v_is_key[v_i])
                          or (not v_changed[v_i] and v_exact_text)
                          or v_text_decides[v_i]
                          or v_new_vals[v_i] is null or v_old_vals[v_i] is null;
            v_eq := pgque._trigger_eq_operator(v_types[v_i], false);
            continue when v_eq is null;
            v_cmp_cols := v_cmp_cols || v_i;
            v_cmp := v_cmp || pg_catalog.format('($2).%1$I %2$s ($1).%1$I', v_names[v_i], v_eq);
        end loop;
        if pg_catalog.cardinality(v_cmp_cols) > 0 then
            execute pg_catalog.format('select array[%s]::boolean[]',
                                      pg_catalog.array_to_string(v_cmp, ', '))
               into v_equal
              using i_new, i_old;
            for v_i in 1 .. pg_catalog.cardinality(v_cmp_cols) loop
                v_changed[v_cmp_cols[v_i]] := not coalesce(v_equal[v_i], false);
            end loop;
        end if;

        if true = any (select v_changed[i] and v_is_key[i]
                         from pg_catalog.generate_subscripts(v_names, 1) as i) then
            raise exception 'primary key update not allowed'
                using detail = 'pgque:trigger_pkey_update';
        end if;
        -- An update of ignored (or _pgq_ev_*) columns only produces no event; one that
        -- changed nothing at all still does.
        if v_need_cmp
           and true = any (v_changed)
           and not true = any (select v_changed[i] and not v_omit[i]
                                 from pg_catalog.generate_subscripts(v_names, 1) as i) then
            return v_skip;
        end if;
    end if;

    -- ev_type, ev_data, and the old row for backup.
    if i_format = 'json' then
        v_ev[1] := pg_catalog.format(
            '{"op":%s,"table":[%s,%s],"pkey":[%s]}',
            pg_catalog.to_json(i_op), pg_catalog.to_json(i_schema), pg_catalog.to_json(i_table),
            (select coalesce(pg_catalog.string_agg(pg_catalog.to_json(k)::text, ','), '')
               from pg_catalog.unnest(v_key_names) as k));
        v_ev[2] := pgque._trigger_json_row(
            v_names, case when i_op = 'DELETE' then v_old_vals else v_new_vals end, v_omit);
        if v_backup and i_op = 'UPDATE' then
            v_ev[4] := pgque._trigger_json_row(v_names, v_old_vals, v_omit);
        end if;
    elsif i_format = 'logu' then
        v_ev[1] := pg_catalog.left(i_op, 1) || ':' || v_keys;
        v_ev[2] := pgque._trigger_urlencode_row(
            v_names, case when i_op = 'DELETE' then v_old_vals else v_new_vals end, v_omit);
        if v_backup and i_op = 'UPDATE' then
            v_ev[4] := pgque._trigger_urlencode_row(v_names, v_old_vals, v_omit);
        end if;
    else
        v_ev[1] := pg_catalog.left(i_op, 1);
        if i_op = 'INSERT' then
            v_ev[2] := (
                select pg_catalog.format(
                           '(%s) values (%s)',
                           coalesce(pg_catalog.string_agg(pg_catalog.quote_ident(v_names[i]), ','
                                                          order by i), ''),
                           coalesce(pg_catalog.string_agg(
                                        coalesce(pg_catalog.quote_literal(v_new_vals[i]), 'null'),
                                        ',' order by i), ''))
                  from pg_catalog.generate_subscripts(v_names, 1) as i
                 where not v_omit[i]);
        else
            -- The old row's key, in column order; a NULL key value is an error.
            if not true = any (v_is_key)
               or exists (select 1
                            from pg_catalog.generate_subscripts(v_names, 1) as i
                           where v_is_key[i] and v_old_vals[i] is null) then
                raise exception 'logtriga: Unexpected NULL key value'
                    using detail = 'pgque:trigger_null_key';
            end if;
            select pg_catalog.string_agg(pg_catalog.quote_ident(v_names[i]) || '='
                                         || pg_catalog.quote_literal(v_old_vals[i]),
                                         ' and ' order by i)
              into v_where
              from pg_catalog.generate_subscripts(v_names, 1) as i
             where v_is_key[i];
            if i_op = 'DELETE' then
                v_ev[2] := v_where;
            else
                select pg_catalog.string_agg(pg_catalog.quote_ident(v_names[i]) || '='
                                             || pg_catalog.quote_nullable(v_new_vals[i]),
                                             ',' order by i)
                  into v_set
                  from pg_catalog.generate_subscripts(v_names, 1) as i
                 where v_changed[i] and not v_omit[i];
                if v_set is null then  -- nothing changed: set the first key column to itself
                    select pg_catalog.quote_ident(v_names[i]) || '='
                           || pg_catalog.quote_nullable(v_old_vals[i])
                      into v_set
                      from pg_catalog.generate_subscripts(v_names, 1) as i
                     where v_is_key[i]
                     order by i
                     limit 1;
                end if;
                v_ev[2] := v_set || ' where ' || v_where;
            end if;
        end if;
        if v_backup and i_op = 'UPDATE' then  -- urlencoded, as PgQ's sqltriga does
            v_ev[4] := pgque._trigger_urlencode_row(v_names, v_old_vals, v_omit);
        end if;
    end if;

    -- Overrides: the _pgq_ev_* columns, then the expression arguments in argument order.
    for v_i in 1 .. pg_catalog.cardinality(v_names) loop
        if v_is_magic[v_i] then
            v_ev[pg_catalog.array_position(c_magic, v_names[v_i])] :=
                case when i_op = 'DELETE' then v_old_vals[v_i] else v_new_vals[v_i] end;
        end if;
    end loop;
    for v_i in 1 .. pg_catalog.cardinality(v_expr_kind) loop
        select e.o_value, e.o_type
          into v_value, v_type
          from pgque._trigger_eval(v_expr_sql[v_i],
                                   case when i_op = 'DELETE' then i_old else i_new end,
                                   i_search_path) as e;
        if v_expr_kind[v_i] = 'when' then
            v_when := v_value;
            v_when_type := v_type;
        else
            v_ev[pg_catalog.array_position(c_fields, v_expr_kind[v_i])] := v_value;
        end if;
    end loop;
    if v_when_type is not null then
        if v_when_type <> 'pg_catalog.bool'::pg_catalog.regtype then
            raise exception 'when= query result must be boolean, got=%', v_when_type
                using detail = 'pgque:trigger_bad_expression';
        elsif v_when is null then
            raise exception 'when= should not be NULL'
                using detail = 'pgque:trigger_bad_expression';
        elsif not v_when::boolean then
            return v_skip;
        end if;
    end if;

    perform pgque.insert_event(v_queue, v_ev[1], v_ev[2], v_ev[3], v_ev[4], v_ev[5], v_ev[6]);
    return v_skip;
end
$$;
comment on function pgque._trigger_event(
    text, text, text, text, oid, text, text, text[], record, record, text) is
    'CDC trigger helper: the body of jsontriga, logutriga and sqltriga; true means SKIP the row.';

create or replace function pgque.jsontriga()
returns trigger language plpgsql security invoker as $$
begin
    if pgque._trigger_event('json', tg_op, tg_when, tg_level, tg_relid, tg_table_schema,
                            tg_table_name, tg_argv, new, old,
                            pg_catalog.current_setting('search_path')) then
        return null;
    elsif tg_op OPERATOR(pg_catalog.=) 'DELETE' then
        return old;
    end if;
    return new;
end
$$;
comment on function pgque.jsontriga() is
    'Trigger: queues every row change (and TRUNCATE) as a JSON event. Arguments: queue name, '
    'then SKIP, backup, deny, ignore=cols, pkey=cols, and ev_type=, ev_data=, ev_extra1..4=, '
    'when= expressions.';

create or replace function pgque.logutriga()
returns trigger language plpgsql security invoker as $$
begin
    if pgque._trigger_event('logu', tg_op, tg_when, tg_level, tg_relid, tg_table_schema,
                            tg_table_name, tg_argv, new, old,
                            pg_catalog.current_setting('search_path')) then
        return null;
    elsif tg_op OPERATOR(pg_catalog.=) 'DELETE' then
        return old;
    end if;
    return new;
end
$$;
comment on function pgque.logutriga() is
    'Trigger: queues every row change (and TRUNCATE) as an urlencoded event (type I:/U:/D: + key). '
    'Arguments as for jsontriga.';

create or replace function pgque.sqltriga()
returns trigger language plpgsql security invoker as $$
begin
    if pgque._trigger_event('sql', tg_op, tg_when, tg_level, tg_relid, tg_table_schema,
                            tg_table_name, tg_argv, new, old,
                            pg_catalog.current_setting('search_path')) then
        return null;
    elsif tg_op OPERATOR(pg_catalog.=) 'DELETE' then
        return old;
    end if;
    return new;
end
$$;
comment on function pgque.sqltriga() is
    'Trigger: queues every row change (and TRUNCATE) as a SQL fragment event (type I/U/D). '
    'Arguments as for jsontriga.';
