-- The PostgreSQL schema of querator schema version 1, frozen from git tag schema-v1
-- (commit 112306a, querator/queue/backends/postgres/statements.py CREATE_SCHEMA).
-- Never edit: tests build a version 1 store from it and migrate it forward.
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {queues} (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text COLLATE "C" NOT NULL UNIQUE,
    lease_timeout double precision NOT NULL,
    expire_timeout double precision NOT NULL,
    max_attempts integer NOT NULL,
    dead_queue text COLLATE "C",
    reference text NOT NULL,
    partitions integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS queues_dead_queue ON {queues} (dead_queue)
    WHERE dead_queue IS NOT NULL;
CREATE TABLE IF NOT EXISTS {maintenance} (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    last_run timestamptz NOT NULL
);
INSERT INTO {maintenance} (id, last_run) VALUES (true, '-infinity')
    ON CONFLICT (id) DO NOTHING;
CREATE OR REPLACE FUNCTION {schema}.check_failed() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'querator: a checked change found a failed check'
        USING ERRCODE = 'QR409';
END
$$;
CREATE OR REPLACE FUNCTION {schema}.lookup_keys(tables regclass[], keys text[], after bigint)
RETURNS TABLE (part integer, seq bigint, version integer, available_at timestamptz,
               lease_deadline timestamptz, client_id text, attempts integer,
               expire_at timestamptz, payload bytea, kind text, encoding text, reference text,
               headers text, dedup_key text, source_id text, created_at timestamptz)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    FOR n IN 1 .. coalesce(array_length(tables, 1), 0) LOOP
        RETURN QUERY EXECUTE format(
            'SELECT $2, t.seq, t.version, t.available_at, t.lease_deadline, t.client_id,'
            ' t.attempts, t.expire_at, t.payload, t.kind, t.encoding, t.reference,'
            ' t.headers::text, t.dedup_key, t.source_id, t.created_at'
            ' FROM %s AS t WHERE t.dedup_key = ANY($1)', tables[n])
        USING keys, n - 1;
    END LOOP;
END
$$;
