-- One schema holds every pgque object. Nothing else in the database is
-- touched, so pgque coexists with PgQ (schema pgq) and with applications.
create schema if not exists pgque;
comment on schema pgque is
    'pgque: PgQ''s queue design (snapshot batches, ticks, rotated event tables) in plain SQL';
