-- loopguard store, schema 2: each task's detector state (versioned), the
-- audit log and the pivot records.
ALTER TABLE loopguard_tasks ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE loopguard_tasks ADD COLUMN state TEXT;

CREATE TABLE IF NOT EXISTS loopguard_audit (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    task   TEXT    NOT NULL,
    line   INTEGER NOT NULL,
    at     INTEGER NOT NULL,
    entry  TEXT    NOT NULL,
    detail TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS loopguard_audit_task ON loopguard_audit (task, seq);

CREATE TABLE IF NOT EXISTS loopguard_pivots (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    task      TEXT    NOT NULL,
    line      INTEGER NOT NULL,
    at        INTEGER NOT NULL,
    number    INTEGER NOT NULL,
    directive TEXT
);
CREATE INDEX IF NOT EXISTS loopguard_pivots_task ON loopguard_pivots (task, seq);
