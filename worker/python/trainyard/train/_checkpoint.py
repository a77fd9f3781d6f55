"""Checkpoint and Result (ray.train.Checkpoint, ray.train.Result)."""

import contextlib
import io
import os
import pickle
import re
import shutil
import tarfile
import tempfile
import time

__all__ = ["Checkpoint", "Result", "TrainingFailedError", "MetricAssertionError",
           "check_assertions"]


ARCHIVE_WAIT_S = 120.0
DICT_FILE = "dict_checkpoint.pkl"  # Checkpoint.from_dict's one file


class TrainingFailedError(RuntimeError):
    """The job failed: the message holds the job's error, the failing rank's error and the tail
    of its log. Attributes: job_id, rank (or None), error, log_tail."""

    def __init__(self, message, job_id=None, rank=None, error=None, log_tail=""):
        super().__init__(message)
        self.job_id, self.rank, self.error, self.log_tail = job_id, rank, error, log_tail


class MetricAssertionError(AssertionError):
    """A CI quality gate ('accuracy>=0.85') missed: the message names the metric and value."""


_ASSERT = re.compile(r"^\s*([A-Za-z0-9_./:-]+)\s*(>=|<=|==|!=|>|<)\s*([-+0-9.eE]+|nan|inf)\s*$")
_OPS = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
        "<": lambda a, b: a < b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def check_assertions(metrics, assertions):
    """Checks conditions like 'accuracy>=0.85' against `metrics` (rank 0's final metrics).
    Raises ValueError for a malformed condition, MetricAssertionError naming every miss."""
    misses = []
    for cond in assertions:
        m = _ASSERT.match(cond)
        if not m:
            raise ValueError(f"assertion {cond!r} is not NAME OP NUMBER (OP: >= <= > < == !=)")
        name, op, bound = m.group(1), m.group(2), float(m.group(3))
        value = (metrics or {}).get(name)
        if name not in (metrics or {}):
            misses.append(f"{cond}: the final metrics have no {name!r}")
        elif not isinstance(value, (int, float)) or isinstance(value, bool):
            misses.append(f"{cond}: {name} is {value!r}, not a number")
        elif not _OPS[op](value, bound):
            misses.append(f"{cond}: {name} is {value}")
    if misses:
        raise MetricAssertionError("quality gate missed: " + "; ".join(misses))


class Checkpoint:
    """A directory of files a worker wrote (ray.train.Checkpoint). Made by a worker with
    Checkpoint.from_directory(path) and passed to report(); a Result's checkpoints live on the
    server (id) and are downloaded by as_directory() / to_directory()."""

    def __init__(self, path=None, id=None, client=None, metrics=None, local_path=None):
        self._path = os.fspath(path) if path is not None else None
        self.id = id
        self.metrics = metrics or {}
        self._client = client
        self._local = local_path

    @classmethod
    def from_directory(cls, path):
        return cls(path=path)

    @classmethod
    def from_dict(cls, data):
        """A checkpoint holding `data` (a dict that pickles): one file in a new temporary
        directory, so it travels as any directory checkpoint does."""
        if not isinstance(data, dict):
            raise TypeError(f"Checkpoint.from_dict needs a dict, not a {type(data).__name__}")
        d = tempfile.mkdtemp(prefix="checkpoint-")
        with open(os.path.join(d, DICT_FILE), "wb") as f:
            pickle.dump(data, f, protocol=4)
        return cls(path=d)

    def to_dict(self):
        """The dict of a Checkpoint.from_dict (downloaded when it is on the server)."""
        with self.as_directory() as d:
            p = os.path.join(d, DICT_FILE)
            if not os.path.isfile(p):
                raise ValueError(f"{self!r} was not made by Checkpoint.from_dict (no {DICT_FILE}):"
                                 " use as_directory()")
            with open(p, "rb") as f:
                return pickle.load(f)

    @property
    def path(self):
        return self._path or self._local

    def __fspath__(self):
        if self.path is None:
            raise TypeError("this checkpoint is on the server: use as_directory()")
        return self.path

    def _readable_local(self):
        for p in (self._path, self._local):
            if p and os.path.isdir(p) and os.access(p, os.R_OK | os.X_OK):
                return p
        return None

    def _download(self, dest):
        if self.id is None or self._client is None:
            raise FileNotFoundError(f"checkpoint {self.path!r} is not here and has no server copy")
        from ._client import TrainyardAPIError
        deadline = time.monotonic() + ARCHIVE_WAIT_S
        while True:  # the agents upload in the background: 409 until every part is stored
            try:
                data = self._client.get_checkpoint_archive(self.id)
                break
            except TrainyardAPIError as e:
                if e.status != 409 or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, filter="data")
            else:
                tar.extractall(dest)

    def to_directory(self, path=None):
        """Copies (or downloads) the checkpoint's files into `path` (a new temporary directory
        when None) and returns it."""
        dest = os.fspath(path) if path is not None else tempfile.mkdtemp(prefix="checkpoint-")
        os.makedirs(dest, exist_ok=True)
        local = self._readable_local()
        if local and self.id is None:
            shutil.copytree(local, dest, dirs_exist_ok=True)
        else:
            self._download(dest)
        return dest

    @contextlib.contextmanager
    def as_directory(self):
        """A directory holding the files, for the with-block: the checkpoint's own when it is
        on this machine, else a temporary download removed afterwards."""
        local = self._readable_local()
        if local and self.id is None:
            yield local
            return
        tmp = tempfile.mkdtemp(prefix="checkpoint-")
        try:
            self._download(tmp)
            yield tmp
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def __repr__(self):
        if self.id is not None:
            return f"Checkpoint(id={self.id})"
        return f"Checkpoint(path={self.path!r})"


class Result:
    """What fit() returns (ray.train.Result): rank 0's last metrics, the latest checkpoint, the
    kept checkpoints with their metrics (as Ray orders them: by the score attribute when one is
    set, the best last; else in the order they were reported), the error
    (None when the job succeeded), and path (the run's storage path, or the job's URL)."""

    def __init__(self, metrics, checkpoint, best_checkpoints, error, path, job_id,
                 metrics_history=None):
        self.metrics = metrics or {}
        self.checkpoint = checkpoint
        self.best_checkpoints = best_checkpoints or []
        self.error = error
        self.path = path
        self.job_id = job_id
        self._history = metrics_history or []

    @property
    def metrics_dataframe(self):
        """Rank 0's reports as a pandas DataFrame (one row per report). Raises ImportError
        naming the package when pandas is not installed."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Result.metrics_dataframe needs pandas: install python3-pandas "
                              "(scripts/install-deps.sh does), or use Result.metrics_history"
                              ) from None
        return pandas.DataFrame(self._history)

    @property
    def metrics_history(self):
        """Rank 0's reports as a list of dicts (one per report, oldest first)."""
        return [dict(r) for r in self._history]

    def assert_metrics(self, *assertions):
        """The CI gate: raises MetricAssertionError when rank 0's final metrics miss any of
        e.g. 'accuracy>=0.85', 'loss<0.5' (the message names the metric and its value)."""
        check_assertions(self.metrics, assertions)
        return self

    def __repr__(self):
        return (f"Result(metrics={self.metrics!r}, checkpoint={self.checkpoint!r}, "
                f"error={self.error!r}, path={self.path!r})")
