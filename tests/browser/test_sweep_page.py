"""Issue 25: the dashboard's sweep page. A finished ASHA sweep of four trials: the list links
to it; its trials table is sorted best first and re-sorts by the metric on a click; the
parallel-coordinates plot has a line per trial with the best marked and an axis per
hyperparameter plus the metric; the curves' chart draws every trial and ASHA's rungs."""
import os
import textwrap

from test_dashboard import PY, cluster, harness, run  # noqa: F401 (cluster is the fixture)

TRIAL = textwrap.dedent("""
    import trainyard
    c = trainyard.get_context().config
    for i in range(1, 5):
        trainyard.report({"acc": c["q"] * i})
""")


def test_sweep_page_sorts_trials_plots_hyperparameters_and_curves_with_rungs(cluster):  # noqa: F811
    s = cluster["server"]
    with open(os.path.join(cluster["work"], "sweep_trial.py"), "w") as f:
        f.write(TRIAL)
    r = s.request("POST", "/api/v1/sweeps", {
        "name": "page", "job": {"entrypoint": [PY, "sweep_trial.py"], "working_dir": cluster["work"]},
        "param_space": {"q": {"grid_search": [0.2, 0.4, 0.1, 0.3]}, "opt": {"lr": 0.01}},
        "tune_config": {"metric": "acc", "mode": "max", "max_concurrent_trials": 4,
                        "scheduler": {"type": "asha", "max_t": 4, "grace_period": 1,
                                      "reduction_factor": 2}}})
    assert r.status == 201, r
    sid = r.json["id"]
    harness.wait_for(lambda: s.request("GET", f"/api/v1/sweeps/{sid}").json["status"]
                     != "RUNNING", timeout=60, what="the sweep to finish")
    sweep = s.request("GET", f"/api/v1/sweeps/{sid}").json
    best = sweep["best_trial"]["index"]
    assert best == 1, sweep
    # Trials with equal metrics (ASHA may stop trial 0 at 0.2 while trial 2 reaches 0.1 * 2) stay
    # in trial order whichever way the table is sorted.
    by_metric = sorted(sweep["trials"], key=lambda t: (t["best_metric"], t["index"]))
    best_first = sorted(sweep["trials"], key=lambda t: (-t["best_metric"], t["index"]))
    got = run("sweep_page", cluster, cluster["viewer"], extra={"sweep": sid}, timeout=120)
    assert got["bestFirst"][0] == best and got["bestRow"] == best, got
    assert got["bestFirst"] == [t["index"] for t in best_first], (got, best_first)
    assert got["ascending"] == [t["index"] for t in by_metric], (got, by_metric)
    assert got["lines"] == 4 and got["bestLine"] == best, got
    assert got["axes"] == ["opt.lr", "q", "acc"], got
    assert got["chart"]["rungs"] == "1,2,4" and got["chart"]["best"] == str(best), got
    assert sorted(map(int, got["chart"]["trials"].split(","))) == [0, 1, 2, 3], got
