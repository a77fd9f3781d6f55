-- Issue 27 (submissions): room on each page of jobs for one update of every row on it. A flood of
-- submissions fills pages with new jobs, then the scheduling pass writes the waiting message of
-- all of them in one UPDATE (ty_jobs_set_waiting), in which no old row version can be pruned yet:
-- at fillfactor 75 only a third of those updates found room on their row's page (HOT: 4,414 of
-- 13,017 in 5 s of 2,700 submissions/s); the others wrote a new entry into each of jobs' nine
-- indexes. At 50 a page's free half holds a new version of each of its rows.
ALTER TABLE jobs SET (fillfactor = 50);
