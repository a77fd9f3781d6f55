-- Issue 27 (ingest, review of migration 0047): report_blocks is stored by one function for every
-- writer, the leader's maintenance (server/store/sql/ty_report_blocks_fill.sql). The statement
-- trigger report_blocks, which summed up at once the rows of every statement but the server's
-- batches (those set trainyard.report_blocks to 'deferred'), goes, with the function it ran and
-- ty_report_blocks_sum (folded into ty_report_blocks_fill). The trigger report_names becomes
-- reports_added (server/store/sql/ty_reports_added.sql), which every writer fires: it also notes
-- each series in report_series, so that the maintenance finds the rows any writer stored, and
-- lowers a series' block_next when a report comes for a block already stored. Reads take the
-- stored blocks below block_next only (store_metrics.c). What this migration finds is consistent
-- already: every series has its report_series row (migration 0047 and the triggers since). IF
-- EXISTS: on a new database the definitions of server/store/sql/ come after the migrations.
DROP TRIGGER IF EXISTS report_blocks ON reports;
DROP FUNCTION IF EXISTS ty_report_blocks_add();
DROP FUNCTION IF EXISTS ty_report_blocks_sum(jsonb);
DROP TRIGGER IF EXISTS report_names ON reports;
DROP FUNCTION IF EXISTS ty_report_names_add();
