-- Issue 27 (ingest): the server sends a batch of reports to ty_report_ingest_batch as one array
-- per column (server/store/sql/ty_report_ingest_batch.sql), each report's values parsed on their
-- own, where one JSON document holding the whole batch was parsed whole first. The definition
-- that took that document goes. IF EXISTS: on a new database the definitions of
-- server/store/sql/ come after the migrations.
DROP FUNCTION IF EXISTS ty_report_ingest_batch(jsonb);
