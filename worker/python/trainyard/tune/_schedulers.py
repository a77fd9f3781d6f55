"""Ray Tune's trial schedulers, as the JSON the server runs (tune/tune_asha.c, tune_median.c,
tune_pbt.c; docs/sweeps.md). metric and mode may be given here or in TuneConfig, as in Ray."""


class FIFOScheduler:
    """No early stopping: every trial runs to its end."""

    def to_spec(self):
        return {"type": "fifo"}


class _WithMetric:
    def _base(self, kind):
        out = {"type": kind, "time_attr": self.time_attr}
        if self.metric is not None:
            out["metric"] = self.metric
        if self.mode is not None:
            out["mode"] = self.mode
        return out


class ASHAScheduler(_WithMetric):
    """Asynchronous successive halving (ray.tune.schedulers.ASHAScheduler): rungs at
    grace_period * reduction_factor^k up to max_t; a trial worse than the (1 - 1/rf) quantile of
    the results recorded at a rung stops there. One bracket."""

    def __init__(self, time_attr="training_iteration", metric=None, mode=None, max_t=100,
                 grace_period=1, reduction_factor=4, brackets=1, stop_last_trials=True):
        if brackets != 1:
            raise ValueError("Trainyard's ASHA runs one bracket (brackets=1)")
        self.time_attr, self.metric, self.mode = time_attr, metric, mode
        self.max_t, self.grace_period, self.reduction_factor = max_t, grace_period, reduction_factor
        self.stop_last_trials = stop_last_trials

    def to_spec(self):
        return dict(self._base("asha"), max_t=self.max_t, grace_period=self.grace_period,
                    reduction_factor=self.reduction_factor)


AsyncHyperBandScheduler = ASHAScheduler


class MedianStoppingRule(_WithMetric):
    """Stops a trial whose best result is worse than the median of the other trials' running
    means at the same time (ray.tune.schedulers.MedianStoppingRule)."""

    def __init__(self, time_attr="time_total_s", metric=None, mode=None, grace_period=60.0,
                 min_samples_required=3):
        self.time_attr, self.metric, self.mode = time_attr, metric, mode
        self.grace_period, self.min_samples_required = grace_period, min_samples_required

    def to_spec(self):
        return dict(self._base("median_stopping"), grace_period=self.grace_period,
                    min_samples_required=self.min_samples_required)


class PopulationBasedTraining(_WithMetric):
    """Population Based Training (ray.tune.schedulers.PopulationBasedTraining): every
    perturbation_interval, a trial of the bottom quantile restarts from the latest checkpoint of
    a trial of the top quantile (exploit) with that trial's config perturbed (explore:
    hyperparam_mutations' lists move to a neighbour, numbers are multiplied by 1.2 or 0.8, or
    resampled with resample_probability)."""

    def __init__(self, time_attr="time_total_s", metric=None, mode=None,
                 perturbation_interval=60.0, hyperparam_mutations=None, quantile_fraction=0.25,
                 resample_probability=0.25):
        if not hyperparam_mutations:
            raise ValueError("PopulationBasedTraining needs hyperparam_mutations")
        for key, spec in hyperparam_mutations.items():
            if callable(spec):
                raise ValueError(f"hyperparam_mutations[{key!r}]: a function runs on the "
                                 "driver; give a list or a search domain (tune.uniform, ...)")
        self.time_attr, self.metric, self.mode = time_attr, metric, mode
        self.perturbation_interval = perturbation_interval
        self.hyperparam_mutations = {k: list(v) if isinstance(v, (list, tuple)) else v
                                     for k, v in hyperparam_mutations.items()}
        self.quantile_fraction = quantile_fraction
        self.resample_probability = resample_probability

    def to_spec(self):
        return dict(self._base("pbt"), perturbation_interval=self.perturbation_interval,
                    hyperparam_mutations=self.hyperparam_mutations,
                    quantile_fraction=self.quantile_fraction,
                    resample_probability=self.resample_probability)
