-- The SQLite catalog of querator schema version 1, frozen from git tag schema-v1
-- (commit 112306a: the DDL querator/queue/backends/sqlite/schema.py compiled).
-- Never edit: tests build a version 1 store from it and migrate it forward.
CREATE TABLE maintenance (
	id INTEGER NOT NULL, 
	last_run INTEGER NOT NULL, 
	PRIMARY KEY (id)
);
CREATE TABLE queues (
	id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, 
	name VARCHAR NOT NULL, 
	lease_timeout FLOAT NOT NULL, 
	expire_timeout FLOAT NOT NULL, 
	max_attempts INTEGER NOT NULL, 
	dead_queue VARCHAR, 
	reference VARCHAR NOT NULL, 
	partitions INTEGER NOT NULL, 
	created_at INTEGER NOT NULL, 
	UNIQUE (name)
);
CREATE INDEX ix_queues_dead_queue ON queues (dead_queue);
INSERT INTO maintenance (id, last_run) VALUES (1, 0);
