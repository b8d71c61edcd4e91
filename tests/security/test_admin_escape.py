"""pgque_admin stays below the owner: each attack of the hardening review, replayed.

The admin runs each attack as a login role granted only pgque_admin, on an
install owned by a superuser; then the owner does what it normally does
(receive, maint(), drop_queue) and the test asserts that nothing of the
owner's leaked: no superuser, no file content, no object outside pgque
changed.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from hostile import is_superuser

from _engine import make_queue, one, tick

DENIED = psycopg.errors.InsufficientPrivilege


@pytest.fixture
def queue(conn: psycopg.Connection[Any]) -> str:
    make_queue(conn, "jobs")
    one(conn, "select pgque.subscribe('jobs', 'worker')")
    one(conn, "select pgque.send('jobs', 'x')")
    tick(conn, "jobs")
    return "jobs"


def test_admin_cannot_put_a_trigger_on_a_pgque_table(
    conn: psycopg.Connection[Any], login_as: Any, logins: dict[str, str], queue: str
) -> None:
    admin = login_as("admin")
    admin.execute(
        "create function pg_temp.own() returns trigger language plpgsql as"
        f" $$ begin execute 'alter role {logins['admin']} superuser'; return new; end $$"
    )
    with pytest.raises(DENIED):
        admin.execute(
            "create trigger own before update on pgque.subscription"
            " for each row execute function pg_temp.own()"
        )
    # The owner's next receive runs no code of the admin's.
    one(conn, "select count(*) from pgque.receive('jobs', 'worker', 10)")
    assert not is_superuser(conn, logins["admin"])


@pytest.mark.parametrize(
    "statement",
    [
        "update pgque.queue set queue_extra_maint = '{pg_catalog.pg_read_file}'",
        "update pgque.queue set queue_data_pfx = 'public.victim'",
        "update pgque.queue set queue_event_seq = 'public.app_seq'",
        "insert into pgque.consumer (co_name) values ('intruder')",
        "delete from pgque.tick",
        "truncate pgque.subscription",
        "select pg_catalog.setval('pgque.batch_id_seq', 1000000)",
    ],
)
def test_admin_cannot_write_bookkeeping_directly(login_as: Any, queue: str, statement: str) -> None:
    with pytest.raises(DENIED):
        login_as("admin").execute(statement)


def test_admin_cannot_reference_pgque_tables(
    conn: psycopg.Connection[Any], login_as: Any, logins: dict[str, str]
) -> None:
    # A foreign key would let the admin block deletes (and run its own
    # checks) on pgque's tables.
    admin_role = logins["admin"]
    conn.execute(f'create schema own authorization "{admin_role}"')
    with pytest.raises(DENIED):
        login_as("admin").execute("create table own.pin (q int references pgque.queue (queue_id))")


def test_extra_maint_takes_only_allowed_functions(
    conn: psycopg.Connection[Any], login_as: Any, queue: str
) -> None:
    admin = login_as("admin")
    with pytest.raises(psycopg.errors.RaiseException, match="pg_read_file is not pgque's own"):
        admin.execute(
            "select pgque.set_queue_config('jobs', 'extra_maint', '{pg_catalog.pg_read_file}')"
        )
    # pgque's own maintenance functions are fine.
    assert one(admin, "select pgque.set_queue_config('jobs', 'extra_maint', '{pgque.maint_idem}')")
    assert one(conn, "select queue_extra_maint from pgque.queue where queue_name = 'jobs'") == [
        "pgque.maint_idem"
    ]


def test_maint_runs_no_function_outside_the_allow_list(
    conn: psycopg.Connection[Any], queue: str
) -> None:
    # Even a row changed behind pgque's back (here by the superuser, as a bug
    # or an old install might have left it) runs nothing unlisted: the queue
    # name would have been the file to read.
    one(conn, "select pgque.create_queue('/etc/passwd')")
    conn.execute(
        "update pgque.queue set queue_extra_maint = '{pg_catalog.pg_read_file}'"
        " where queue_name = '/etc/passwd'"
    )
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    one(conn, "select pgque.maint()")
    assert any("skipping pg_catalog.pg_read_file for queue /etc/passwd" in n for n in notices)
    assert not any("root:" in n for n in notices)
    operations = conn.execute("select func_name from pgque.maint_operations()").fetchall()
    assert ("pg_catalog.pg_read_file",) not in operations


def test_only_the_owner_registers_maintenance_functions(
    conn: psycopg.Connection[Any], login_as: Any, queue: str
) -> None:
    conn.execute(
        "create function public.app_maint(q text) returns integer language sql as $$ select 7 $$"
    )
    with pytest.raises(DENIED):
        login_as("admin").execute("select pgque.register_maint_function('public.app_maint(text)')")
    assert one(conn, "select pgque.register_maint_function('public.app_maint(text)')") == 1
    admin = login_as("admin")
    assert one(admin, "select pgque.set_queue_config('jobs', 'extra_maint', '{public.app_maint}')")
    assert one(conn, "select pgque.maint()") >= 7
    # Withdrawn: maint() skips it from then on, with a warning.
    assert one(conn, "select pgque.unregister_maint_function('public.app_maint(text)')") == 1
    assert one(conn, "select pgque.maint()") < 7


def test_stored_object_names_cannot_point_outside_pgque(
    conn: psycopg.Connection[Any], queue: str
) -> None:
    # Not even the owner can store such a name: a CHECK ties them to the id.
    conn.execute("create table public.victim (x int)")
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("update pgque.queue set queue_data_pfx = 'public.victim'")
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("update pgque.queue set queue_event_seq = 'public.app_seq'")
    one(conn, "select pgque.drop_queue('jobs', true)")
    assert one(conn, "select pg_catalog.to_regclass('public.victim') is not null")


def test_seq_functions_act_with_the_callers_rights(
    conn: psycopg.Connection[Any], login_as: Any, queue: str
) -> None:
    conn.execute("create sequence public.app_seq")
    conn.execute("create table public.secrets (last_value text)")
    conn.execute("insert into public.secrets values ('the-secret')")
    admin = login_as("admin")
    with pytest.raises(DENIED):
        admin.execute("select pgque.seq_setval('public.app_seq', 9223372036854775000)")
    assert one(conn, "select last_value from public.app_seq") == 1
    with pytest.raises(DENIED) as denied:
        admin.execute("select pgque.seq_getval('public.secrets')")
    assert "the-secret" not in str(denied.value)
    # The owner's own uses (the gauges read the queue's event sequence) work.
    assert one(conn, "select ev_new from pgque.get_queue_info('jobs')") >= 0


def test_a_queue_object_is_proven_before_it_is_dropped(
    conn: psycopg.Connection[Any], queue: str
) -> None:
    # A look-alike object in pgque's schema that is not the queue's own (here
    # a sequence where the queue's tick sequence should be) is refused.
    queue_id = one(conn, "select queue_id from pgque.queue where queue_name = 'jobs'")
    conn.execute(f"drop sequence pgque.event_{queue_id}_tick_seq")
    conn.execute(f"create table pgque.event_{queue_id}_tick_seq (x int)")
    with pytest.raises(psycopg.errors.RaiseException, match="corruption"):
        conn.execute("select pgque.drop_queue('jobs', true)")
    assert one(conn, f"select to_regclass('pgque.event_{queue_id}_tick_seq') is not null")
