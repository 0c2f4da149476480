-- loopguard store, schema 4: the answers of the same-request judge's second
-- opinion (an LLM), kept so that a pair of texts is asked once: the key is
-- a SHA-256 (64 hex digits) of who answers and the two texts.
CREATE TABLE IF NOT EXISTS loopguard_second_opinions (
    pair_key    TEXT    PRIMARY KEY NOT NULL,
    answered_by TEXT    NOT NULL,
    same        INTEGER NOT NULL,
    reason      TEXT    NOT NULL,
    answered_at INTEGER NOT NULL
);
