"""tune.Callback (Ray Tune's driver-side callbacks) and the Trial objects they receive, fed
from the server's /stream websocket as reports and status changes commit (no polling): by
Tuner.fit() for a sweep's trials, and by Trainer.fit() for its one job (RunConfig(callbacks=)).
A callable or Stopper `stop` is evaluated here too (docs/python-api.md)."""

from ..train._vocab import JOB_FAILED, JOB_RUNNING, TERMINAL_JOB_STATUSES

__all__ = ["Callback", "Stopper", "Trial"]

TRIAL_PENDING, TRIAL_RUNNING, TRIAL_TERMINATED, TRIAL_ERROR = (
    "PENDING", "RUNNING", "TERMINATED", "ERROR")


class Callback:
    """ray.tune.Callback: override any of these; `iteration` counts the results seen so far,
    `trials` is every Trial known, `trial` the one concerned."""

    def setup(self, stop=None, num_samples=None, total_num_samples=None, **info):
        pass

    def on_trial_start(self, iteration, trials, trial, **info):
        pass

    def on_trial_result(self, iteration, trials, trial, result, **info):
        pass

    def on_trial_complete(self, iteration, trials, trial, **info):
        pass

    def on_trial_error(self, iteration, trials, trial, **info):
        pass

    def on_experiment_end(self, trials, **info):
        pass


class Stopper:
    """ray.tune.Stopper: __call__(trial_id, result) -> whether that trial stops; stop_all() ->
    whether every trial stops."""

    def __call__(self, trial_id, result):
        return False

    def stop_all(self):
        return False


class Trial:
    """One trial as the callbacks see it: trial_id (the trial's index, or the job id of a
    plain fit()), config, status (PENDING, RUNNING, TERMINATED, ERROR), job_id, last_result,
    stopped_by."""

    def __init__(self, trial_id, config=None, job_id=None):
        self.trial_id = trial_id
        self.config = dict(config or {})
        self.job_id = job_id
        self.status = TRIAL_PENDING
        self.last_result = {}
        self.stopped_by = None

    def __repr__(self):
        return f"Trial({self.trial_id}, {self.status})"

    def __str__(self):
        return f"trial_{self.trial_id}"


class Dispatch:
    """Turns stream rows into the callbacks' calls and applies a driver-side `stop` (a dict
    stays with the server). stop_job(trial) stops a trial's job; stop_rest() everything."""

    def __init__(self, callbacks, stop, stop_job, stop_rest=None):
        self.callbacks = list(callbacks or [])
        self.stop = stop if callable(stop) else None
        self.stop_job, self.stop_rest = stop_job, stop_rest
        self.trials = {}  # trial_id -> Trial, in arrival order
        self.iteration = 0
        self._stopping = set()
        self.stopped_all = False

    def _call(self, name, **kw):
        for cb in self.callbacks:
            getattr(cb, name)(**kw)

    def setup(self, stop=None, num_samples=None, total_num_samples=None):
        self._call("setup", stop=stop, num_samples=num_samples,
                   total_num_samples=total_num_samples)

    def _list(self):
        return list(self.trials.values())

    def start(self, trial):
        if trial.status != TRIAL_PENDING:
            return
        trial.status = TRIAL_RUNNING
        self._call("on_trial_start", iteration=self.iteration, trials=self._list(), trial=trial)

    def row(self, jobs, ended, job, kind, data):
        """One stream row of a trial's job (jobs: job id -> Trial): rank 0's reports are results,
        status events statuses; a job's terminal status goes to ended[job] instead (the caller
        ends the trial once it has read the job)."""
        trial = jobs.get(job)
        if trial is None:
            return
        if kind == "report" and data.get("rank") == 0:
            self.result(trial, data)
        elif kind == "event":
            if data.get("status") in TERMINAL_JOB_STATUSES:
                ended[job] = data["status"]
            else:
                self.status(trial, data.get("status"))

    def status(self, trial, status):
        if status == JOB_RUNNING:
            self.start(trial)

    def result(self, trial, data):
        """A rank-0 report row of the trial's job."""
        self.start(trial)
        self.iteration += 1
        n = trial.last_result.get("training_iteration", 0) + 1
        result = dict(data.get("metrics") or {})
        result.setdefault("training_iteration", n)
        result.setdefault("trial_id", trial.trial_id)
        if data.get("step") is not None:
            result.setdefault("step", data["step"])
        result["config"] = trial.config
        trial.last_result = result
        self._call("on_trial_result", iteration=self.iteration, trials=self._list(), trial=trial,
                   result=result)
        if self.stop is None or trial.trial_id in self._stopping:
            return
        if self.stop(trial.trial_id, result):
            self._stopping.add(trial.trial_id)
            self.stop_job(trial)
        stop_all = getattr(self.stop, "stop_all", None)
        if not self.stopped_all and stop_all is not None and stop_all():
            self.stopped_all = True
            if self.stop_rest is not None:
                self.stop_rest()

    def end(self, trial, job_status, error=None):
        """The trial's (current) job ended with job_status."""
        if trial.status in (TRIAL_TERMINATED, TRIAL_ERROR):
            return
        self.start(trial)
        if job_status == JOB_FAILED:
            trial.status = TRIAL_ERROR
            self._call("on_trial_error", iteration=self.iteration, trials=self._list(),
                       trial=trial)
        else:
            trial.status = TRIAL_TERMINATED
            self._call("on_trial_complete", iteration=self.iteration, trials=self._list(),
                       trial=trial)

    def experiment_end(self):
        self._call("on_experiment_end", trials=self._list())


def is_terminal(status):
    return status in TERMINAL_JOB_STATUSES
