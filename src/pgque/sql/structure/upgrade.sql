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
            execute format('alter table pgque.%I add column %I %s',
                           v_fix.table_name, v_fix.column_name, v_fix.definition);
            v_fixes := v_fixes + 1;
        end if;
    end loop;

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
