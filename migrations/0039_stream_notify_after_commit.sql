-- Issue 27: no NOTIFY inside the transactions that write streams. PostgreSQL serialises the
-- commits of notifying transactions (one database-wide lock held through the WAL flush), which
-- held durable submissions to about 1,100/s. The server now wakes its own stream thread after
-- each commit and tells the other servers with one coalesced NOTIFY ty_stream of its own
-- (server/stream/stream.c); the triggers that notified from inside each transaction go.
DROP TRIGGER IF EXISTS job_stream_notify ON job_stream;
DROP TRIGGER IF EXISTS cluster_stream_notify ON cluster_stream;
DROP FUNCTION IF EXISTS ty_stream_notify();
DROP FUNCTION IF EXISTS ty_cluster_notify();
