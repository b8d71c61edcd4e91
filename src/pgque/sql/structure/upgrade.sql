-- In-place upgrades. The install file runs over any earlier pgque: tables
-- are created only when missing (tables.sql), and upgrade_schema() brings
-- existing ones up to date, so every queue, event, position and setting
-- survives. Each fix checks the catalog first, so running it again changes
-- nothing.

create or replace function pgque.upgrade_schema()
returns integer
language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$
declare
    v_fixes integer := 0;
    v_fix record;
begin
    -- Columns added after the first release: (table, column, definition).
    for v_fix in
        select * from (values
            ('queue', 'queue_max_retries', 'integer'),
            ('queue', 'queue_extra_maint', 'text[]'),
            ('queue', 'queue_event_ttl', 'interval'),
            ('subscription', 'sub_role',
             'text not null default ''normal'''
             || ' check (sub_role in (''normal'', ''coop_main'', ''coop_member''))'),
            ('config', 'scheduler', 'text check (scheduler in (''pg_cron'', ''pg_timetable''))'),
            ('config', 'tick_period_ms',
             'integer not null default 100'
             || ' check (tick_period_ms between 1 and 1000 and 1000 % tick_period_ms = 0)')
        ) as f(table_name, column_name, definition)
    loop
        if not exists (
            select 1 from pg_catalog.pg_attribute
             where attrelid = ('pgque.' || v_fix.table_name)::regclass
               and attname = v_fix.column_name and not attisdropped)
        then
            execute pg_catalog.format('alter table pgque.%I add column %I %s',
                           v_fix.table_name, v_fix.column_name, v_fix.definition);
            v_fixes := v_fixes + 1;
        end if;
    end loop;

    -- The names of a queue's objects follow from its id, so no stored name
    -- can point a definer function at another object (a queue row that
    -- breaks this was changed by hand: the install stops on it).
    if not exists (
        select 1 from pg_catalog.pg_constraint
         where conrelid = 'pgque.queue'::regclass and conname = 'queue_objects_follow_id')
    then
        alter table pgque.queue add constraint queue_objects_follow_id check (
            queue_data_pfx = 'pgque.event_' || queue_id::text
            and queue_event_seq = queue_data_pfx || '_id_seq'
            and queue_tick_seq = queue_data_pfx || '_tick_seq');
        v_fixes := v_fixes + 1;
    end if;

    -- Idempotency keys are stored as their digest only now (idem.sql;
    -- _idem_stored_key inlined: it may not exist yet), so that claims made
    -- under an earlier version keep matching. Earlier versions stored a key
    -- as given unless it was over 512 bytes or started with the digests'
    -- prefix: a row not of a digest's exact form is a key as given.
    update pgque.idem
       set idem_key = pg_catalog.chr(1) || 'sha256:' || pg_catalog.encode(
               pg_catalog.sha256(pg_catalog.convert_to(idem_key, 'UTF8')), 'hex')
     where idem_key !~ ('^' || pg_catalog.chr(1) || 'sha256:[0-9a-f]{64}$');
    if found then
        v_fixes := v_fixes + 1;
    end if;

    -- Routines whose result type changed, which CREATE OR REPLACE cannot
    -- change: dropped here (nothing depends on them), written again by the
    -- function files. _refuse_slot_batch returned void before it said
    -- whether the batch is open.
    if exists (
        select 1 from pg_catalog.pg_proc
         where oid = pg_catalog.to_regprocedure('pgque._refuse_slot_batch(bigint, text)')
           and prorettype = 'pg_catalog.void'::pg_catalog.regtype)
    then
        drop function pgque._refuse_slot_batch(bigint, text);
        v_fixes := v_fixes + 1;
    end if;

    -- PgQ lets a consumer be registered before its first tick.
    if exists (
        select 1 from pg_catalog.pg_attribute
         where attrelid = 'pgque.subscription'::regclass
           and attname = 'sub_last_tick' and attnotnull)
    then
        alter table pgque.subscription alter column sub_last_tick drop not null;
        v_fixes := v_fixes + 1;
    end if;
    return v_fixes;
end
$$;
comment on function pgque.upgrade_schema() is
    'Brings tables of an earlier pgque install up to date; idempotent. Returns the number of fixes applied.';

do $upgrade$ begin perform pgque.upgrade_schema(); end $upgrade$;

