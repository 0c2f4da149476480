-- loopguard store, schema 1: task snapshots and the cycle log.
CREATE TABLE IF NOT EXISTS loopguard_tasks (
    task       TEXT    PRIMARY KEY,
    status     TEXT    NOT NULL,
    loop_count BIGINT  NOT NULL,
    pivots     BIGINT  NOT NULL,
    last_seen  BIGINT  NOT NULL
);

-- `seq` keeps first-insertion order (the log is read oldest first); an
-- upsert by `id` keeps the row's `seq`.
CREATE TABLE IF NOT EXISTS loopguard_episodes (
    seq          BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id           BIGINT  NOT NULL UNIQUE,
    task         TEXT    NOT NULL,
    opened_at    BIGINT  NOT NULL,
    patterns     TEXT    NOT NULL,
    intervention TEXT    NOT NULL,
    escalated    BOOLEAN NOT NULL,
    lines        TEXT    NOT NULL,
    resolution   TEXT,
    resolved_at  BIGINT
);

CREATE INDEX IF NOT EXISTS loopguard_episodes_task ON loopguard_episodes (task, seq);
