"""trainyard.tune's driver-side API (issue 25, docs/python-api.md): tune.Callback fed from the
server's /stream websocket for a sweep's trials and for a plain fit() (RunConfig(callbacks=)),
RunConfig(stop={...}) on a plain fit() decided on the server (run_config.stop, the job ends
STOPPED with the reason as its event), a callable stop decided on the driver, OptunaSearch on
the driver, a searched scaling_config, and ResultGrid's errors and get_dataframe. One cluster, one driver script per test,
plain-Python trainables (no torch)."""
import json
import os
import subprocess
import textwrap

import harness

DRIVER = textwrap.dedent("""
    import json, sys, time
    from trainyard import tune
    from trainyard.train import DataParallelTrainer, RunConfig, ScalingConfig

    class Recorder(tune.Callback):
        def __init__(self):
            self.calls = []

        def setup(self, stop=None, num_samples=None, total_num_samples=None, **info):
            self.calls.append(["setup", total_num_samples])

        def on_trial_start(self, iteration, trials, trial, **info):
            self.calls.append(["start", trial.trial_id])

        def on_trial_result(self, iteration, trials, trial, result, **info):
            self.calls.append(["result", trial.trial_id, result["acc"]])

        def on_trial_complete(self, iteration, trials, trial, **info):
            self.calls.append(["complete", trial.trial_id])

        def on_trial_error(self, iteration, trials, trial, **info):
            self.calls.append(["error", trial.trial_id])

        def on_experiment_end(self, trials, **info):
            self.calls.append(["end", len(trials)])

    def climb(config):
        # acc 1, 2, 3, ...; once at config["hold"] it waits for the stop.
        if config.get("fail"):
            raise RuntimeError("this trial fails")
        for i in range(1, 4):
            tune.report({"acc": float(config.get("q", 1) * i)})
            if i == config.get("hold"):
                time.sleep(300)

    def fit(stop, hold):
        rec = Recorder()
        t = DataParallelTrainer(climb, train_loop_config={"hold": hold},
                                scaling_config=ScalingConfig(num_workers=1),
                                run_config=RunConfig(name="stop-" + sys.argv[1], verbose=0,
                                                     stop=stop, callbacks=[rec]))
        r = t.fit()
        rec.calls = [c for c in rec.calls if c[0] != "start"] + [["job", t.job_id]]
        return {"calls": rec.calls, "acc": r.metrics["acc"], "error": r.error is not None}

    if __name__ == "__main__":
        out = {}
        if sys.argv[1] == "fit":
            out["server"] = fit({"acc": 2}, 2)  # decided on the server
            out["driver"] = fit(lambda trial_id, result: result["acc"] >= 2, 2)
        else:
            rec = Recorder()
            grid = tune.Tuner(climb, param_space={"fail": tune.grid_search([False, True])},
                              tune_config=tune.TuneConfig(metric="acc", mode="max",
                                                          max_concurrent_trials=1),
                              run_config=RunConfig(name="cb", verbose=0,
                                                   callbacks=[rec])).fit()
            df = grid.get_dataframe()
            out["sweep"] = {"calls": rec.calls, "errors": len(grid.errors),
                            "df": sorted(df.columns), "rows": len(df)}
            rec = Recorder()
            search = tune.OptunaSearch(seed=3)
            grid = tune.Tuner(climb, param_space={"q": tune.uniform(0.5, 2.0), "n": {"k": 1}},
                              tune_config=tune.TuneConfig(metric="acc", mode="max",
                                                          num_samples=3, search_alg=search,
                                                          max_concurrent_trials=2),
                              run_config=RunConfig(name="opt", verbose=0,
                                                   callbacks=[rec])).fit()
            told = [t.value for t in search.study.trials]
            out["optuna"] = {"n": len(grid), "told": told,
                             "acc": [r.metrics["acc"] for r in grid],
                             "q": [r.config["q"] for r in grid],
                             "k": [r.config["n"]["k"] for r in grid],
                             "best": grid.get_best_result().config["q"],
                             "calls": sorted(c[0] for c in rec.calls)}
            # scaling_config searched as in Ray: each trial's job gets its own.
            t = DataParallelTrainer(climb, scaling_config=ScalingConfig(num_workers=1))
            grid = tune.Tuner(t, param_space={
                "train_loop_config": {"q": 2},
                "scaling_config": ScalingConfig(num_workers=tune.grid_search([2, 1]))},
                tune_config=tune.TuneConfig(metric="acc", mode="max"),
                run_config=RunConfig(name="sc", verbose=0)).fit()
            out["scaling"] = [[r.config["scaling_config"]["num_workers"], r.job_id,
                               r.metrics["acc"]] for r in grid]
        print(json.dumps(out))
""")


def _drive(server, tmp_path, what):
    d = tmp_path / "proj"
    d.mkdir(exist_ok=True)
    (d / "driver.py").write_text(DRIVER)
    env = dict(os.environ, TRAINYARD_SERVER=server.url, TRAINYARD_TOKEN=server.admin_token,
               PYTHONPATH=os.path.join(harness.SOURCE_DIR, "worker", "python"),
               TRAINYARD_WORKER_PYTHON="/usr/bin/python3", XDG_CACHE_HOME=str(tmp_path / "cache"))
    r = subprocess.run(["/usr/bin/python3", "driver.py", what], cwd=d, env=env, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_fit_stops_on_run_config_stop_on_the_server_or_the_driver_and_feeds_callbacks(
        server, agent_factory, tmp_path):
    # Bad input: a 400 naming the field.
    r = server.request("POST", "/api/v1/jobs", {"entrypoint": ["true"],
                                                "run_config": {"stop": {"acc": "high"}}})
    assert r.status == 400 and r.json["errors"][0]["field"] == "run_config.stop.acc", r.json
    r = server.request("POST", "/api/v1/jobs", {"entrypoint": ["true"],
                                                "run_config": {"stop": {}}})
    assert r.status == 400 and r.json["errors"][0]["field"] == "run_config.stop", r.json
    agent_factory()
    out = _drive(server, tmp_path, "fit")
    for how in ("server", "driver"):
        o = out[how]
        job_id = o["calls"].pop()[1]
        # The reports reached the callbacks live: the job waits at acc 2 until it is stopped.
        assert o["calls"] == [["setup", 1], ["result", job_id, 1.0], ["result", job_id, 2.0],
                              ["complete", job_id], ["end", 1]], o
        assert o["acc"] == 2.0 and not o["error"], o
        job = server.request("GET", f"/api/v1/jobs/{job_id}").json
        assert job["status"] == "STOPPED", job
        events = server.request("GET", f"/api/v1/jobs/{job_id}/events").json["events"]
        msgs = [e.get("message") or "" for e in events]
        if how == "server":
            assert "stop: acc 2 >= 2" in msgs, events
        else:
            assert not any(m.startswith("stop: ") for m in msgs), events


def test_tuner_callbacks_from_the_stream_result_grid_errors_and_optuna_search(
        server, agent_factory, tmp_path):
    # A searched scaling_config is validated as a job's: a 400 naming the field.
    r = server.request("POST", "/api/v1/sweeps", {
        "job": {"entrypoint": ["true"]},
        "param_space": {"scaling_config": {"num_workers": {"grid_search": [1, 0]}}}})
    assert r.status == 400, r.json
    assert r.json["errors"][0]["field"] == "param_space.scaling_config.num_workers", r.json
    agent_factory()
    out = _drive(server, tmp_path, "tune")
    s = out["sweep"]
    # Trial 0 climbs to 3 and completes, then trial 1 (max_concurrent_trials 1) fails.
    assert s["calls"] == [["setup", 2], ["start", 0], ["result", 0, 1.0], ["result", 0, 2.0],
                          ["result", 0, 3.0], ["complete", 0], ["start", 1], ["error", 1],
                          ["end", 2]], s
    assert s["errors"] == 1 and s["rows"] == 2 and "config/fail" in s["df"], s
    o = out["optuna"]
    assert o["n"] == 3 and o["k"] == [1, 1, 1], o
    assert all(0.5 <= q <= 2.0 for q in o["q"]), o
    # Optuna was told each trial's final acc (3 * q).
    assert o["told"] == o["acc"] and all(abs(a - 3 * q) < 1e-9 for a, q in zip(o["acc"], o["q"]))
    assert o["best"] == max(o["q"]), o
    assert o["calls"] == sorted(["setup", "end"] + ["start", "complete"] * 3 +
                                ["result"] * 9), o
    for n, job_id, acc in out["scaling"]:
        job = server.request("GET", f"/api/v1/jobs/{job_id}").json
        assert job["spec"]["scaling_config"]["num_workers"] == n and acc == 6.0, job
        assert "scaling_config" not in job["spec"]["train_loop_config"], job
        workers = server.request("GET", f"/api/v1/jobs/{job_id}/workers").json["workers"]
        assert sorted(w["rank"] for w in workers) == list(range(n)), workers
    assert [n for n, _, _ in out["scaling"]] == [2, 1], out
