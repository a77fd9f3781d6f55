-- Statement trigger on reports: the keys of the rows just inserted join report_names (migration
-- 0043), the names store_metrics_series looks up in each report of a job.
CREATE OR REPLACE FUNCTION ty_report_names_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO report_names (job_id, name)
    SELECT DISTINCT n.job_id, k FROM new_reports n CROSS JOIN LATERAL jsonb_object_keys(n.metrics) k
     ORDER BY 1, 2 -- one order for every writer: two batches never wait on each other in a cycle
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION ty_report_names_add() IS 'Trigger: the names of newly inserted reports join report_names.';
CREATE OR REPLACE TRIGGER report_names AFTER INSERT ON reports
    REFERENCING NEW TABLE AS new_reports FOR EACH STATEMENT EXECUTE FUNCTION ty_report_names_add();
