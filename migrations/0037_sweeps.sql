-- Issue 25: sweeps (Ray Tune on the gang scheduler, DESIGN.md section 10, docs/sweeps.md). A
-- sweep is a server object: its trials' configs are resolved once, at submission, into
-- sweep_trials; the leader's control thread submits each trial as an ordinary job (jobs.sweep_id,
-- jobs.trial_index) while fewer than max_concurrent_trials of them are unfinished, and takes the
-- trial scheduler's decisions as the trials' reports arrive, from the rows below. Everything a
-- decision needs is here, so a sweep outlives its client, a server restart and a failover.
-- Schema only: the functions that go with it are definitions in server/store/sql/.

CREATE TABLE sweeps (
    id                    bigserial PRIMARY KEY,
    name                  text NOT NULL,
    owner                 text NOT NULL,
    project               text NOT NULL REFERENCES projects (name),
    status                text NOT NULL CHECK (status IN ('RUNNING', 'SUCCEEDED', 'STOPPED')),
    status_message        text,
    spec                  jsonb NOT NULL CHECK (jsonb_typeof(spec) = 'object'),
    metric                text,
    mode                  text CHECK (mode IN ('min', 'max')),
    max_concurrent_trials integer NOT NULL CHECK (max_concurrent_trials >= 1),
    seed                  bigint NOT NULL,
    created_at            timestamptz NOT NULL DEFAULT now(),
    finished_at           timestamptz
);
CREATE INDEX sweeps_running_idx ON sweeps (id) WHERE status = 'RUNNING';
COMMENT ON TABLE sweeps IS 'Sweeps (Ray Tune): a base job spec, a search space, a metric, a trial scheduler; their trials are jobs.';
COMMENT ON COLUMN sweeps.name IS 'The sweep''s name; its trials are jobs named <name>/trial-<index>.';
COMMENT ON COLUMN sweeps.owner IS 'The token name that submitted it; its trials are submitted in that name.';
COMMENT ON COLUMN sweeps.project IS 'The project of the sweep and of its trials (the base spec''s "project", default "default").';
COMMENT ON COLUMN sweeps.status IS 'RUNNING while trials remain to run or finish; SUCCEEDED once every trial finished; STOPPED when a user stopped it.';
COMMENT ON COLUMN sweeps.status_message IS 'Why it is in its status, in words.';
COMMENT ON COLUMN sweeps.spec IS 'The submission as validated: job (the base job spec), param_space, tune_config (metric, mode, num_samples, max_concurrent_trials, scheduler, seed).';
COMMENT ON COLUMN sweeps.metric IS 'tune_config.metric: the reported number trials are compared on (NULL: none, no trial scheduler).';
COMMENT ON COLUMN sweeps.mode IS 'tune_config.mode: max or min, whether a higher or a lower metric is better.';
COMMENT ON COLUMN sweeps.max_concurrent_trials IS 'At most this many trials unfinished at once.';
COMMENT ON COLUMN sweeps.seed IS 'The seed the random domains and the trial scheduler draw from.';
COMMENT ON COLUMN sweeps.created_at IS 'When it was submitted.';
COMMENT ON COLUMN sweeps.finished_at IS 'When it left RUNNING.';

CREATE TABLE sweep_trials (
    sweep_id      bigint NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
    trial_index   integer NOT NULL CHECK (trial_index >= 0),
    config        jsonb NOT NULL,
    job_id        bigint REFERENCES jobs (id) ON DELETE SET NULL,
    started       boolean NOT NULL DEFAULT false,
    stopped_by    text,
    seen_attempt  integer NOT NULL DEFAULT 0,
    seen_seq      bigint NOT NULL DEFAULT 0,
    last_t        double precision,
    last_value    double precision,
    best_value    double precision,
    perturbed_t   double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (sweep_id, trial_index)
);
CREATE INDEX sweep_trials_job_idx ON sweep_trials (job_id);
COMMENT ON TABLE sweep_trials IS 'A sweep''s trials: their resolved configs and what the trial scheduler has read and decided.';
COMMENT ON COLUMN sweep_trials.sweep_id IS 'The sweep.';
COMMENT ON COLUMN sweep_trials.trial_index IS 'The trial''s number in the sweep, from 0, in the order of the resolved search space.';
COMMENT ON COLUMN sweep_trials.config IS 'The trial''s hyperparameters, merged into its job''s train_loop_config (PBT changes them when it explores).';
COMMENT ON COLUMN sweep_trials.job_id IS 'The trial''s current job (a PBT exploit starts a new one); NULL before it started.';
COMMENT ON COLUMN sweep_trials.started IS 'Whether a job was ever submitted for it.';
COMMENT ON COLUMN sweep_trials.stopped_by IS 'Why the trial scheduler (or a user) stopped it early, in words; NULL while it was not.';
COMMENT ON COLUMN sweep_trials.seen_attempt IS 'With seen_seq: the last rank-0 report of the current job the trial scheduler has read.';
COMMENT ON COLUMN sweep_trials.seen_seq IS 'See seen_attempt.';
COMMENT ON COLUMN sweep_trials.last_t IS 'The time attribute (training_iteration: reports so far) of its last result.';
COMMENT ON COLUMN sweep_trials.last_value IS 'The sweep''s metric in its last result.';
COMMENT ON COLUMN sweep_trials.best_value IS 'The best value of the sweep''s metric it reported (by the sweep''s mode).';
COMMENT ON COLUMN sweep_trials.perturbed_t IS 'PBT: the time of its last perturbation (0: none).';

CREATE TABLE sweep_results (
    sweep_id    bigint NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
    trial_index integer NOT NULL,
    t           double precision NOT NULL,
    value       double precision NOT NULL,
    rung        double precision,
    id          bigserial PRIMARY KEY
);
CREATE INDEX sweep_results_sweep_idx ON sweep_results (sweep_id, id);
COMMENT ON TABLE sweep_results IS 'Every result the trial scheduler read, in order; rung set where ASHA recorded it at that rung''s milestone.';
COMMENT ON COLUMN sweep_results.sweep_id IS 'The sweep.';
COMMENT ON COLUMN sweep_results.trial_index IS 'The trial that reported it.';
COMMENT ON COLUMN sweep_results.t IS 'The time attribute of the result.';
COMMENT ON COLUMN sweep_results.value IS 'The sweep''s metric in it.';
COMMENT ON COLUMN sweep_results.rung IS 'ASHA: the milestone of the rung the result was recorded at; NULL elsewhere.';
COMMENT ON COLUMN sweep_results.id IS 'Arrival order.';

ALTER TABLE jobs ADD COLUMN sweep_id bigint REFERENCES sweeps (id) ON DELETE SET NULL;
ALTER TABLE jobs ADD COLUMN trial_index integer;
CREATE INDEX jobs_sweep_idx ON jobs (sweep_id) WHERE sweep_id IS NOT NULL;
COMMENT ON COLUMN jobs.sweep_id IS 'The sweep the job is a trial of (NULL: not a trial).';
COMMENT ON COLUMN jobs.trial_index IS 'Its trial''s number in that sweep.';
