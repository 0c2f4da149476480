-- loopguard store, schema 3: the runs of `loopguard replay` (where each
-- one's input numbering starts, and the last input line it committed) and
-- the lines of their input that were not valid events.
CREATE TABLE IF NOT EXISTS loopguard_runs (
    run        INTEGER PRIMARY KEY NOT NULL,
    first_line INTEGER NOT NULL,
    last_line  INTEGER,
    started_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS loopguard_line_errors (
    run   INTEGER NOT NULL,
    line  INTEGER NOT NULL,
    error TEXT    NOT NULL,
    PRIMARY KEY (run, line)
);
