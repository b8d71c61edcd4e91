-- Routines an earlier version had and this one does not: dropped, so that a
-- removed function or overload does not outlive the upgrade.
--
-- The list of this build's routines is the install itself: every routine of
-- the manifest is written with CREATE OR REPLACE in this transaction, which
-- writes a new pg_proc row even for an unchanged definition. A pgque routine
-- whose row is older than this transaction (age(xmin) > 0) is therefore not
-- part of this build. Never dropped: a routine something else depends on (a
-- user's trigger on a CDC trigger function, a view, a default), since that
-- would need CASCADE; and nothing outside schema pgque. Runs after every
-- function file and before grants.sql.
do $stale$
declare
    v_stale text;
begin
    select pg_catalog.string_agg(p.oid::pg_catalog.regprocedure::text, ', ' order by p.oid)
      into v_stale
      from pg_catalog.pg_proc p
     where p.pronamespace = 'pgque'::pg_catalog.regnamespace
       and pg_catalog.age(p.xmin) > 0
       and not exists (
           select 1 from pg_catalog.pg_depend d
            where d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass
              and d.refobjid = p.oid and d.deptype in ('n', 'a'));
    if v_stale is not null then
        execute 'drop routine ' || v_stale;  -- one statement for them all
    end if;
end
$stale$;
