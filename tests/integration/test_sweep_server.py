"""Sweeps on the server (issue 25, docs/sweeps.md), what test_sweeps.py does not cover: a sweep
survives kill -9 of the server in the middle of an ASHA rung, a normal job submitted while the
sweep fills the cluster starts as soon as one trial ends (before the sweep's next trial, at
equal priority), and the bad input found only at run time, a metric no trial reports, is a sweep
event. Plain-Python trials that wait for files the test writes, so nothing depends on timing."""
import os
import signal
import textwrap

import harness

# Waits for <go>/a<q> before its first report (acc = q, ASHA's rung at t=1), then for <go>/b<q>
# before its second (acc = 2q, max_t).
TRIAL = textwrap.dedent("""
    import os, sys, time, trainyard
    q = trainyard.get_context().config["q"]
    def wait(name):
        while not os.path.exists(os.path.join(sys.argv[1], name)):
            time.sleep(0.02)
    wait(f"a{q}")
    trainyard.report({"acc": q})
    wait(f"b{q}")
    trainyard.report({"acc": 2 * q})
""")


def _get(server, sid):
    r = server.request("GET", f"/api/v1/sweeps/{sid}")
    assert r.status == 200, r
    return r.json


def test_sweep_survives_a_server_kill_mid_rung_lets_a_job_in_and_says_its_metric_is_missing(
        server, agent_factory):
    work = harness.make_tmpdir("ty-sweep-srv-")
    go = os.path.join(work, "go")
    os.mkdir(go)
    os.chmod(go, 0o777)
    with open(os.path.join(work, "trial.py"), "w") as f:
        f.write(TRIAL)
    job = {"entrypoint": ["/usr/bin/python3", "trial.py", go], "working_dir": work}
    asha = {"type": "asha", "time_attr": "training_iteration", "max_t": 2, "grace_period": 1,
            "reduction_factor": 2}
    body = {"name": "mid-rung", "job": job,
            "param_space": {"q": {"grid_search": [4, 1, 3, 2]}},
            "tune_config": {"metric": "acc", "mode": "max", "max_concurrent_trials": 2,
                            "scheduler": asha}}
    # A metric no report can carry (the one unknown metric knowable at submission): a 400.
    r = server.request("POST", "/api/v1/sweeps", {**body, "tune_config": {
        **body["tune_config"], "metric": "m" * 257}})
    assert r.status == 400 and r.json["errors"][0]["field"] == "tune_config.metric", r

    def touch(name):
        with open(os.path.join(go, name), "w"):
            pass

    agent_factory(cpus=2)  # the sweep's two trials at once fill it
    r = server.request("POST", "/api/v1/sweeps", body)
    assert r.status == 201, r
    sid = r.json["id"]

    def trials(pred):
        s = _get(server, sid)
        return s if pred(s["trials"]) else None

    harness.wait_for(lambda: trials(lambda t: t[0]["status"] == t[1]["status"] == "RUNNING"),
                     timeout=60, what="trials 0 and 1 to run")
    # Trial 0 completes rung t=1 alone; the server is killed before trial 1 reports there.
    touch("a4")
    harness.wait_for(lambda: trials(lambda t: t[0]["last_t"] == 1), timeout=60,
                     what="trial 0's rung result to be read")
    server.stop(signal.SIGKILL)
    server.start()
    # A normal job, equal priority, while the sweep fills the node: it waits.
    normal = server.submit({"name": "normal", "entrypoint": [
        "/usr/bin/python3", "-c",
        f"import os, time\nwhile not os.path.exists({os.path.join(go, 'job')!r}): "
        "time.sleep(0.02)"]})["id"]
    assert server.request("GET", f"/api/v1/jobs/{normal}").json["status"] == "PENDING"
    # Trial 1 reports at the rung after the restart: ASHA stops it against trial 0's result
    # recorded before the kill.
    touch("a1")
    s = harness.wait_for(lambda: trials(lambda t: t[1]["stopped_by"] is not None), timeout=60,
                         what="ASHA to stop trial 1")
    assert s["trials"][1]["stopped_by"] == "ASHA rung 0 (t=1): acc 1 < cutoff 4", s["trials"][1]
    # The slot trial 1 frees goes to the job, not to the sweep's next trial.
    server.wait_job(normal, {"RUNNING"}, timeout=60)
    s = _get(server, sid)
    assert s["trials"][2]["status"] in ("PENDING", None), s["trials"][2]
    assert s["trials"][0]["status"] == "RUNNING", s["trials"][0]
    for name in ("job", "b4", "a3", "b3", "a2", "b2"):
        touch(name)
    harness.wait_for(lambda: _get(server, sid)["status"] != "RUNNING", timeout=120,
                     what="the sweep to finish")
    s = _get(server, sid)
    assert s["status"] == "SUCCEEDED" and s["events"] == [], s
    assert s["best_trial"]["index"] == 0 and s["best_trial"]["best_metric"] == 8, s
    started = {t["index"]: server.request("GET", f"/api/v1/jobs/{t['job_id']}").json["started_at"]
               for t in s["trials"]}
    assert server.request("GET", f"/api/v1/jobs/{normal}").json["started_at"] <= started[2]

    # A metric that no trial reports: one sweep event saying so, as the first report arrives.
    r = server.request("POST", "/api/v1/sweeps", {**body, "name": "no-loss",
                                                  "param_space": {"q": {"grid_search": [5]}},
                                                  "tune_config": {**body["tune_config"],
                                                                  "metric": "loss"}})
    assert r.status == 201, r
    sid = r.json["id"]
    touch("a5")
    event = harness.wait_for(lambda: _get(server, sid)["events"], timeout=60,
                             what="the sweep event about its metric")
    assert len(event) == 1 and event[0]["topic"] == "metric", event
    assert event[0]["message"] == ('tune_config.metric: trial 0 reported acc but no number named '
                                   '"loss"; the trial scheduler has nothing to compare until a '
                                   'trial reports it'), event
    touch("b5")
    harness.wait_for(lambda: _get(server, sid)["status"] != "RUNNING", timeout=60,
                     what="the sweep to finish")
    assert _get(server, sid)["events"] == event  # once
    cli = harness.run_cli(server, "sweep", "get", str(sid))
    assert cli.returncode == 0 and event[0]["message"] in cli.stdout, cli
