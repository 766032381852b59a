-- The SLOB table of one schema: a bigint key and filler columns wide enough that, with
-- fillfactor 10, every heap page holds exactly one row (about 1 kB per row; PostgreSQL only
-- inserts into a page whose free space stays above 90% of the page after the insert, and it
-- treats a nearly empty page as the only fit for so large a tuple).
-- Placeholders: {schema} (quoted identifier), {tablespace} (empty or " TABLESPACE <quoted>").
CREATE TABLE {schema}.cf1 (
    custid bigint NOT NULL,
    c2 text NOT NULL,
    c3 text NOT NULL,
    c4 text NOT NULL,
    c5 text NOT NULL,
    c6 text NOT NULL,
    c7 text NOT NULL,
    c8 text NOT NULL,
    c9 text NOT NULL
) WITH (fillfactor = 10){tablespace}
