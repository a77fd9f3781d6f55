"""trainyard.tune: Ray Tune's user-facing API on Trainyard's sweeps, so that porting is an import
change (`ray.tune` -> `trainyard.tune`). A sweep is a server object (POST /api/v1/sweeps,
docs/sweeps.md): the search space is resolved, trials are submitted as ordinary jobs and the
trial scheduler (ASHA, median stopping, PBT) decides on the server, so the sweep outlives this
process. Standard library only.

    from trainyard import tune

    def train_fn(config):
        for i in range(10):
            tune.report({"acc": config["lr"] * i})

    if __name__ == "__main__":
        tuner = tune.Tuner(train_fn, param_space={"lr": tune.grid_search([0.1, 0.01])},
                           tune_config=tune.TuneConfig(metric="acc", mode="max",
                                                       scheduler=tune.ASHAScheduler(max_t=10)))
        best = tuner.fit().get_best_result()
"""

from ._search import (choice, grid_search, loguniform, qloguniform, quniform, randint, randn,
                      sample_from, uniform)
from ._schedulers import (ASHAScheduler, AsyncHyperBandScheduler, FIFOScheduler,
                          MedianStoppingRule, PopulationBasedTraining)
from ._callback import Callback, Stopper, Trial
from ._optuna import OptunaSearch
from ._tuner import ResultGrid, TuneConfig, Tuner
from ..train import _session
from ..train._session import get_checkpoint, get_context


def report(metrics=None, *, checkpoint=None, **kwargs):
    """Reports a trial's result: tune.report({"acc": a}) as Ray 2 does, or tune.report(acc=a)
    as Ray 1 did."""
    return _session.report(dict(metrics or {}, **kwargs), checkpoint=checkpoint)


__all__ = [
    "ASHAScheduler", "AsyncHyperBandScheduler", "Callback", "FIFOScheduler",
    "MedianStoppingRule", "OptunaSearch", "Stopper", "Trial",
    "PopulationBasedTraining", "ResultGrid", "TuneConfig", "Tuner", "choice", "get_checkpoint",
    "get_context", "grid_search", "loguniform", "qloguniform", "quniform", "randint", "randn",
    "report", "sample_from", "uniform",
]
