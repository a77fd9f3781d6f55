"""OptunaSearch (ray.tune.search.optuna.OptunaSearch): Optuna's TPE (or any Optuna sampler)
on the driver, which stays connected. The driver asks Optuna for each trial's config, submits
the trial as an ordinary job (named <name>/trial-<i>, metadata optuna_trial), follows the jobs
over the /stream websocket and tells Optuna each trial's final metric. The server's own searches
(grid, random) need no Python; this one needs python3-optuna (docs/python-api.md)."""

import sys

from ..train._vocab import JOB_FAILED, JOB_SUCCEEDED

__all__ = ["OptunaSearch"]


def _distribution(optuna, path, dom):
    """The Optuna distribution of one domain (the JSON of tune.uniform & co.), or None for a
    constant."""
    D = optuna.distributions
    if not (isinstance(dom, dict) and len(dom) == 1):
        return None
    (kind, args), = dom.items()
    if kind == "uniform":
        return D.FloatDistribution(args[0], args[1])
    if kind == "quniform":
        return D.FloatDistribution(args[0], args[1], step=args[2])
    if kind in ("loguniform", "qloguniform"):
        return D.FloatDistribution(args[0], args[1], log=True)
    if kind == "randint":
        return D.IntDistribution(args[0], args[1] - 1)
    if kind == "choice":
        return D.CategoricalDistribution(list(args))
    if kind in ("grid_search", "randn"):
        raise ValueError(f"param_space {path}: OptunaSearch takes uniform, quniform, loguniform, "
                         f"randint and choice, not {kind}")
    return None


def _flatten(space, prefix=""):
    """[(path, key tuple, domain or constant)] of a nested param_space."""
    out = []
    for k, v in space.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and not (len(v) == 1 and next(iter(v)) in _DOMAINS):
            out += [(p, (k,) + keys, d) for p, keys, d in _flatten(v, path + "/")]
        else:
            out.append((path, (k,), v))
    return out


_DOMAINS = ("grid_search", "choice", "uniform", "quniform", "loguniform", "qloguniform",
            "randint", "randn")


class OptunaSearch:
    """TuneConfig(search_alg=OptunaSearch(...)): space (default: the Tuner's param_space),
    metric and mode (default: TuneConfig's), points_to_evaluate (configs tried first), sampler
    (default TPESampler(seed=seed))."""

    def __init__(self, space=None, metric=None, mode=None, points_to_evaluate=None,
                 sampler=None, seed=None):
        try:
            import optuna
        except ImportError:
            raise ImportError("OptunaSearch needs optuna: install python3-optuna "
                              "(scripts/install-deps.sh does)") from None
        self._optuna = optuna
        self.space, self.metric, self.mode = space, metric, mode
        self.points_to_evaluate = list(points_to_evaluate or [])
        self.sampler = sampler or optuna.samplers.TPESampler(seed=seed)
        self.study = None
        self._live = {}  # trial id -> its Optuna trial, until told
        self._flat = []

    def suggest(self, trial_id):
        """The next trial's config (Optuna's ask), its Optuna trial kept for on_trial_complete."""
        dists = {path: _distribution(self._optuna, path, dom) for path, _, dom in self._flat}
        t = self.study.ask({p: dist for p, dist in dists.items() if dist is not None})
        config = {}
        for path, keys, dom in self._flat:
            d = config
            for k in keys[:-1]:
                d = d.setdefault(k, {})
            d[keys[-1]] = t.params[path] if dists[path] is not None else dom
        self._live[trial_id] = t
        return config

    def on_trial_complete(self, trial_id, result=None, error=False):
        """Tells Optuna the trial's final metric (result[metric]); error or no metric: FAIL."""
        t = self._live.pop(trial_id)
        v = (result or {}).get(self.metric)
        ok = not error and isinstance(v, (int, float))
        TrialState = self._optuna.trial.TrialState
        self.study.tell(t, v if ok else None, state=TrialState.COMPLETE if ok else
                        TrialState.FAIL)

    def run(self, tuner, client):
        """Tuner.fit() with this search: returns the ResultGrid."""
        from ..train._stream import StreamUnavailable, follow_jobs
        from ..train._trainer import _code_package, _result
        from ._callback import Dispatch, Trial
        from ._tuner import ResultGrid
        tc, rc = tuner.tune_config, tuner.run_config
        self.metric = metric = self.metric or tc.metric
        self.mode = mode = self.mode or tc.mode
        if not metric or mode not in ("min", "max"):
            raise ValueError("OptunaSearch needs a metric and a mode (min or max), here or in "
                             "TuneConfig")
        if tc.scheduler is not None and type(tc.scheduler).__name__ != "FIFOScheduler":
            raise ValueError("OptunaSearch runs on the driver with no trial scheduler: the "
                             "server's schedulers (ASHA, median stopping, PBT) go with its own "
                             "searches")
        trainer, space = tuner._trainer()
        self._flat = _flatten(dict(self.space or space))
        for path, _, dom in self._flat:
            _distribution(self._optuna, path, dom)  # refuses what Optuna cannot sample
        spec, wd = trainer.build()
        spec["code_package"], _ = _code_package(client, wd, trainer.max_package_bytes)
        base_config = dict(spec.get("train_loop_config") or {})
        name = rc.name or spec["name"]
        direction = "maximize" if mode == "max" else "minimize"
        self.study = self._optuna.create_study(direction=direction, sampler=self.sampler)
        for p in self.points_to_evaluate:
            self.study.enqueue_trial(p)
        n = tc.num_samples
        conc = tc.max_concurrent_trials or n
        d = Dispatch(rc.callbacks, rc.stop, lambda trial: client.stop_job(trial.job_id),
                     lambda: state.update(stop_all=True))
        d.setup(stop=rc.stop, num_samples=n, total_num_samples=n)
        state = {"stop_all": False}
        jobs, ended, told = {}, {}, set()
        verbose = rc.verbose

        def submit(i):
            config = self.suggest(i)
            s = dict(spec, name=f"{name}/trial-{i}",
                     train_loop_config=dict(base_config, **config),
                     metadata=dict(spec.get("metadata") or {}, optuna_trial=str(i)))
            job_id = client.submit_job(s)
            tr = d.trials[i] = Trial(i, config, job_id)
            jobs[job_id] = tr
            if verbose:
                print(f"trainyard: trial {i} (job {job_id}): {config}", file=sys.stderr,
                      flush=True)

        def tell(job_id, status):
            tr = jobs[job_id]
            self.on_trial_complete(tr.trial_id, tr.last_result, status == JOB_FAILED)
            told.add(job_id)
            d.end(tr, status)

        def check():
            for j, st in list(ended.items()):
                if j not in told:
                    tell(j, st)
            running = {j for j in jobs if j not in told}
            if state["stop_all"]:
                for j in running:
                    client.stop_job(j)
            while not state["stop_all"] and len(d.trials) < n and len(running) < conc:
                submit(len(d.trials))
                running = {j for j in jobs if j not in told}
            return running or None

        def on_row(j, kind, data):
            d.row(jobs, ended, j, kind, data)

        try:
            follow_jobs(client, on_row, check)
        except StreamUnavailable as e:
            raise RuntimeError(f"OptunaSearch follows its trials over the stream: {e}") from None
        except KeyboardInterrupt:
            for j in jobs:
                if j not in told:
                    client.stop_job(j)
            raise
        d.experiment_end()
        results = []
        for j, tr in jobs.items():
            job = client.get_job(j)
            r = _result(client, job, rc)
            if job["status"] != JOB_FAILED:
                r.error = None
            r.config, r.trial_id, r.stopped_by = tr.config, tr.trial_id, None
            if job["status"] not in (JOB_SUCCEEDED, JOB_FAILED):
                r.stopped_by = job.get("status_message")
            results.append(r)
        return ResultGrid({"name": name, "metric": metric, "mode": mode,
                           "search_alg": "optuna"}, results)
