"""Sweeps (Ray Tune on the gang scheduler, docs/sweeps.md): a server object whose trials are
ordinary jobs, submitted by the leader while fewer than max_concurrent_trials are unfinished,
and stopped by the trial scheduler (ASHA, decided in C on the server) as their reports arrive,
with the reason as the job's event. Plain-Python trials, no torch."""
import datetime
import json
import os
import signal
import subprocess
import textwrap

import harness

# acc = q * iteration. Trials worse than 0.25 wait after their first report: only ASHA's stop
# ends them (so the test needs no timing), the others run to max_t.
TRIAL = textwrap.dedent("""
    import time, trainyard
    q = float(trainyard.get_context().config["q"])
    for i in range(1, 5):
        trainyard.report({"acc": q * i})
        if q < 0.25:
            time.sleep(300)
""")


def _ts(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _sweep(server, body, status=201):
    r = server.request("POST", "/api/v1/sweeps", body)
    assert r.status == status, r
    return r.json


def test_sweep_refuses_bad_input_and_asha_stops_the_worst_trials_with_the_reason(
        server, agent_factory):
    work = harness.make_tmpdir("ty-sweep-")
    with open(os.path.join(work, "trial.py"), "w") as f:
        f.write(TRIAL)
    job = {"entrypoint": ["/usr/bin/python3", "trial.py"], "working_dir": work}
    asha = {"type": "asha", "time_attr": "training_iteration", "max_t": 4, "grace_period": 1,
            "reduction_factor": 2}
    good = {"name": "grid", "job": job, "param_space": {"q": {"grid_search": [0.4, 0.3, 0.2, 0.1]}},
            "tune_config": {"metric": "acc", "mode": "max", "max_concurrent_trials": 2,
                            "scheduler": asha}}
    # Bad input: a 400 problem naming the field.
    for change, field in [({"param_space": {}}, "param_space"),
                          ({"param_space": {"q": {"uniform": [1, 0]}}}, "param_space.q.uniform"),
                          ({"tune_config": {**good["tune_config"], "mode": "median"}},
                           "tune_config.mode"),
                          ({"tune_config": {**good["tune_config"],
                                            "scheduler": {"type": "hyperband"}}},
                           "tune_config.scheduler.type"),
                          ({"tune_config": {"scheduler": asha}}, "tune_config.metric"),
                          ({"tune_config": {**good["tune_config"], "stop": {"acc": "high"}}},
                           "tune_config.stop.acc"),
                          ({"job": {**job, "backend": "mxnet"}}, "job.backend"),
                          ({"extra": 1}, "extra")]:
        problem = _sweep(server, {**good, **change}, status=400)
        assert problem["errors"][0]["field"] == field, problem
    assert server.request("GET", "/api/v1/sweeps").json["sweeps"] == []

    agent_factory(cpus=4)
    sweep = _sweep(server, good)
    assert [t["config"] for t in sweep["trials"]] == [{"q": q} for q in (0.4, 0.3, 0.2, 0.1)]
    sid = sweep["id"]
    harness.wait_for(lambda: server.request("GET", f"/api/v1/sweeps/{sid}").json["status"]
                     != "RUNNING", timeout=120, what="the sweep to finish")
    sweep = server.request("GET", f"/api/v1/sweeps/{sid}").json
    assert sweep["status"] == "SUCCEEDED", sweep
    trials = sweep["trials"]
    jobs = [server.request("GET", f"/api/v1/jobs/{t['job_id']}").json for t in trials]
    # The best trial ran to max_t (its own end, or ASHA's stop at max_t); a cutoff stopped the two
    # worst at the first rung, with Ray's cutoffs: the 0.5 quantile of [0.3, 0.4] for whichever of
    # them reported first, then of [0.3, 0.4] and that one's result for the other.
    assert trials[0]["last_t"] == 4 and trials[0]["best_metric"] == 1.6, trials[0]
    assert trials[0]["stopped_by"] in (None, "ASHA: reached max_t 4"), trials[0]
    assert jobs[0]["status"] in ("SUCCEEDED", "STOPPED"), jobs[0]
    reasons = {2: "ASHA rung 0 (t=1): acc 0.2 < cutoff {}",
               3: "ASHA rung 0 (t=1): acc 0.1 < cutoff {}"}
    assert {trials[2]["stopped_by"], trials[3]["stopped_by"]} in (
        {reasons[2].format(0.35), reasons[3].format(0.3)},
        {reasons[3].format(0.35), reasons[2].format(0.3)}), (trials[2], trials[3])
    for i in reasons:
        reason = trials[i]["stopped_by"]
        assert trials[i]["status"] == "STOPPED" and jobs[i]["status"] == "STOPPED", jobs[i]
        events = server.request("GET", f"/api/v1/jobs/{jobs[i]['id']}/events").json["events"]
        assert reason in [e["message"] for e in events], events
        assert jobs[i]["spec"]["train_loop_config"] == trials[i]["config"]
    assert sweep["best_trial"]["index"] == 0
    # max_concurrent_trials: never more than 2 trials' jobs unfinished at once.
    spans = [(_ts(j["created_at"]), _ts(j["finished_at"])) for j in jobs]
    for start, _ in spans:
        assert sum(1 for s, e in spans if s <= start < e) <= 2, spans
    # Stopping a finished sweep: 409.
    assert server.request("POST", f"/api/v1/sweeps/{sid}/stop").status == 409


DRIVER = textwrap.dedent("""
    import json, os, sys, time
    from trainyard import tune
    from trainyard.train import RunConfig

    def train_fn(config):
        while not os.path.exists(config["go"]):  # the test lets trial 0 go once it restarted
            time.sleep(0.05)
        for i in range(1, 4):
            tune.report({"acc": config["q"] * i})
            if i == 2:  # RunConfig(stop=) stops it here
                time.sleep(300)

    if __name__ == "__main__":
        if sys.argv[1] == "submit":
            tune.Tuner(train_fn, param_space={"q": tune.grid_search([1, 2]), "go": sys.argv[2]},
                       tune_config=tune.TuneConfig(metric="acc", mode="max",
                                                   max_concurrent_trials=1),
                       run_config=RunConfig(name="py-sweep", verbose=0,
                                            stop={"training_iteration": 2})).fit()
        else:
            grid = tune.Tuner.restore(sys.argv[2]).fit()
            best = grid.get_best_result()
            print(json.dumps({"n": len(grid), "best": best.config["q"], "acc": best.metrics["acc"],
                              "errors": len(grid.errors), "stopped": [r.stopped_by for r in grid],
                              "configs": [r.config["q"] for r in grid]}))
""")


def test_python_tuner_sweep_outlives_its_driver_and_a_server_kill_and_stops_on_run_config_stop(
        server, agent_factory, tmp_path):
    agent_factory()
    d = tmp_path / "proj"
    d.mkdir()
    (d / "driver.py").write_text(DRIVER)
    shared = harness.make_tmpdir("ty-sweep-go-")
    os.chmod(shared, 0o777)
    go = os.path.join(shared, "go")
    env = dict(os.environ, TRAINYARD_SERVER=server.url, TRAINYARD_TOKEN=server.admin_token,
               PYTHONPATH=os.path.join(harness.SOURCE_DIR, "worker", "python"),
               TRAINYARD_WORKER_PYTHON="/usr/bin/python3", XDG_CACHE_HOME=str(tmp_path / "cache"))
    driver = subprocess.Popen(["/usr/bin/python3", "driver.py", "submit", go], cwd=d, env=env,
                              text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def trial_running():
        sweeps = server.request("GET", "/api/v1/sweeps").json["sweeps"]
        if not sweeps:
            return None
        s = server.request("GET", f"/api/v1/sweeps/{sweeps[0]['id']}").json
        return s if s["trials"][0]["status"] == "RUNNING" else None

    try:
        sweep = harness.wait_for(trial_running, timeout=60, what="trial 0 to run")
    finally:
        driver.kill()  # the driver dies; the sweep does not
        out, err = driver.communicate()
    assert sweep["name"] == "py-sweep" and sweep["trials"][1]["status"] == "PENDING", sweep
    server.stop(signal.SIGKILL)
    server.start()
    with open(go, "w"):
        pass
    r = subprocess.run(["/usr/bin/python3", "driver.py", "restore", str(sweep["id"])], cwd=d,
                       env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    stop = "stop: training_iteration 2 >= 2"
    assert result == {"n": 2, "best": 2, "acc": 4, "errors": 0, "stopped": [stop, stop],
                      "configs": [1, 2]}, result
    # max_concurrent_trials 1: trial 1 was submitted after trial 0 finished.
    s = server.request("GET", f"/api/v1/sweeps/{sweep['id']}").json
    assert s["status"] == "SUCCEEDED", s
    j0, j1 = (server.request("GET", f"/api/v1/jobs/{t['job_id']}").json for t in s["trials"])
    assert _ts(j1["created_at"]) >= _ts(j0["finished_at"]), (j0, j1)
    # The CLI's view of it.
    cli = harness.run_cli(server, "sweep", "get", str(sweep["id"]))
    assert cli.returncode == 0 and "SUCCEEDED" in cli.stdout and "best trial 1" in cli.stdout, cli
    cli = harness.run_cli(server, "sweep", "stop", str(sweep["id"]))
    assert cli.returncode == 1 and "finished" in cli.stderr, cli


# PBT: every report checkpoints its iteration. The first job of the weak trial (q 0.1) keeps
# reporting until PBT restarts it from the strong trial's checkpoint; a restored job reports once
# (less than a perturbation interval) and ends.
PBT_TRIAL = textwrap.dedent("""
    import os, tempfile, time, trainyard
    q = float(trainyard.get_context().config["q"])
    start = trainyard.get_checkpoint()
    i = int(open(os.path.join(start, "i")).read()) if start else 0
    while True:
        i += 1
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "i"), "w") as f:
            f.write(str(i))
        trainyard.report({"acc": q * i, "restored_from": float(bool(start))}, checkpoint=d)
        if start or (q > 0.5 and i >= 4):
            break
        time.sleep(0.1 if q < 0.5 else 0)
""")


def test_pbt_restarts_the_weak_trial_from_the_strong_trials_checkpoint(server, agent_factory):
    work = harness.make_tmpdir("ty-sweep-pbt-")
    with open(os.path.join(work, "trial.py"), "w") as f:
        f.write(PBT_TRIAL)
    agent_factory(cpus=4)
    pbt = {"type": "pbt", "time_attr": "training_iteration", "perturbation_interval": 2,
           "quantile_fraction": 0.5, "resample_probability": 0,
           "hyperparam_mutations": {"q": [0.1, 1.0]}}
    sweep = _sweep(server, {"name": "pbt", "job": {"entrypoint": ["/usr/bin/python3", "trial.py"],
                                                   "working_dir": work},
                            "param_space": {"q": {"grid_search": [1.0, 0.1]}},
                            "tune_config": {"metric": "acc", "mode": "max", "scheduler": pbt,
                                            "seed": 3}})
    sid = sweep["id"]
    harness.wait_for(lambda: server.request("GET", f"/api/v1/sweeps/{sid}").json["status"]
                     != "RUNNING", timeout=120, what="the sweep to finish")
    s = server.request("GET", f"/api/v1/sweeps/{sid}").json
    assert s["status"] == "SUCCEEDED", s
    strong, weak = s["trials"]
    jobs = server.request("GET", "/api/v1/jobs?name=pbt/trial-1").json["jobs"]
    old = min(jobs, key=lambda j: j["id"])
    new = server.request("GET", f"/api/v1/jobs/{weak['job_id']}").json
    assert new["id"] != old["id"], jobs
    assert old["status"] == "STOPPED", old
    events = server.request("GET", f"/api/v1/jobs/{old['id']}/events").json["events"]
    assert any(e["message"] and e["message"].startswith("PBT (t=") and "restarting from trial 0"
               in e["message"] for e in events), events
    # Exploit: the new job resumed from a checkpoint of the strong trial's job; explore: its q is
    # a neighbour of the strong trial's in the mutation list.
    ckpt = server.request("GET", f"/api/v1/checkpoints/{new['spec']['resume_from_checkpoint']}")
    assert ckpt.json["job_id"] == strong["job_id"], ckpt.json
    assert new["status"] == "SUCCEEDED" and new["result"]["metrics"]["restored_from"] == 1, new
    assert weak["config"]["q"] in (0.1, 1.0) and new["spec"]["train_loop_config"] == weak["config"]
