-- Everything runs in one transaction, serialized per database by an
-- advisory lock, so two installers never interleave and a failed install
-- changes nothing.
begin;
set local client_min_messages = warning;
-- 1885827445 = 0x70677175, 'pgqu' in ASCII: the install lock of this database.
do $lock$ begin perform pg_catalog.pg_advisory_xact_lock(1885827445); end $lock$;
