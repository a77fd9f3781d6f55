"""Ray 1.9's Trainer (ray.train.Trainer) over the same machinery as fit(): run() is one job
whose workers print their function's return value (pickled, in RETURN_MARK lines of their log,
_runner.py); the callbacks get every rank's reports, read back from the server."""

import base64
import io
import os
import pickle
import time

from ._config import FailureConfig, RunConfig, ScalingConfig
from ._trainer import (MAIN_ALIAS, RETURN_MARK, DataParallelTrainer, _as_checkpoint,
                       _check_datasets)
from ._vocab import BACKEND_TENSORFLOW, BACKEND_TORCH

__all__ = ["Trainer", "run"]

RETURN_WAIT_S = 30.0  # for the last log lines of a job that has ended
LEGACY_BACKENDS = {"torch": BACKEND_TORCH, "tensorflow": BACKEND_TENSORFLOW}


class Trainer(DataParallelTrainer):
    """ray.train.Trainer (Ray 1.9): Trainer(backend="torch"|"tensorflow", num_workers=,
    use_gpu=, resources_per_worker=, logdir=, max_retries=), then start(), run(train_func,
    config=, callbacks=, checkpoint=) (every worker's return value in rank order),
    latest_checkpoint, shutdown(). Also Trainer(train_loop_per_worker=, backend=,
    scaling_config=ScalingConfig or dict). Other keyword arguments are DataParallelTrainer's
    (client=, working_dir=, run_config=, ...)."""

    def __init__(self, backend="torch", num_workers=1, use_gpu=False, resources_per_worker=None,
                 logdir=None, max_retries=3, *, train_loop_per_worker=None, scaling_config=None,
                 run_config=None, **kwargs):
        name = getattr(backend, "backend", backend)
        if name not in LEGACY_BACKENDS:
            raise ValueError(f"backend {backend!r} is not supported: use one of "
                             + ", ".join(repr(b) for b in LEGACY_BACKENDS))
        if scaling_config is None:
            scaling_config = ScalingConfig(num_workers=num_workers, use_gpu=use_gpu,
                                           resources_per_worker=resources_per_worker)
        run_config = run_config or RunConfig()
        if run_config.failure_config is None:
            run_config.failure_config = FailureConfig(max_failures=max_retries)
        super().__init__(train_loop_per_worker, scaling_config=scaling_config,
                         run_config=run_config, backend=LEGACY_BACKENDS[name], **kwargs)
        self.logdir = os.path.abspath(os.path.expanduser(
            logdir or os.path.join("~", "trainyard_results",
                                   time.strftime("train_%Y-%m-%d_%H-%M-%S"))))
        self.latest_run_dir = None


def _run_dir(trainer):
    """The next run_NNN directory under the trainer's logdir (Ray 1.9's layout)."""
    base = getattr(trainer, "logdir", None)
    if base is None:
        return None
    os.makedirs(base, exist_ok=True)
    n = 1 + sum(1 for e in os.listdir(base) if e.startswith("run_"))
    path = os.path.join(base, f"run_{n:03d}")
    os.makedirs(path, exist_ok=True)
    trainer.latest_run_dir = path
    return path


def run(trainer, train_func, config, callbacks, dataset, checkpoint):
    """DataParallelTrainer.run(): see its docstring."""
    if train_func is not None:
        trainer.train_loop_per_worker = train_func
    if trainer.train_loop_per_worker is None:
        raise ValueError("run() needs the training function")
    if config is not None:
        trainer.train_loop_config = config
    if checkpoint is not None:
        trainer.load_checkpoint(checkpoint)
    if dataset is not None:
        trainer.datasets = _check_datasets(dataset if isinstance(dataset, dict)
                                           else {"train": dataset})
    callbacks = list(callbacks or [])
    logdir = _run_dir(trainer) if callbacks else None
    for cb in callbacks:
        cb.start_training(logdir, config=trainer.train_loop_config or {})
    trainer._returns = True
    try:
        _, job = trainer._fit()
    except BaseException:
        _replay(trainer, callbacks)
        for cb in callbacks:
            cb.finish_training(error=True)
        raise
    finally:
        trainer._returns = False
    from ._client import Client
    client = trainer.client or Client()
    _replay(trainer, callbacks, client)
    for cb in callbacks:
        cb.finish_training(error=False)
    return _return_values(client, job, trainer.scaling_config.num_workers)


def _replay(trainer, callbacks, client=None):
    """Hands each report of the job, every rank's together, to the callbacks' handle_result."""
    if not callbacks or trainer.job_id is None:
        return
    if client is None:
        from ._client import Client
        client = trainer.client or Client()
    reports = {}  # rank -> {(attempt, time): metrics}
    for p in client.get_metrics(trainer.job_id):
        if "time" not in p:
            continue
        r = reports.setdefault(p["rank"], {}).setdefault((p["attempt"], p["time"]), {})
        r[p["name"]] = p["value"]
        if p.get("step") is not None:
            r.setdefault("step", p["step"])
    by_rank = [[m for _, m in sorted(reports[r].items())] for r in sorted(reports)]
    for i in range(min((len(x) for x in by_rank), default=0)):
        results = [dict(x[i], _training_iteration=i + 1) for x in by_rank]
        for cb in callbacks:
            cb.handle_result(results)


class _Unpickler(pickle.Unpickler):
    """What the user's script defined comes back from the workers as MAIN_ALIAS: __main__."""

    def find_class(self, module, name):
        return super().find_class("__main__" if module == MAIN_ALIAS else module, name)


def _parse(lines):
    """{rank: value} of the ranks whose RETURN_MARK lines are all there."""
    parts = {}
    for ln in lines:
        text = ln["line"]
        if not text.startswith(RETURN_MARK + " "):
            continue
        _, i, n, chunk = (text.split(" ", 3) + [""])[:4]
        parts.setdefault(ln["rank"], {})[int(i)] = (int(n), chunk)
    out = {}
    for rank, got in parts.items():
        n = next(iter(got.values()))[0]
        if len(got) == n:
            data = base64.b64decode("".join(got[i][1] for i in range(n)))
            out[rank] = _Unpickler(io.BytesIO(data)).load()
    return out


def _return_values(client, job, num_workers):
    """Every worker's return value in rank order, from the final attempt's log lines."""
    deadline = time.monotonic() + RETURN_WAIT_S
    while True:  # the job ended: its last lines are committed, or about to be
        values = _parse(client.get_log_lines(job["id"], attempt=job.get("attempt")))
        if len(values) >= num_workers or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    missing = [r for r in range(num_workers) if r not in values]
    if missing:
        raise RuntimeError(f"job {job['id']}: no return value from rank(s) {missing} "
                           "in its log")
    return [values[r] for r in range(num_workers)]
