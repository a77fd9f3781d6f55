-- Issue 27 (submissions): room on each page of jobs for the updates of its rows. A job's row is
-- updated right after its insert (ty_stream_append counts the submit event into stream_seq), then
-- by the scheduling pass's waiting message, then at every status change. With pages filled to
-- 100 % by the inserts, a third of those updates found no room on the row's page and wrote a new
-- entry into every index of jobs (nine); at fillfactor 75 nearly all stay on the page (HOT:
-- 3,955 of 3,957 updates in a flood of 1,866 submissions, against 2,700 of 4,044). Pages written
-- before this migration keep their old fill until rewritten.
ALTER TABLE jobs SET (fillfactor = 75);
