-- search_handoffs (see crates/mirror/src/search.rs): full-text search over the key
-- and body of current handoffs.
--
-- The `simple` configuration lower-cases and keeps every word as written
-- (no stemming, no stop words), so a word in any language matches itself
-- ("Zahlungsdienst", "überweisung"). The body is indexed twice: as the
-- parser reads it (`payments_test.go` is the words `payments` and
-- `test.go`), and with `_`, `.`, `/`, `-` and `#` turned into spaces
-- (`payments`, `test`, `go`), so a part of an identifier or a path matches
-- too. `unaccent` is not used: it ships with Debian's PostgreSQL, but
-- CREATE EXTENSION needs rights the mirror's role may lack, and unaccent()
-- is only STABLE, so a generated column would need an IMMUTABLE wrapper
-- pinned to one dictionary; accents therefore count ("uberweisung" does not
-- match "überweisung").
--
-- Text is lower-cased with the ICU root collation before parsing: the
-- parser's own lower-casing follows the database's locale, and under
-- `C` (as `initdb --locale=C` makes) it folds ASCII only, so "Überweisung"
-- would not match "überweisung". Queries are lower-cased the same way
-- (crates/mirror/src/search.rs). The collation needs PostgreSQL built with ICU,
-- as Debian's, Ubuntu's and the official images are.
ALTER TABLE handoffs ADD COLUMN search tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('simple', lower(handoff_key COLLATE "und-x-icu")), 'A')
    || setweight(to_tsvector('simple', translate(lower(handoff_key COLLATE "und-x-icu"), '_./-#', '     ')), 'A')
    || to_tsvector('simple', lower(body COLLATE "und-x-icu"))
    || to_tsvector('simple', translate(lower(body COLLATE "und-x-icu"), '_./-#', '     '))
) STORED;

CREATE INDEX handoffs_search ON handoffs USING GIN (search);
