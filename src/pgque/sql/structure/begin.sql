-- Everything runs in one transaction, serialized per database, so two
-- installers never interleave and a failed install changes nothing.
--
-- The install serializes on a row of pgque.mutex, locked FOR UPDATE: only
-- the installing role (the owner) may lock those rows, so no other login can
-- hold the install up, as it could a well-known advisory lock key
-- (docs/development.md, "Coordination"). The first install of a database has
-- no row to lock yet: two of them meet at CREATE SCHEMA, where the second
-- waits for the first to commit and then finds the schema there.
begin;
set local client_min_messages = warning;
do $lock$
begin
    begin
        create schema pgque;
    exception when duplicate_schema or unique_violation then
        null;  -- installed already, or by the install we just waited for
    end;
    begin
        create table pgque.mutex (
            mutex_name text primary key
        );
    exception when duplicate_table or unique_violation then
        null;
    end;
    insert into pgque.mutex (mutex_name) values ('install'), ('queues')
        on conflict (mutex_name) do nothing;
    perform 1 from pgque.mutex where mutex_name = 'install' for update;
    -- Queue DDL (create_queue, drop_queue) rewrites the routers the install
    -- rewrites too: both take this row first, so they never deadlock.
    perform 1 from pgque.mutex where mutex_name = 'queues' for update;
end
$lock$;
