-- pgque uninstall: removes pgque's scheduler jobs, then drops schema pgque
-- and everything in it (queues, events, consumers, functions), in one
-- transaction.
--
-- The jobs go first: left behind, pg_cron or pg_timetable would keep
-- calling functions that no longer exist. If pgque.stop() fails (an
-- untrusted pg_timetable schema, missing rights on pg_cron's jobs), the
-- whole script fails and nothing is dropped.
--
-- The roles pgque_reader, pgque_writer and pgque_admin are cluster-wide and
-- may be used by other databases of the cluster, so they stay.
begin;
set local client_min_messages = warning;
-- The install's row of pgque.mutex: never interleave with an install.
do $lock$
begin
    if pg_catalog.to_regclass('pgque.mutex') is not null then
        perform 1 from pgque.mutex where mutex_name = 'install' for update;
    end if;
end
$lock$;
do $stop$
begin
    if pg_catalog.to_regprocedure('pgque.stop()') is not null then
        perform pgque.stop();
    end if;
end
$stop$;
drop schema if exists pgque cascade;
commit;
