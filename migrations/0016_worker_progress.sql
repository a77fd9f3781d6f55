-- Hangs (issue 12): every worker's last heartbeat, as its agent relays it (agent message
-- `progress`, docs/agent-protocol.md), and what the control loop needs to name a hang once.
-- Schema only: the functions, triggers and views that go with it are definitions, one file
-- each in server/store/sql/, re-applied at every server start (README.md, "Database schema
-- and definitions").

CREATE TABLE worker_progress (
    job_id        bigint NOT NULL,
    attempt       integer NOT NULL,
    rank          integer NOT NULL,
    op            text,
    coll_seq      bigint NOT NULL,
    in_collective boolean NOT NULL,
    report_seq    bigint NOT NULL,
    progress_at   timestamptz NOT NULL,
    heartbeat_at  timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (job_id, attempt, rank),
    FOREIGN KEY (job_id, attempt, rank) REFERENCES workers (job_id, attempt, rank)
        ON DELETE CASCADE
);
COMMENT ON TABLE worker_progress IS 'The last heartbeat of each worker that sent one (SDK heartbeat thread, trainyard.py): where it is, for naming hangs.';
COMMENT ON COLUMN worker_progress.job_id IS 'The job.';
COMMENT ON COLUMN worker_progress.attempt IS 'The attempt.';
COMMENT ON COLUMN worker_progress.rank IS 'The worker''s global rank.';
COMMENT ON COLUMN worker_progress.op IS 'The collective it is in or last left (allreduce, broadcast, allgather); NULL before its first.';
COMMENT ON COLUMN worker_progress.coll_seq IS 'That collective''s number, counting the rank''s collectives from 1; 0 before its first.';
COMMENT ON COLUMN worker_progress.in_collective IS 'Whether it is inside collective coll_seq.';
COMMENT ON COLUMN worker_progress.report_seq IS 'How many reports it made (trainyard.report / ty_report).';
COMMENT ON COLUMN worker_progress.progress_at IS 'When op, coll_seq, in_collective or report_seq last changed (its agent''s measure, on the server''s clock).';
COMMENT ON COLUMN worker_progress.heartbeat_at IS 'When its last heartbeat reached its agent (on the server''s clock).';
COMMENT ON COLUMN worker_progress.updated_at IS 'When its agent last relayed it: older than a few seconds means its agent is not reporting.';

ALTER TABLE attempts ADD COLUMN hang_warned_at timestamptz;
COMMENT ON COLUMN attempts.hang_warned_at IS 'The last progress time (max worker_progress.progress_at) of the hang last named in the job events: a hang is named once until some rank progresses.';
