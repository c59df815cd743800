-- History forgets (see crates/mirror/src/history.rs, `Retention`): handoff_revisions
-- is no longer append-only. A deleted handoff's revisions are deleted with
-- its row (unless the controller runs with --keep-history-on-delete), each
-- key keeps at most --history-revisions (the statement that records a
-- revision drops the oldest, reading the key's rows through the primary
-- key), resync drops past revisions older than --history-max-age, and
-- `handoff mirror purge` removes a leaked body by hand.

-- The age limit: past revisions written before a cutoff, without a scan.
CREATE INDEX handoff_revisions_written_at ON handoff_revisions (written_at);
