-- Types of the modern API.

-- One message as receive() returns it and nack() takes it.
do $types$
begin
    if pg_catalog.to_regtype('pgque.message') is null then
        create type pgque.message as (
            msg_id       bigint,       -- ev_id
            batch_id     bigint,       -- the batch to ack
            type         text,         -- ev_type
            payload      text,         -- ev_data
            retry_count  integer,      -- NULL on first delivery, then 1, 2, ...
            created_at   timestamptz,  -- ev_time: start of the sending transaction
            extra1       text,
            extra2       text,
            extra3       text,
            extra4       text
        );
    end if;
end
$types$;
comment on type pgque.message is
    'A message as receive() returns it: event id, batch id, type, payload, retry count, time and extras.';
