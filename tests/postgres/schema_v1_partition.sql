-- One partition table of querator schema version 1, frozen from git tag schema-v1
-- (commit 112306a, statements.py CREATE_PARTITION and CREATE_SWEEP_INDEX). Never edit.
CREATE TABLE IF NOT EXISTS {table} (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version integer NOT NULL,
    available_at timestamptz NOT NULL,
    lease_deadline timestamptz,
    client_id text,
    attempts integer NOT NULL,
    expire_at timestamptz NOT NULL,
    payload bytea NOT NULL,
    kind text NOT NULL,
    encoding text NOT NULL,
    reference text NOT NULL,
    headers jsonb NOT NULL,
    dedup_key text,
    source_id text,
    created_at timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 70);
CREATE UNIQUE INDEX IF NOT EXISTS {dedup_index} ON {table} (dedup_key)
    WHERE dedup_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS {available_index} ON {table} (available_at, seq);
CREATE INDEX IF NOT EXISTS {sweep_index} ON {table} ((CASE WHEN attempts > 0 AND available_at < expire_at THEN available_at ELSE expire_at END));
