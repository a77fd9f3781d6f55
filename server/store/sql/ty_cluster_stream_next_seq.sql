-- The cluster stream's seq comes from a sequence, so two transactions may commit their rows out of
-- seq order (seq 9 still uncommitted when seq 10 is visible). The stream thread (server/stream/)
-- therefore delivers a row after a hole only once every transaction that was running when it saw
-- the hole has ended: a hole below a visible row can only belong to one of those (or to an aborted
-- one), because it took its seq earlier. That holds only if a transaction has its id before it
-- takes a seq, which the stream triggers guarantee (they run after a write) but a bare INSERT
-- would not: this default takes the transaction id first. The sequence is named as a constant (the
-- column's own, migrations/0007_streams.sql): looking it up by column cost a catalog search per row.
CREATE OR REPLACE FUNCTION ty_cluster_stream_next_seq() RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_current_xact_id();
    RETURN nextval('cluster_stream_seq_seq'::regclass);
END $$;
COMMENT ON FUNCTION ty_cluster_stream_next_seq() IS 'Default of cluster_stream.seq: assigns the transaction its id, then takes the next seq (see server/store/sql/ty_cluster_stream_next_seq.sql).';
-- The column default is set here, beside the function it calls; only when it differs, since
-- ALTER TABLE locks out the cluster stream's readers (other servers) until the definitions commit.
DO $$
BEGIN
    IF (SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d
          JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
         WHERE d.adrelid = 'cluster_stream'::regclass AND a.attname = 'seq')
       IS DISTINCT FROM 'ty_cluster_stream_next_seq()' THEN
        ALTER TABLE cluster_stream ALTER COLUMN seq SET DEFAULT ty_cluster_stream_next_seq();
    END IF;
END $$;
