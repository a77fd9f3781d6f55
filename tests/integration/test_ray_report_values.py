"""Ray parity (issue 24, point 2): train.report() takes any JSON-serialisable value, as Ray's
does (report({"phase": "probe"})). Through a real server, agent and two plain Python workers:
the values that are not numbers come back in Result.metrics, metrics_history /
metrics_dataframe, the API's metric points and job result, and the CLI's metrics table; a value
that is not JSON-serialisable is refused in the worker with an error naming its key."""
import json
import os
import subprocess

import harness

SCRIPT = """\
import json
from trainyard import train
from trainyard.train import DataParallelTrainer, RunConfig, ScalingConfig


def train_func(config):
    train.report({"phase": "probe", "loss": 1.0, "tags": ["a", "b"], "opt": {"lr": 0.1},
                  "ok": True, "none": None})
    try:
        train.report({"model": object()})
        refused = "accepted"
    except Exception as e:
        refused = f"{type(e).__name__}: {e}"
    train.report({"phase": "train", "loss": 0.5, "refused": refused})


if __name__ == "__main__":
    result = DataParallelTrainer(train_func, scaling_config=ScalingConfig(num_workers=2),
                                 run_config=RunConfig(verbose=1)).fit()
    try:
        result.assert_metrics("phase>0")
        gate = None
    except Exception as e:
        gate = str(e)
    try:
        phases = result.metrics_dataframe["phase"].tolist()
    except ImportError:
        phases = [r["phase"] for r in result.metrics_history]
    print(json.dumps({"metrics": result.metrics, "history": result.metrics_history,
                      "phases": phases, "gate": gate, "job": result.job_id}))
"""


def test_report_takes_any_json_value(server, agent_factory, tmp_path):
    agent_factory(cpus=2)
    d = tmp_path / "proj"
    d.mkdir()
    (d / "train.py").write_text(SCRIPT)
    env = dict(os.environ, TRAINYARD_SERVER=server.url, TRAINYARD_TOKEN=server.admin_token,
               PYTHONPATH=os.path.join(harness.SOURCE_DIR, "worker", "python"),
               TRAINYARD_WORKER_PYTHON="/usr/bin/python3", XDG_CACHE_HOME=str(tmp_path / "c"))
    r = subprocess.run(["/usr/bin/python3", "train.py"], cwd=d, env=env, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    refused = out["metrics"]["refused"]
    assert refused.startswith("TrainyardError: metrics: 'model' is a object") \
        and "JSON-serialisable" in refused, refused
    assert out["metrics"]["phase"] == "train" and out["metrics"]["loss"] == 0.5, out
    assert out["phases"] == ["probe", "train"], out
    assert out["gate"] == "quality gate missed: phase>0: phase is 'train', not a number", out
    first = out["history"][0]
    assert first["tags"] == ["a", "b"] and first["opt"] == {"lr": 0.1}, first
    assert first["ok"] is True and first["none"] is None, first
    line = next(ln for ln in r.stderr.splitlines() if "[report]" in ln)  # fit()'s progress
    assert "phase=probe" in line and "tags=['a', 'b']" in line, r.stderr[-3000:]

    job = out["job"]
    points = server.request("GET", f"/api/v1/jobs/{job}/metrics?name=phase,loss").json["metrics"]
    assert sorted((p["rank"], p["name"], p["value"]) for p in points) == [
        (rank, name, value) for rank in (0, 1)
        for name, value in (("loss", 0.5), ("loss", 1.0), ("phase", "probe"), ("phase", "train"))]
    assert server.request("GET", f"/api/v1/jobs/{job}").json["result"]["metrics"] == \
        {"phase": "train", "loss": 0.5, "refused": refused}  # rank 0's last report
    cli = harness.run_cli(server, "metrics", str(job), "--name", "phase")
    assert cli.returncode == 0, cli.stderr
    assert "probe" in cli.stdout and "train" in cli.stdout, cli.stdout
