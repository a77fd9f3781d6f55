"""Tuner.fit(): ship the trainable with the working directory, submit the sweep, follow it to
its end on the server and return a ResultGrid (docs/sweeps.md)."""

import sys
import time
from dataclasses import dataclass, fields
from typing import Any, Optional

from ..train._config import RunConfig, ScalingConfig
from ..train._pack import DEFAULT_MAX_BYTES
from ..train._trainer import DataParallelTrainer, _code_package, _result
from ..train._vocab import JOB_FAILED, TERMINAL_JOB_STATUSES
from ._callback import Dispatch, Trial

POLL_MIN_S, POLL_MAX_S = 0.2, 2.0
SWEEP_RUNNING = "RUNNING"


@dataclass
class TuneConfig:
    """ray.tune.TuneConfig. max_concurrent_trials None: every trial may run at once (the queue
    and the gang scheduler decide); seed: the server draws one when None."""
    metric: Optional[str] = None
    mode: Optional[str] = None
    num_samples: int = 1
    max_concurrent_trials: Optional[int] = None
    scheduler: Any = None
    search_alg: Any = None
    seed: Optional[int] = None

    def to_spec(self, run_config=None):
        out = {"num_samples": self.num_samples}
        for key in ("metric", "mode", "max_concurrent_trials", "seed"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.scheduler is not None:
            out["scheduler"] = (self.scheduler.to_spec() if hasattr(self.scheduler, "to_spec")
                                else dict(self.scheduler))
        if self.search_alg is not None:
            name = self.search_alg if isinstance(self.search_alg, str) else \
                type(self.search_alg).__name__
            if name not in ("random", "basic_variant", "BasicVariantGenerator"):
                raise ValueError(f"search_alg {name}: the server searches with grid and random "
                                 "search (basic_variant) only")
            out["search_alg"] = "basic_variant"
        return out


class ResultGrid:
    """ray.tune.ResultGrid: one Result per trial, in trial order; each has .config and
    .stopped_by (why the trial scheduler stopped it early, or None)."""

    def __init__(self, sweep, results):
        self.sweep = sweep
        self._results = results

    def __len__(self):
        return len(self._results)

    def __getitem__(self, i):
        return self._results[i]

    def __iter__(self):
        return iter(self._results)

    @property
    def errors(self):
        return [r.error for r in self._results if r.error is not None]

    @property
    def num_errors(self):
        return len(self.errors)

    @property
    def num_terminated(self):
        return len(self._results) - self.num_errors

    def get_best_result(self, metric=None, mode=None, scope="last", filter_nan_and_inf=True):
        """The trial whose final (scope "last") or best ("all") `metric` is best by `mode`
        (default: the sweep's)."""
        metric = metric or self.sweep.get("metric")
        mode = mode or self.sweep.get("mode")
        if not metric or mode not in ("min", "max"):
            raise ValueError("get_best_result needs a metric and a mode (min or max), here or in "
                             "TuneConfig")

        def score(r):
            if scope == "all":
                vals = [h[metric] for h in r.metrics_history if isinstance(h.get(metric),
                                                                           (int, float))]
                return (max(vals) if mode == "max" else min(vals)) if vals else None
            v = r.metrics.get(metric)
            return v if isinstance(v, (int, float)) else None

        scored = [(score(r), r) for r in self._results]
        scored = [(s, r) for s, r in scored if s is not None and
                  (not filter_nan_and_inf or abs(s) != float("inf") and s == s)]
        if not scored:
            raise RuntimeError(f"no trial reported {metric}")
        pick = max if mode == "max" else min
        return pick(scored, key=lambda sr: sr[0])[1]

    def get_dataframe(self, filter_metric=None, filter_mode=None):
        """One row per trial: its last metrics, config/<key> columns, trial_id, job_id and
        stopped_by. A pandas DataFrame; raises ImportError naming pandas without it."""
        rows = []
        for r in self._results:
            row = dict(r.metrics)
            row.update({f"config/{k}": v for k, v in (r.config or {}).items()})
            row.update(trial_id=r.trial_id, job_id=r.job_id, stopped_by=r.stopped_by)
            rows.append(row)
        try:
            import pandas
        except ImportError:
            raise ImportError("ResultGrid.get_dataframe needs pandas: install python3-pandas"
                              ) from None
        return pandas.DataFrame(rows)


def _scaling_space(scaling):
    """param_space["scaling_config"] (a ScalingConfig whose fields may be search domains, or
    a dict) as the JSON the server resolves: the fields given, Ray's names."""
    if isinstance(scaling, dict):
        return dict(scaling)
    if not isinstance(scaling, ScalingConfig):
        raise TypeError("param_space['scaling_config'] must be a ScalingConfig or a dict")
    default = ScalingConfig()
    out = {}
    for f in fields(ScalingConfig):
        v = getattr(scaling, f.name)
        if v != getattr(default, f.name):
            out[f.name] = v
    return out


def _progress(sweep, state):
    """One progress line when the trials' statuses or times changed since state["last"]."""
    now = [(t["status"], t.get("last_t")) for t in sweep["trials"]]
    if now == state.get("shown"):
        return
    state["shown"] = now
    done = sum(1 for t in sweep["trials"] if t["status"] in TERMINAL_JOB_STATUSES)
    best = (sweep.get("best_trial") or {}).get("best_metric")
    print(f"trainyard: sweep {sweep['id']}: {done}/{len(now)} trials done"
          + (f", best {sweep['metric']} {best}" if best is not None else ""),
          file=sys.stderr, flush=True)


class Tuner:
    """ray.tune.Tuner: trainable is a Trainer (DataParallelTrainer, TorchTrainer, ...; its
    train_loop_config is searched through param_space["train_loop_config"]) or a function of
    `config` (run as a one-worker trainer, param_space is its config)."""

    def __init__(self, trainable=None, *, param_space=None, tune_config=None, run_config=None,
                 client=None, working_dir=None, max_package_bytes=DEFAULT_MAX_BYTES):
        self.trainable = trainable
        self.param_space = dict(param_space or {})
        self.tune_config = tune_config or TuneConfig()
        self.run_config = run_config or RunConfig()
        self.client = client
        self.working_dir = working_dir
        self.max_package_bytes = max_package_bytes
        self.sweep_id = None

    @classmethod
    def restore(cls, path, trainable=None, client=None, **kwargs):
        """The Tuner of an existing sweep (its id, or its URL .../api/v1/sweeps/<id>): fit()
        follows it on to its end. The sweep went on on the server meanwhile."""
        t = cls(trainable, client=client, **kwargs)
        t.sweep_id = int(str(path).rstrip("/").rsplit("/", 1)[-1])
        return t

    @classmethod
    def can_restore(cls, path, client=None):
        from ..train._client import Client, TrainyardAPIError
        try:
            (client or Client()).request("GET", f"/api/v1/sweeps/"
                                         f"{int(str(path).rstrip('/').rsplit('/', 1)[-1])}")
            return True
        except (TrainyardAPIError, ValueError):
            return False

    def _trainer(self):
        t = self.trainable
        if isinstance(t, DataParallelTrainer):
            space = dict(self.param_space)
            config = dict(space.pop("train_loop_config", {}))
            scaling = space.pop("scaling_config", None)
            if space:
                raise ValueError(f"param_space keys {sorted(space)}: train_loop_config and "
                                 "scaling_config are searched on Trainyard")
            if scaling is not None:  # the server puts it in each trial's job spec
                config["scaling_config"] = _scaling_space(scaling)
            return t, config
        if not callable(t):
            raise TypeError("trainable must be a Trainer or a function of config")
        trainer = DataParallelTrainer(t, scaling_config=ScalingConfig(num_workers=1),
                                      run_config=self.run_config, working_dir=self.working_dir,
                                      client=self.client, max_package_bytes=self.max_package_bytes)
        return trainer, self.param_space

    def _body(self, client):
        trainer, space = self._trainer()
        spec, wd = trainer.build()
        sha, _ = _code_package(client, wd, trainer.max_package_bytes)
        spec["code_package"] = sha
        body = {"name": self.run_config.name or spec["name"], "job": spec, "param_space": space,
                "tune_config": self.tune_config.to_spec()}
        spec.get("run_config", {}).pop("stop", None)  # the sweep's, below
        stop = self.run_config.stop
        if isinstance(stop, dict) and stop:  # decided on the server; a callable: here
            body["tune_config"]["stop"] = dict(stop)
        return body, trainer

    def fit(self):
        """Submits the sweep (unless restored) and follows it to its end over the /stream
        websocket, feeding RunConfig(callbacks=) and a callable stop; returns a ResultGrid.
        Ctrl-C stops the sweep before re-raising KeyboardInterrupt."""
        from ..train._client import Client
        client = self.client or Client()
        if self.search_alg_driver() is not None:
            return self.search_alg_driver().run(self, client)
        verbose = self.run_config.verbose
        if self.sweep_id is None:
            body, _ = self._body(client)
            sweep = client.request("POST", "/api/v1/sweeps", body)
            self.sweep_id = sweep["id"]
            if verbose:
                print(f"trainyard: sweep {self.sweep_id} submitted ({sweep['num_trials']} trials)",
                      file=sys.stderr, flush=True)
        try:
            sweep = self._follow_stream(client, verbose)
        except KeyboardInterrupt:
            print(f"\ntrainyard: stopping sweep {self.sweep_id}", file=sys.stderr, flush=True)
            client.request("POST", f"/api/v1/sweeps/{self.sweep_id}/stop")
            raise
        return self._grid(client, sweep)

    def search_alg_driver(self):
        """The search algorithm when it runs on this driver (OptunaSearch), else None."""
        alg = self.tune_config.search_alg
        return alg if hasattr(alg, "run") and hasattr(alg, "suggest") else None

    def _dispatch(self, client):
        stop = self.run_config.stop
        return Dispatch(self.run_config.callbacks, stop,
                        lambda trial: client.stop_job(trial.job_id),
                        lambda: client.request("POST", f"/api/v1/sweeps/{self.sweep_id}/stop"))

    def _follow_stream(self, client, verbose):
        """Follows the sweep's trials' jobs over the stream (new trials seen on the cluster
        stream by their names), feeding the callbacks; polls REST when there is no stream.
        Returns the sweep as it ended."""
        from ..train._stream import StreamUnavailable, follow_jobs
        d = self._dispatch(client)
        sweep = client.request("GET", f"/api/v1/sweeps/{self.sweep_id}")
        tc = (sweep.get("spec") or {}).get("tune_config") or {}
        d.setup(stop=self.run_config.stop, num_samples=tc.get("num_samples"),
                total_num_samples=sweep.get("num_trials", len(sweep.get("trials") or [])))
        state = {"sweep": sweep, "last": None}
        jobs, ended = {}, {}

        def check():
            sw = client.request("GET", f"/api/v1/sweeps/{self.sweep_id}")
            state["sweep"] = sw
            want, started = set(), True
            for t in sw["trials"]:
                tr = d.trials.get(t["index"])
                if tr is None:
                    tr = d.trials[t["index"]] = Trial(t["index"], t["config"])
                tr.config, tr.stopped_by = dict(t["config"] or {}), t.get("stopped_by")
                j = t.get("job_id")
                if j is None:
                    started = False
                    continue
                if tr.job_id != j:
                    tr.job_id = j
                jobs[j] = tr
                if j in ended:
                    d.end(tr, ended[j])
                else:
                    want.add(j)
            if verbose:
                _progress(sw, state)
            if not want and (started or sw["status"] != SWEEP_RUNNING):
                return None
            return want

        def on_row(j, kind, data):
            d.row(jobs, ended, j, kind, data)

        try:
            follow_jobs(client, on_row, check, prefix=f"{sweep['name']}/trial-")
        except StreamUnavailable as e:
            if verbose:
                print(f"trainyard: {e}; polling instead", file=sys.stderr, flush=True)
            self._follow(client, verbose)
        d.experiment_end()
        return client.request("GET", f"/api/v1/sweeps/{self.sweep_id}")

    def _follow(self, client, verbose):
        delay, state = POLL_MIN_S, {"last": None}
        while True:
            sweep = client.request("GET", f"/api/v1/sweeps/{self.sweep_id}")
            before = state["last"]
            if verbose:
                _progress(sweep, state)
            now = state["last"] = [(t["status"], t.get("last_t")) for t in sweep["trials"]]
            if sweep["status"] != SWEEP_RUNNING:
                return sweep
            delay = POLL_MIN_S if now != before else min(POLL_MAX_S, delay * 1.5)
            time.sleep(delay)

    def _grid(self, client, sweep):
        results = []
        for t in sweep["trials"]:
            if t.get("job_id") is None:
                continue
            job = client.get_job(t["job_id"])
            r = _result(client, job, self.run_config)
            if job["status"] != JOB_FAILED:
                r.error = None  # a trial the scheduler (or a user) stopped is no error
            r.config = t["config"]
            r.trial_id = t["index"]
            r.stopped_by = t.get("stopped_by")
            results.append(r)
        return ResultGrid(sweep, results)
