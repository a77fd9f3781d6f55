-- Definitions (functions, triggers, views) moved out of the migrations into server/store/sql/, one
-- file each, re-applied at every server start. A database created before that may still hold a
-- function no file defines: the copy of ty_job_json that migration 0014 renamed and wrapped. It is
-- dropped here so that the database holds only current definitions (a fresh database never had
-- it). ty_job_json, which called it, is replaced by its one definition right after the migrations.
DROP FUNCTION IF EXISTS ty_job_json_without_restarts(jobs);
