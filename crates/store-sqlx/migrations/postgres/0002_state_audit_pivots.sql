-- loopguard store, schema 2: each task's detector state (versioned), the
-- audit log and the pivot records.
ALTER TABLE loopguard_tasks ADD COLUMN IF NOT EXISTS version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE loopguard_tasks ADD COLUMN IF NOT EXISTS state TEXT;

CREATE TABLE IF NOT EXISTS loopguard_audit (
    seq    BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task   TEXT    NOT NULL,
    line   BIGINT  NOT NULL,
    at     BIGINT  NOT NULL,
    entry  TEXT    NOT NULL,
    detail TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS loopguard_audit_task ON loopguard_audit (task, seq);

CREATE TABLE IF NOT EXISTS loopguard_pivots (
    seq       BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task      TEXT    NOT NULL,
    line      BIGINT  NOT NULL,
    at        BIGINT  NOT NULL,
    number    BIGINT  NOT NULL,
    directive TEXT
);
CREATE INDEX IF NOT EXISTS loopguard_pivots_task ON loopguard_pivots (task, seq);
