-- pgque install manifest.
--
-- `psql -f src/pgque/sql/install.sql` installs straight from the source tree;
-- tools/build_sql.py inlines every `\ir` below, in this order, into pgque.sql,
-- the single file the Python installer and `psql -f pgque.sql` run.
-- This manifest is the only place that decides the order.
\ir structure/begin.sql
\ir structure/roles.sql
\ir structure/schema.sql
\ir structure/tables.sql
\ir structure/upgrade.sql
\ir structure/types.sql
\ir structure/views.sql
\ir functions/util.sql
\ir functions/queue_admin.sql
\ir functions/wakeup.sql
\ir functions/insert_router.sql
\ir functions/send.sql
\ir functions/ticker.sql
\ir functions/consumer.sql
\ir functions/batch.sql
\ir functions/batch_reader.sql
\ir functions/retry.sql
\ir functions/maint.sql
\ir functions/info.sql
\ir functions/delayed.sql
\ir functions/receive.sql
\ir functions/dlq.sql
\ir functions/browse.sql
\ir functions/coop.sql
\ir functions/idem.sql
\ir functions/partition.sql
\ir functions/schedule.sql
\ir functions/lifecycle.sql
\ir functions/observability.sql
\ir functions/test_helpers.sql
\ir functions/spark.sql
\ir functions/triggers.sql
\ir structure/stale_routines.sql
\ir structure/grants.sql
\ir structure/commit.sql
