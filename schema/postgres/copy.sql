-- Binary COPY into the table created in the same transaction, so FREEZE applies: rows arrive
-- frozen and all-visible, and the first read after the load does not rewrite pages to set
-- hint bits.
COPY {schema}.cf1 (custid, c2, c3, c4, c5, c6, c7, c8, c9) FROM STDIN WITH (FORMAT binary, FREEZE)
