-- The PostgreSQL mirror of Handoff objects (see crates/mirror/src/lib.rs).
-- Typed columns, hand-written SQL, no JSONB.

-- One row per current Handoff: the fields of its spec
-- (crates/core/src/api/handoff.rs) plus the namespace, the content
-- revision and the resourceVersion the row was
-- written from. `id` is the object's metadata.uid, so a Handoff deleted and
-- created again under the same key is a different row identity.
CREATE TABLE handoffs (
    id               UUID        PRIMARY KEY,
    namespace        TEXT        NOT NULL,
    handoff_key      TEXT        NOT NULL,
    project          TEXT        NOT NULL,
    repo             TEXT,
    kind             TEXT,
    created_by       TEXT        NOT NULL,
    body             TEXT        NOT NULL,
    revision         BIGINT      NOT NULL CHECK (revision >= 1),
    resource_version BIGINT      NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    UNIQUE (namespace, handoff_key)
);

-- list_handoffs: one project (and repo) of a namespace, newest first.
CREATE INDEX handoffs_list ON handoffs (namespace, project, repo, updated_at DESC);

-- Every content revision the controller counted, append-only: rows are
-- inserted, never updated or deleted (not even when the Handoff is).
CREATE TABLE handoff_revisions (
    namespace   TEXT        NOT NULL,
    handoff_key TEXT        NOT NULL,
    handoff_id  UUID        NOT NULL,
    revision    BIGINT      NOT NULL CHECK (revision >= 1),
    project     TEXT        NOT NULL,
    repo        TEXT,
    kind        TEXT,
    body        TEXT        NOT NULL,
    created_by  TEXT        NOT NULL,
    written_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (namespace, handoff_key, handoff_id, revision)
);

CREATE INDEX handoff_revisions_lookup ON handoff_revisions (namespace, handoff_key, revision, written_at DESC);
