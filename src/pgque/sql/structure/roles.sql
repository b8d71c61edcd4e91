-- The three NOLOGIN roles pgque grants to. Roles are cluster-wide, so two
-- databases of one cluster may install at the same moment: the advisory
-- lock of begin.sql is per database and does not serialize them, and the
-- loser of a concurrent CREATE ROLE sees duplicate_object or, while the
-- winner's transaction is still open, unique_violation. Either means the
-- role exists, which is all we need.
do $roles$
declare
    v_role text;
begin
    foreach v_role in array array['pgque_reader', 'pgque_writer', 'pgque_admin'] loop
        if not exists (select 1 from pg_catalog.pg_roles where rolname = v_role) then
            begin
                execute pg_catalog.format('create role %I nologin', v_role);
            exception when duplicate_object or unique_violation then
                null;
            end;
        end if;
    end loop;

    -- pgque_admin may do everything a reader or a writer may.
    foreach v_role in array array['pgque_reader', 'pgque_writer'] loop
        if not pg_catalog.pg_has_role('pgque_admin', v_role, 'member') then
            begin
                execute pg_catalog.format('grant %I to pgque_admin', v_role);
            exception when duplicate_object or unique_violation then
                null;
            end;
        end if;
    end loop;
end
$roles$;
