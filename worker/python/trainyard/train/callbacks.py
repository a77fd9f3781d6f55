"""trainyard.train.callbacks (ray.train.callbacks, Ray 1.9): what Trainer.run(callbacks=[...])
calls: start_training(logdir, config), handle_result(results) with every rank's report (a list
in rank order) per report, finish_training(error)."""

import json
import os

__all__ = ["TrainingCallback", "JsonLoggerCallback", "PrintCallback"]


class TrainingCallback:
    """The base class: override any of the three."""

    def start_training(self, logdir, config, **info):
        pass

    def handle_result(self, results, **info):
        pass

    def finish_training(self, error=False, **info):
        pass


class PrintCallback(TrainingCallback):
    """Prints every report's results (every rank's) as indented JSON."""

    def handle_result(self, results, **info):
        print(json.dumps(results, indent=4), flush=True)


class JsonLoggerCallback(TrainingCallback):
    """Writes the results of workers_to_log (a rank, a list of ranks, or None: all) to
    logdir/filename (default: the run's directory, results.json) as one JSON list."""

    def __init__(self, logdir=None, filename=None, workers_to_log=0):
        self._logdir, self._filename = logdir, filename or "results.json"
        self._workers = workers_to_log
        self._path = None
        self._log = []

    @property
    def log_path(self):
        return self._path

    def start_training(self, logdir, config, **info):
        d = self._logdir or logdir or os.getcwd()
        os.makedirs(d, exist_ok=True)
        self._path = os.path.join(d, self._filename)
        self._log = []
        self._write()

    def handle_result(self, results, **info):
        w = self._workers
        if w is None:
            self._log.append(results)
        elif isinstance(w, int):
            self._log.append(results[w])
        else:
            self._log.append([results[i] for i in w])
        self._write()

    def _write(self):
        with open(self._path, "w", encoding="utf-8") as f:
            json.dump(self._log, f)
