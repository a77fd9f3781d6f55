-- Issue 27 (ingest): the server sums up the blocks of report_blocks as it stores their reports
-- (server/control/report_fold.c) and sends them with the batch (ty_report_ingest_batch takes
-- them, server/store/sql/), so that the leader's maintenance, which summed up every report again
-- from its stored values, has nothing left to do for the series the server saw whole. The
-- definitions that took the batch without them go (the one of 11 parameters lingers where
-- 0056's database took a definition between them). IF EXISTS: on a new database the definitions
-- of server/store/sql/ come after the migrations.
DROP FUNCTION IF EXISTS ty_report_ingest_batch(bigint[], integer[], integer[], bigint[], bigint[],
                                               text[], text[], text[], jsonb[], bigint[],
                                               bigint[], text[], integer[]);
DROP FUNCTION IF EXISTS ty_report_ingest_batch(bigint[], integer[], integer[], bigint[], bigint[],
                                               text[], text[], text[], jsonb[], bigint[],
                                               bigint[]);
