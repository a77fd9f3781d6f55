"""DataParallelTrainer.fit(): ship the training function with the working directory, submit the
job, stream its logs and a progress line per report, and return a Result (docs/python-api.md)."""

import ast
import io
import json
import os
import pickle
import sys
import sysconfig
import time

from ._checkpoint import Checkpoint, Result, TrainingFailedError, check_assertions
from ._config import RunConfig, ScalingConfig
from ._pack import (DEFAULT_MAX_BYTES, directory_signature, pack_directory, remember_package,
                    remembered_package)
from ._vocab import BACKEND_NONE, JOB_STOPPED, JOB_SUCCEEDED, SCORE_MAX, TERMINAL_JOB_STATUSES

__all__ = ["DataParallelTrainer", "function_reference", "build_spec"]

TERMINAL = TERMINAL_JOB_STATUSES
DATASETS_FILE = "__trainyard_datasets__.pkl"  # datasets= in the code package
FUNCTION_FILE = "__trainyard_function__.pkl"  # a function that travels by value (cloudpickle)
MAIN_ALIAS = "__trainyard_main__"  # the user's script, imported on a worker
RETURN_MARK = "__trainyard_return__"  # the log lines that carry a worker's return value (run())
POLL_MIN_S, POLL_MAX_S = 0.1, 1.0  # polling backs off while nothing changes
STOP_REASON = "stop: "  # how the server's reason begins when run_config.stop stopped a job


class WorkerImportStop(BaseException):
    """Raised by fit() when a worker's runner imports the user's script and reaches the script's
    own fit() call (a script without an `if __name__ == "__main__":` guard, as Ray's quick start
    is): the import stops there, with every function above it defined, and the runner goes on
    with the function it came for. Not an Exception, so that user code does not swallow it."""


# Set by the runner while it imports the user's script on a worker.
in_worker_import = False
RUNNER = ["python3", "-m", "trainyard.train._runner"]


def runner_entrypoint(python=None):
    """The workers' command: the nodes' Python (`python`, else TRAINYARD_WORKER_PYTHON on the
    submitting machine, else python3 on the nodes' PATH) running the runner."""
    return [python or os.environ.get("TRAINYARD_WORKER_PYTHON") or "python3"] + RUNNER[1:]


def _is_main_guard(node):
    """Whether `node` is `if __name__ == "__main__":` (either way round)."""
    t = node.test
    if not (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq)):
        return False
    sides = [t.left, t.comparators[0]]
    return (any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and
            any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


def script_defines(path, name):
    """Whether importing the script at `path` under another name than __main__ (as the runner
    does) binds the top-level `name`: a def, class or assignment outside its
    `if __name__ == "__main__":` blocks."""
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return False

    def binds(stmts):
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if s.name == name:
                    return True
            elif isinstance(s, (ast.Assign, ast.AnnAssign)):
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    return True
            elif isinstance(s, ast.If):
                if binds(s.orelse) or (not _is_main_guard(s) and binds(s.body)):
                    return True
            elif isinstance(s, (ast.Try, ast.With, ast.For, ast.While)):
                parts = [getattr(s, k, []) for k in ("body", "orelse", "finalbody")]
                parts += [h.body for h in getattr(s, "handlers", [])]
                if any(binds(p) for p in parts):
                    return True
        return False

    return binds(tree.body)


def function_reference(fn, working_dir):
    """How a worker finds `fn`: {"file": path relative to working_dir, "qualname"} for a
    function the user's script (__main__) defines when imported, {"module", "qualname"} for one
    of a module the workers can import (installed, or at the top of working_dir), else
    {"pickled": FUNCTION_FILE}: a function with no importable home (defined in a notebook cell,
    in `python3 -`, under `if __name__ == "__main__":`, a lambda, a closure, a module beside a
    notebook outside working_dir) travels by value (pickle_function). Raises ValueError for what
    is not a function."""
    qual = getattr(fn, "__qualname__", None)
    mod = getattr(fn, "__module__", None)
    if not callable(fn):
        raise ValueError("train_loop_per_worker must be a function")
    if qual and mod and "<" not in qual:
        if mod != "__main__":
            if _reachable(mod, working_dir):
                return {"module": mod, "qualname": qual}
            return {"pickled": FUNCTION_FILE}
        path = getattr(sys.modules.get("__main__"), "__file__", None)
        if path and os.path.isfile(path):
            rel = os.path.relpath(os.path.abspath(path), os.path.abspath(working_dir))
            if not rel.startswith("..") and script_defines(path, qual.split(".")[0]):
                return {"file": rel, "qualname": qual}
    return {"pickled": FUNCTION_FILE}


class _RecordingUnpickler(pickle.Unpickler):
    """Loads a pickle, noting every module it imports a name from, and every module cloudpickle
    imports whole (a module the function uses as a global: `subimport(name)`)."""

    def __init__(self, data):
        super().__init__(io.BytesIO(data))
        self.modules = set()

    def find_class(self, module, name):
        self.modules.add(module)
        found = super().find_class(module, name)
        if name == "subimport" and module.startswith("cloudpickle"):
            def subimport(module_name):
                self.modules.add(module_name)
                return found(module_name)
            return subimport
        return found


def _installed(path):
    """Whether `path` (a module's file) belongs to the Python installation (standard library,
    site-packages, dist-packages): the nodes' Python has the same, or the job's packages are
    the nodes' business as for any import."""
    path = os.path.realpath(path)
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    parts = path.split(os.sep)
    return ("site-packages" in parts or "dist-packages" in parts or
            any(path.startswith(os.path.realpath(r) + os.sep) for r in roots if r))


def _reachable(module, working_dir):
    """Whether the workers can import `module`: ours, built in, installed (_installed), or at the
    top of working_dir (the package's directory is the workers' current one)."""
    top = module.split(".")[0]
    if top in ("trainyard", "_trainyard_heartbeat", "cloudpickle"):
        return True
    path = getattr(sys.modules.get(module) or sys.modules.get(top), "__file__", None)
    if not path or _installed(path):
        return True
    real, wd = os.path.realpath(path), os.path.realpath(working_dir)
    return real == os.path.join(wd, top + ".py") or real.startswith(os.path.join(wd, top) + os.sep)


def pickle_function(fn, working_dir, what="train_loop_per_worker"):
    """`fn` pickled by value with cloudpickle (its closure and the globals it uses with it), for
    a worker to load. Everything a worker could not run is refused here, before submission
    (ValueError): no cloudpickle, a value that does not pickle, a pickle that does not load back,
    or a module it needs that lives neither in the Python installation nor in working_dir (a
    module beside a notebook outside working_dir: the workers could not import it)."""
    name = getattr(fn, "__qualname__", None) or repr(fn)
    try:
        import cloudpickle
    except ImportError:
        raise ValueError(f"{what} {name} has no importable home (a notebook cell, `python3 -`, "
                         "`if __name__ == \"__main__\":`, a lambda or a closure) and travels by "
                         "value, which needs cloudpickle: install python3-cloudpickle "
                         "(scripts/install-deps.sh does), or define it in a module") from None
    home = sys.modules.get(getattr(fn, "__module__", None) or "")
    by_value = home is not None and home.__name__ != "__main__" and \
        not _reachable(home.__name__, working_dir)
    if by_value:  # a function of a module the workers cannot import: the module's code too
        cloudpickle.register_pickle_by_value(home)
    try:
        data = cloudpickle.dumps(fn, protocol=4)
    except Exception as e:
        raise ValueError(f"{what} {name} cannot travel to the workers: pickling it by value "
                         f"failed ({type(e).__name__}: {e}); a value it uses (a global or a "
                         "variable of its closure) does not pickle") from None
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(home)
    loader = _RecordingUnpickler(data)
    try:
        loader.load()
    except Exception as e:
        raise ValueError(f"{what} {name} cannot travel to the workers: its pickle does not load "
                         f"back ({type(e).__name__}: {e})") from None
    for module in sorted(loader.modules):
        if _reachable(module, working_dir):
            continue
        path = getattr(sys.modules.get(module), "__file__", None)
        raise ValueError(f"{what} {name} uses module {module!r} ({path}), which is neither "
                         f"installed nor at the top of working_dir {working_dir}: the workers "
                         "could not import it; move it there, or pass working_dir= the directory "
                         "that holds it")
    return data


def build_spec(name, backend, entrypoint, scaling_config, run_config, train_loop_config,
               fit_ref=None, resume_from=None, env=None, resume_package=None):
    """The job spec of a fit() (DESIGN.md section 3); resume_package: the package (sha256) of
    a local checkpoint directory to resume from, instead of resume_from."""
    if fit_ref is not None:  # the runner's one argument names the function
        entrypoint = list(entrypoint) + [json.dumps(dict(fit_ref, backend=backend, name=name),
                                                    separators=(",", ":"))]
    spec = {"name": name, "backend": backend, "entrypoint": entrypoint,
            "scaling_config": scaling_config.to_spec(), "run_config": run_config.to_spec()}
    if train_loop_config is not None:
        spec["train_loop_config"] = train_loop_config
    if env:
        spec["env"] = dict(env)
    if resume_package is not None:
        spec["resume_from_package"] = resume_package
    elif resume_from is not None:
        cid = getattr(resume_from, "id", resume_from)
        if not isinstance(cid, int) or isinstance(cid, bool):
            raise ValueError("resume_from_checkpoint must be a Checkpoint (of an earlier Result, "
                             "or Checkpoint.from_directory(a local directory)) or its id")
        spec["resume_from_checkpoint"] = cid
    if run_config.metadata:
        spec["metadata"] = {str(k): str(v) for k, v in run_config.metadata.items()}
    return spec


class DataParallelTrainer:
    """Runs train_loop_per_worker on num_workers workers (ray.train.DataParallelTrainer). It may
    also be an entrypoint (a list of arguments or a shell string) for any program, the native
    C backend's included. working_dir (default: the directory of the script that calls fit(),
    else the current one) is packed and travels with the job; client: a Client (default:
    TRAINYARD_SERVER and TRAINYARD_TOKEN); worker_python: the nodes' Python (default
    TRAINYARD_WORKER_PYTHON, else python3); its packages are the nodes' business."""

    _backend = BACKEND_NONE

    def __init__(self, train_loop_per_worker, *, train_loop_config=None, scaling_config=None,
                 run_config=None, resume_from_checkpoint=None, backend=None, working_dir=None,
                 client=None, env=None, max_package_bytes=DEFAULT_MAX_BYTES, datasets=None,
                 metadata=None, worker_python=None):
        self.train_loop_per_worker = train_loop_per_worker
        self.train_loop_config = train_loop_config
        if isinstance(scaling_config, dict):  # as Ray accepts it: {"num_workers": 4}
            scaling_config = ScalingConfig(**scaling_config)
        self.scaling_config = scaling_config or ScalingConfig()
        self.run_config = run_config or RunConfig()
        self.resume_from_checkpoint = (_as_checkpoint(resume_from_checkpoint)
                                       if isinstance(resume_from_checkpoint, dict)
                                       else resume_from_checkpoint)
        self.backend = backend or self._backend
        self.working_dir = working_dir
        self.client = client
        self.env = env
        self.max_package_bytes = max_package_bytes
        self.worker_python = worker_python
        self.datasets = _check_datasets(datasets)
        if metadata:
            self.run_config.metadata.update(metadata)
        self.job_id = None
        self._returns = False  # run(): the workers print their return values
        self._pickled = None  # build(): the function's pickle, when it travels by value
        self._latest = None  # the latest checkpoint of the last run() or fit()

    # --- building the job ---

    def _working_dir(self):
        if self.working_dir is not None:
            return os.path.abspath(self.working_dir)
        fn = self.train_loop_per_worker
        if callable(fn) and getattr(fn, "__module__", None) == "__main__":
            path = getattr(sys.modules.get("__main__"), "__file__", None)
            if path:
                return os.path.dirname(os.path.abspath(path))
        return os.getcwd()

    def _name(self):
        if self.run_config.name:
            return self.run_config.name
        fn = self.train_loop_per_worker
        return getattr(fn, "__name__", None) or type(self).__name__

    def _local_checkpoint(self):
        """The local directory of resume_from_checkpoint when it is one
        (Checkpoint.from_directory) rather than a checkpoint the server holds, else None."""
        ck = self.resume_from_checkpoint
        if isinstance(ck, Checkpoint) and ck.id is None:
            if not ck.path or not os.path.isdir(ck.path):
                raise ValueError(f"resume_from_checkpoint {ck.path!r} is not a directory")
            return ck.path
        if not isinstance(ck, Checkpoint) and isinstance(ck, (str, os.PathLike)):
            raise ValueError("resume_from_checkpoint must be a Checkpoint: use "
                             "Checkpoint.from_directory(path) for a local directory")
        return None

    def build(self, resume_package=None):
        """The job spec (without its code package) and the working directory to pack;
        resume_package: the package (sha256) of a local resume_from_checkpoint."""
        wd = self._working_dir()
        fn = self.train_loop_per_worker
        if isinstance(fn, (list, tuple, str)):
            entry, ref = (list(fn) if not isinstance(fn, str) else fn), None
        else:
            entry, ref = runner_entrypoint(self.worker_python), function_reference(fn, wd)
            self._pickled = pickle_function(fn, wd) if "pickled" in ref else None
            if self._returns:
                ref["returns"] = True
        spec = build_spec(self._name(), self.backend, entry, self.scaling_config,
                          self.run_config, self.train_loop_config, ref,
                          None if resume_package else self.resume_from_checkpoint, self.env,
                          resume_package)
        return spec, wd

    # --- running it ---

    def fit(self, assertions=()):
        """Submits the job and follows it to its end. Returns a Result; raises
        TrainingFailedError when it failed (Result.error holds the same), MetricAssertionError
        when `assertions` (e.g. ["accuracy>=0.85"]) miss on rank 0's final metrics, and on
        Ctrl-C stops the job before re-raising KeyboardInterrupt."""
        return self._fit(assertions)[0]

    def _fit(self, assertions=()):
        """fit(), returning (Result, the final job) when the job succeeded."""
        if in_worker_import:
            raise WorkerImportStop()
        from ._client import Client  # not on the workers' import path
        client = self.client or Client()
        local_ck = self._local_checkpoint()
        resume_package = None
        if local_ck is not None:  # it travels as a package, as the working directory does
            resume_package, _ = client.upload_code(
                pack_directory(local_ck, self.max_package_bytes, keep_all=True,
                               what="resume_from_checkpoint"))
        spec, wd = self.build(resume_package)
        extra = {}
        if self._pickled is not None:  # a function with no importable home travels by value
            extra[FUNCTION_FILE] = self._pickled
        if self.datasets:  # they travel in the code package, pickled
            extra.update(_pack_datasets(self.datasets, self.scaling_config.num_workers,
                                        by_value=self._pickled is not None))
        sha, uploaded = _code_package(client, wd, self.max_package_bytes, extra or None)
        spec["code_package"] = sha
        verbose = self.run_config.verbose
        self.job_id = job_id = client.submit_job(spec)
        if verbose:
            how = "uploaded" if uploaded else "unchanged"
            print(f"trainyard: job {job_id} submitted ({spec['name']}, "
                  f"{self.scaling_config.num_workers} workers, code {sha[:12]} {how})",
                  file=sys.stderr, flush=True)
        from ..tune._callback import Dispatch, Trial
        stopped = []  # a driver-side stop stopped the job
        rc = self.run_config

        def stop_job(trial):
            stopped.append(trial.trial_id)
            client.stop_job(job_id)

        dispatch = Dispatch(rc.callbacks, rc.stop, stop_job, lambda: stop_job(None))
        trial = dispatch.trials[job_id] = Trial(job_id, self.train_loop_config, job_id)
        dispatch.setup(stop=rc.stop, num_samples=1, total_num_samples=1)
        try:
            job = _follow_stream(client, job_id, verbose, dispatch, trial)
        except KeyboardInterrupt:
            print(f"\ntrainyard: stopping job {job_id}", file=sys.stderr, flush=True)
            try:
                client.stop_job(job_id)
            finally:
                raise
        dispatch.end(trial, job["status"])
        dispatch.experiment_end()
        result = _result(client, job, self.run_config)
        if job["status"] == JOB_STOPPED and rc.stop is not None and \
                (stopped or (job.get("status_message") or "").startswith(STOP_REASON)):
            result.error = None  # stopped by RunConfig(stop=): the run's end, as in Ray
        self._latest = result.checkpoint
        if result.error is not None:
            raise result.error
        if assertions:
            check_assertions(result.metrics, assertions)
        return result, job

    # --- Ray 1.9's Trainer methods (docs/python-api.md) ---

    def start(self):
        """Ray 1.9: nothing to start ahead (each run() is one job); checks the server answers."""
        from ._client import Client
        (self.client or Client()).request("GET", "/api/v1/version")

    def load_checkpoint(self, checkpoint):
        """The checkpoint the next run() starts from: a Checkpoint, a dict (Ray 1.9's
        checkpoints) or a local directory."""
        self.resume_from_checkpoint = _as_checkpoint(checkpoint)

    def run(self, train_func=None, config=None, callbacks=None, dataset=None, checkpoint=None):
        """Ray 1.9: runs train_func (default train_loop_per_worker) on every worker with
        `config`, and returns every worker's return value in rank order. callbacks receive the
        reports (a list with every rank's, per report) and the end; checkpoint: to resume
        from. Raises TrainingFailedError when the job failed."""
        from . import _legacy
        return _legacy.run(self, train_func, config, callbacks, dataset, checkpoint)

    def shutdown(self):
        """Ray 1.9: nothing is left running after run() (its job has ended)."""

    @property
    def latest_checkpoint(self):
        """The latest checkpoint of the last run() or fit(): a dict when train.save_checkpoint
        made it (Ray 1.9), else the Checkpoint; None when there is none."""
        ck = self._latest
        if ck is None:
            return None
        try:
            return ck.to_dict()
        except ValueError:
            return ck

    def save_checkpoint(self):
        """The latest checkpoint (a Checkpoint on the server) of the last run() or fit()."""
        return self._latest


def _as_checkpoint(checkpoint):
    """A Checkpoint from a Checkpoint, a dict or a local directory (None stays None)."""
    if checkpoint is None or isinstance(checkpoint, Checkpoint):
        return checkpoint
    if isinstance(checkpoint, dict):
        return Checkpoint.from_dict(checkpoint)
    if isinstance(checkpoint, (str, os.PathLike)):
        return Checkpoint.from_directory(checkpoint)
    raise TypeError("checkpoint must be a Checkpoint, a dict or a directory, not a "
                    f"{type(checkpoint).__name__}")


def _check_datasets(datasets):
    """datasets= checked: None, or a dict of name -> a trainyard.data Dataset, a sequence (len
    and indexing) or a torch Dataset, which must pickle (a class defined in the user's script
    is fine)."""
    if not datasets:
        return None
    if not isinstance(datasets, dict):
        raise TypeError("datasets must be a dict of name -> trainyard.data Dataset, sequence or "
                        "torch Dataset")
    from ..data import Dataset
    for name, ds in datasets.items():
        if not isinstance(name, str):
            raise TypeError(f"datasets key {name!r} is not a string")
        if not isinstance(ds, Dataset) and not (hasattr(ds, "__len__") and
                                                hasattr(ds, "__getitem__")):
            raise TypeError(f"datasets[{name!r}] is a {type(ds).__name__}: give a trainyard.data "
                            "Dataset, a sequence or a torch Dataset (len() and indexing)")
    return dict(datasets)


def _pack_datasets(datasets, num_workers, by_value=False):
    """The code package's files for datasets=: DATASETS_FILE, the pickled table of name -> a
    sequence or torch Dataset (whole, each worker then takes its items) or a trainyard.data
    Dataset's plan (which rows or files each rank reads, no rows), plus the block files of the
    in-memory Datasets, one per worker (trainyard/data.py says how each kind is split).
    by_value: pickled with cloudpickle (the function travels by value: what the notebook
    defined travels with it)."""
    from ..data import Dataset
    table, files = {}, {}
    for i, (name, ds) in enumerate(datasets.items()):
        if isinstance(ds, Dataset):
            table[name], blocks = ds.plan(str(i), num_workers)
            files.update(blocks)
        else:
            table[name] = ds
    dumps = pickle.dumps
    if by_value:
        import cloudpickle
        dumps = cloudpickle.dumps
    try:
        files[DATASETS_FILE] = dumps(table, protocol=4)
    except Exception as e:
        raise ValueError(f"datasets= cannot travel to the workers: pickling failed "
                         f"({type(e).__name__}: {e})") from None
    return files


def _code_package(client, workdir, max_bytes, extra=None):
    """The code package of `workdir` (plus the `extra` files) on the server: (sha256, uploaded).
    An unchanged directory (same signature as when it was last packed) whose package the server
    still holds is neither packed nor sent again."""
    sig = directory_signature(workdir, extra)
    known = remembered_package(sig)
    if known and client.code_state(known) == "complete":
        return known, False
    sha, uploaded = client.upload_code(pack_directory(workdir, max_bytes, extra=extra))
    remember_package(sig, sha)
    return sha, uploaded


def _follow_stream(client, job_id, verbose, dispatch=None, trial=None):
    """Follows the job over the /stream websocket until it ends, printing each log line once as
    it commits (verbose 2) and one progress line per rank-0 report (verbose >= 1), handing its
    status changes and rank-0 reports to `dispatch` (tune/_callback.py: RunConfig's callbacks
    and driver-side stop) for `trial`; falls back to polling REST (_follow) when the stream
    cannot be used, going on from the lines already printed. Returns the final job."""
    from ._stream import StreamUnavailable, follow_job
    printed = {}  # (attempt, rank) -> lines printed

    def on_log(attempt, rank, line):
        key = (attempt, rank)
        printed[key] = printed.get(key, 0) + 1
        if verbose >= 2 and not line.startswith(RETURN_MARK):
            print(f"(rank {rank}) {line}", file=sys.stderr, flush=True)

    def on_report(data):
        if verbose >= 1 and data.get("rank") == 0:
            _print_report(data.get("step"), data.get("metrics") or {})
        if dispatch is not None and data.get("rank") == 0:
            dispatch.result(trial, data)

    def on_event(data):
        if dispatch is not None:
            dispatch.status(trial, data.get("status"))

    def on_resume(after):
        if verbose >= 2:
            print(f"trainyard: stream connection lost; resuming after seq {after}",
                  file=sys.stderr, flush=True)

    drop = os.environ.get("TRAINYARD_STREAM_DROP_AFTER")  # tests: drop every N rows
    try:
        job = follow_job(client, job_id, TERMINAL, on_log, on_report,
                         int(drop) if drop and drop.isdigit() else None, on_resume, on_event)
    except StreamUnavailable as e:
        if verbose:
            print(f"trainyard: {e}; polling instead", file=sys.stderr, flush=True)
        return _follow(client, job_id, verbose, printed, stream_reports=True)
    if verbose >= 2:  # lines that committed after the job's last status change
        _print_new_lines(client, job_id, printed)
    return job


def _follow(client, job_id, verbose, seen_lines=None, stream_reports=False):
    """Polls the job until it ends, printing new log lines (verbose 2) and one progress line
    per rank-0 report (verbose >= 1). seen_lines: lines already printed per (attempt, rank);
    stream_reports: the reports so far were printed already (from the stream). Returns the
    final job."""
    seen_lines = {} if seen_lines is None else seen_lines
    seen_reports = set()
    if stream_reports:
        seen_reports = {(r["attempt"], r["time"])
                        for r in _reports(client.get_metrics(job_id, rank=0))}
    delay, last = POLL_MIN_S, None
    while True:
        job = client.get_job(job_id)
        done = job["status"] in TERMINAL
        if verbose >= 2:
            _print_new_lines(client, job_id, seen_lines)
        if verbose >= 1:
            _print_new_reports(client, job_id, seen_reports)
        if done:
            return job
        now = (job["status"], job.get("attempt"), sum(seen_lines.values()), len(seen_reports),
               json.dumps((job.get("result") or {}).get("metrics"), sort_keys=True))
        delay = POLL_MIN_S if now != last else min(POLL_MAX_S, delay * 1.5)
        last = now
        time.sleep(delay)


def _print_new_lines(client, job_id, printed):
    """Prints the lines of each (attempt, rank) beyond those printed before."""
    counts = {}
    for ln in client.get_log_lines(job_id):
        key = (ln["attempt"], ln["rank"])
        counts[key] = counts.get(key, 0) + 1
        if counts[key] > printed.get(key, 0):
            printed[key] = counts[key]
            if ln["line"].startswith(RETURN_MARK):
                continue
            print(f"(rank {ln['rank']}) {ln['line']}", file=sys.stderr, flush=True)


def _reports(points):
    """Rank 0's metric points grouped into reports (by attempt and time), oldest first."""
    reports = {}
    for p in points:
        if p.get("rank") != 0 or "time" not in p:
            continue
        r = reports.setdefault((p["attempt"], p["time"]), {"step": p.get("step")})
        r[p["name"]] = p["value"]
    return [dict(v, attempt=k[0], time=k[1]) for k, v in sorted(reports.items())]


def _print_new_reports(client, job_id, seen):
    for r in _reports(client.get_metrics(job_id, rank=0)):
        key = (r["attempt"], r["time"])
        if key in seen:
            continue
        seen.add(key)
        _print_report(r["step"], {k: v for k, v in r.items()
                                  if k not in ("step", "attempt", "time")})


def _print_report(step, metrics):
    vals = " ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in metrics.items() if k != "step")
    step = "" if step is None else f" step {step}"
    print(f"trainyard: [report]{step} {vals}", file=sys.stderr, flush=True)


def _failure(client, job):
    """The TrainingFailedError of a failed job: its error, the first failing rank and the tail
    of that rank's log."""
    job_id = job["id"]
    error = (job.get("result") or {}).get("error") or job.get("status_message") or "failed"
    rank, tail = None, ""
    try:
        bad = [w for w in client.get_workers(job_id)
               if w.get("attempt") == job.get("attempt") and
               ((w.get("exit_code") not in (None, 0)) or w.get("signal") or
                w.get("status") == "LOST")]
        if bad:  # the first to fail on its own: those the server then stopped had a signal
            bad.sort(key=lambda w: (bool(w.get("signal")), w.get("status") == "LOST",
                                    w.get("finished_at") or "~", w["rank"]))
            rank = bad[0]["rank"]
            tail = client.get_job_logs(job_id, rank=rank, tail=20)
    except Exception:  # the job's own error still says what happened
        pass
    where = f" (rank {rank})" if rank is not None else ""
    msg = f"job {job_id} {job['status'].lower()}{where}: {error}"
    if tail:
        msg += "\n--- last lines of rank %s ---\n%s" % (rank, tail.rstrip())
    return TrainingFailedError(msg, job_id, rank, error, tail)


def _result(client, job, run_config):
    job_id = job["id"]
    res = job.get("result") or {}
    cks = [c for c in client.get_checkpoints(job_id)
           if (c.get("artifact") or {}).get("state") != "deleted"]

    def ck(c):
        local = (c.get("location") or [{}])[0].get("path")
        return Checkpoint(id=c["id"], client=client, metrics=c.get("metrics"), local_path=local)

    latest = None
    if res.get("latest_checkpoint"):
        lid = res["latest_checkpoint"]["id"]
        latest = next((ck(c) for c in cks if c["id"] == lid), None)
    cc = run_config.checkpoint_config
    kept = list(cks)
    if cc and cc.checkpoint_score_attribute:  # as Ray: worst first, the best last
        attr = cc.checkpoint_score_attribute
        kept = [c for c in kept if attr in (c.get("metrics") or {})]
        kept.sort(key=lambda c: c["metrics"][attr],
                  reverse=cc.checkpoint_score_order != SCORE_MAX)
    if cc and cc.num_to_keep:  # retention may not have caught up yet
        kept = kept[-cc.num_to_keep:]
    best = [(ck(c), c.get("metrics") or {}) for c in kept]
    history = [{k: v for k, v in r.items() if k != "time"}
               for r in _reports(client.get_metrics(job_id, rank=0))]
    if run_config.storage_path:
        # The job's directory there (docs/artifacts.md: job-<id>/attempt-<a>/checkpoint-<k>/...).
        path = os.path.join(run_config.storage_path, f"job-{job_id}")
    else:
        path = f"{client.address}/api/v1/jobs/{job_id}"
    error = None if job["status"] == JOB_SUCCEEDED else _failure(client, job)
    return Result(res.get("metrics") or {}, latest, best, error, path, job_id, history)
