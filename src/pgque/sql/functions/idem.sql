-- Idempotent send: at most one event per (queue, idem_key) while the key lives.
--
-- The key is claimed through the primary key of pgque.idem with an upsert:
-- a concurrent send of the same key waits for the first transaction, then
-- either sees its event (deduped) or, if it rolled back, claims the key
-- itself. No advisory lock; the claim lives and dies with its transaction.
--
-- Any string is a key. pgque.idem keeps only its digest, chr(1) || 'sha256:'
-- || its SHA-256 in hex (PostgreSQL's own sha256(), no extension), and the
-- event carries no key (ev_extra2 is NULL): keys can carry business
-- identifiers, every reader reads every event, and deduplication needs the
-- digest alone. Earlier versions kept keys of up to 512 bytes as given, and
-- in ev_extra2; upgrade_schema() replaces the stored ones by their digests,
-- so their claims keep matching (the events they sent keep their ev_extra2
-- until rotation drops them).

-- Internal: how a key is stored in pgque.idem (see above).
create or replace function pgque._idem_stored_key(i_key text)
returns text language sql immutable parallel safe as $$
    select pg_catalog.chr(1) || 'sha256:' || pg_catalog.encode(
               pg_catalog.sha256(pg_catalog.convert_to(i_key, 'UTF8')), 'hex')
$$;

create or replace function pgque.send_idem(
    i_queue text, i_type text, i_payload text, i_idem_key text,
    i_ttl interval default '1 hour', i_partition_key text default null)
returns table (event_id bigint, deduped boolean) language plpgsql
security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    q record;
    v_id bigint;
    v_claimed bigint;
    v_key text;
begin
    if i_idem_key is null then
        raise exception 'idem_key must not be null' using detail = 'pgque:invalid_argument';
    end if;
    -- The bound keeps expires_at far inside timestamptz's range.
    if i_ttl is null or i_ttl <= interval '0' or i_ttl > interval '100 years' then
        raise exception 'ttl must be a positive interval of at most 100 years, got % (queue %)',
            coalesce(i_ttl::text, 'NULL'), coalesce(i_queue, '<NULL>')
            using detail = 'pgque:invalid_argument';
    end if;
    select queue_id, queue_extra_maint into q
      from pgque.queue where queue_name = i_queue;
    if not found then
        raise exception 'queue not found: %', i_queue using detail = 'pgque:queue_not_found';
    end if;
    v_key := pgque._idem_stored_key(i_idem_key);
    -- First use: maint() reaps this queue's expired keys from now on.
    if not 'pgque.maint_idem' = any (coalesce(q.queue_extra_maint, '{}')) then
        update pgque.queue
           set queue_extra_maint = pg_catalog.array_append(
                   coalesce(queue_extra_maint, '{}'), 'pgque.maint_idem')
         where queue_id = q.queue_id
           and not 'pgque.maint_idem' = any (coalesce(queue_extra_maint, '{}'));
    end if;

    v_id := pg_catalog.nextval(pgque._queue_sequence(q.queue_id, 'id'));
    insert into pgque.idem as i (queue_id, idem_key, event_id, expires_at)
    values (q.queue_id, v_key, v_id, pg_catalog.now() + i_ttl)
    on conflict (queue_id, idem_key) do update
       set event_id = excluded.event_id, expires_at = excluded.expires_at
     where i.expires_at <= pg_catalog.now()
    returning i.event_id into v_claimed;

    if v_claimed is null then
        -- A live claim exists: the send it made is the answer.
        select i.event_id into event_id from pgque.idem i
         where i.queue_id = q.queue_id and i.idem_key = v_key;
        deduped := true;
        return next;
        return;
    end if;
    event_id := pgque._insert_event(i_queue, v_id, pg_catalog.now(), null, null, i_type, i_payload,
                                    i_partition_key, null, null, null);
    deduped := false;
    return next;
end
$$;
comment on function pgque.send_idem(text, text, text, text, interval, text) is
    'Sends a verbatim text message once per idempotency key within i_ttl (only the key''s digest is kept; partition key in ev_extra1). Returns (event_id, deduped).';

create or replace function pgque.send_idem(
    i_queue text, i_type text, i_payload jsonb, i_idem_key text,
    i_ttl interval default '1 hour', i_partition_key text default null)
returns table (event_id bigint, deduped boolean) language sql
security definer set search_path = pgque, pg_catalog, pg_temp
as $$ select * from pgque.send_idem(i_queue, i_type, i_payload::text, i_idem_key, i_ttl, i_partition_key) $$;
comment on function pgque.send_idem(text, text, jsonb, text, interval, text) is
    'Sends a JSON message once per idempotency key within i_ttl. Returns (event_id, deduped).';

create or replace function pgque.maint_idem(i_queue_name text)
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp as $$
declare
    v_deleted integer;
begin
    -- At most 10 000 keys a call; 1 means "call again".
    delete from pgque.idem
     where ctid = any (array(
         select i.ctid from pgque.idem i join pgque.queue q on q.queue_id = i.queue_id
          where (i_queue_name is null or q.queue_name = i_queue_name)
            and i.expires_at <= pg_catalog.now()
          limit 10000
            for update of i skip locked));
    get diagnostics v_deleted = row_count;
    return case when v_deleted >= 10000 then 1 else 0 end;
end
$$;
comment on function pgque.maint_idem(text) is
    'Deletes up to 10 000 expired idempotency keys of the queue (NULL: all queues). Returns 1 while more may remain, else 0.';

create or replace function pgque.maint_idem()
returns integer language plpgsql security definer set search_path = pgque, pg_catalog, pg_temp
as $$ begin return pgque.maint_idem(null); end $$;
comment on function pgque.maint_idem() is
    'maint_idem for every queue.';
