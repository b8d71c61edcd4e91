-- pgque uninstall: drops schema pgque and everything in it (queues, events,
-- consumers, functions), in one transaction.
--
-- The roles pgque_reader, pgque_writer and pgque_admin are cluster-wide and
-- may be used by other databases of the cluster, so they stay.
--
-- Later: unschedule pgque's pg_cron jobs (cron.unschedule) before the drop,
-- or they keep calling functions that no longer exist.
begin;
set local client_min_messages = warning;
-- The install lock (0x70677175, 'pgqu'): never interleave with an install.
select pg_advisory_xact_lock(1885827445);
drop schema if exists pgque cascade;
commit;
