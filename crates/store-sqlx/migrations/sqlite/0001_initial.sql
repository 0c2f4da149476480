-- loopguard store, schema 1: task snapshots and the cycle log.
CREATE TABLE IF NOT EXISTS loopguard_tasks (
    task       TEXT    PRIMARY KEY NOT NULL,
    status     TEXT    NOT NULL,
    loop_count INTEGER NOT NULL,
    pivots     INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL
);

-- `seq` keeps first-insertion order (the log is read oldest first); an
-- upsert by `id` keeps the row's `seq`.
CREATE TABLE IF NOT EXISTS loopguard_episodes (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           INTEGER NOT NULL UNIQUE,
    task         TEXT    NOT NULL,
    opened_at    INTEGER NOT NULL,
    patterns     TEXT    NOT NULL,
    intervention TEXT    NOT NULL,
    escalated    INTEGER NOT NULL,
    lines        TEXT    NOT NULL,
    resolution   TEXT,
    resolved_at  INTEGER
);

CREATE INDEX IF NOT EXISTS loopguard_episodes_task ON loopguard_episodes (task, seq);
