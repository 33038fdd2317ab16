-- One partition table of querator schema version 1, frozen from git tag schema-v1
-- (commit 112306a, sqlite/schema.py partition_table compiled). Never edit.
CREATE TABLE {table} (
	seq INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	version INTEGER NOT NULL, 
	available_at INTEGER NOT NULL, 
	lease_deadline INTEGER, 
	client_id VARCHAR, 
	attempts INTEGER NOT NULL, 
	expire_at INTEGER NOT NULL, 
	payload BLOB NOT NULL, 
	kind VARCHAR NOT NULL, 
	encoding VARCHAR NOT NULL, 
	reference VARCHAR NOT NULL, 
	headers TEXT NOT NULL, 
	dedup_key VARCHAR, 
	source_id VARCHAR, 
	created_at INTEGER NOT NULL, 
	UNIQUE (dedup_key)
);
CREATE INDEX {table}_available ON {table} (available_at, seq);
CREATE INDEX {table}_sweep ON {table} ((CASE WHEN attempts > 0 AND available_at < expire_at THEN available_at ELSE expire_at END));
