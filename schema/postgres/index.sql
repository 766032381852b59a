-- SLOB's I_CF1: a B-tree on the key, so a read of k consecutive keys is one index range scan
-- that visits k heap blocks scattered over the table.
CREATE INDEX i_cf1 ON {schema}.cf1 (custid) WITH (fillfactor = 100){tablespace}
