"""trainyard.train (issue 15): fit() ships a function defined in the user's script (under a
`__main__` guard) with its working directory, runs it on the cluster's workers, streams
progress, and returns a Result with Ray Train's fields; a failing rank raises
TrainingFailedError with its error and log tail; quality gates name the metric. Real server,
agent and workers; the script is run as a user would run it."""
import json
import os
import signal
import subprocess
import time
import textwrap

import harness

SCRIPT = textwrap.dedent("""\
    import json, os, sys, tempfile
    import trainyard.train as train
    from trainyard.train import (Checkpoint, CheckpointConfig, DataParallelTrainer, RunConfig,
                                 ScalingConfig)

    import helper  # a module of the working directory: it travels too

    def train_func(config):
        ctx = train.get_context()
        shard = train.get_dataset_shard(list(range(10)))
        assert train.get_checkpoint() is None
        for epoch in range(config["epochs"]):
            d = tempfile.mkdtemp()
            with open(os.path.join(d, f"rank{ctx.get_world_rank()}.txt"), "w") as f:
                f.write(f"epoch {epoch} shard {shard}")
            print(f"epoch {epoch} rank {ctx.get_world_rank()}/{ctx.get_world_size()} "
                  f"{ctx.get_experiment_name()}", flush=True)
            if config.get("fail") and ctx.get_world_rank() == 1:
                raise ValueError("rank one gives up")
            if config.get("hang"):
                import time
                time.sleep(600)
            train.report({"loss": helper.loss(epoch), "accuracy": 0.5 + 0.2 * epoch,
                           "step": epoch}, checkpoint=Checkpoint.from_directory(d))

    if __name__ == "__main__":
        mode = sys.argv[1]
        trainer = DataParallelTrainer(
            train_func, train_loop_config={"epochs": 3, "fail": mode == "fail",
                                           "hang": mode == "hang"},
            scaling_config=ScalingConfig(num_workers=2),
            run_config=RunConfig(name="quick", checkpoint_config=CheckpointConfig(
                num_to_keep=2, checkpoint_score_attribute="accuracy")))
        try:
            result = trainer.fit(assertions=["accuracy>=0.99"] if mode == "gate" else ())
        except train.TrainingFailedError as e:
            print(json.dumps({"failed": str(e), "rank": e.rank}))
            sys.exit(3)
        except train.MetricAssertionError as e:
            print(json.dumps({"gate": str(e)}))
            sys.exit(4)
        with result.checkpoint.as_directory() as d:
            files = {n: open(os.path.join(d, n)).read() for n in sorted(os.listdir(d))}
        print(json.dumps({"metrics": result.metrics, "files": files, "error": result.error,
                          "path": result.path, "job": result.job_id,
                          "best": [m["accuracy"] for _, m in result.best_checkpoints],
                          "history": len(result._history)}))
    """)


def run_script(server, tmp_path, mode, popen=False):
    d = tmp_path / "proj"
    d.mkdir(exist_ok=True)
    (d / "train.py").write_text(SCRIPT)
    (d / "helper.py").write_text("def loss(epoch):\n    return 1.0 / (epoch + 1)\n")
    env = dict(os.environ, TRAINYARD_SERVER=server.url, TRAINYARD_TOKEN=server.admin_token,
               PYTHONPATH=os.path.join(harness.SOURCE_DIR, "worker", "python"),
               TRAINYARD_WORKER_PYTHON="/usr/bin/python3",
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    if popen:
        return subprocess.Popen(["/usr/bin/python3", "train.py", mode], cwd=d, env=env,
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return subprocess.run(["/usr/bin/python3", "train.py", mode], cwd=d, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)


def test_fit_runs_the_script_function_and_returns_a_result(server, agent_factory, tmp_path):
    agent_factory(cpus=2)
    r = run_script(server, tmp_path, "ok")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["metrics"] == {"loss": 1 / 3, "accuracy": 0.9, "step": 2}, out
    assert out["error"] is None
    assert out["files"] == {"rank0.txt": "epoch 2 shard [0, 2, 4, 6, 8]",
                            "rank1.txt": "epoch 2 shard [1, 3, 5, 7, 9]"}, out
    assert out["best"] == [0.7, 0.9], out  # as Ray orders them: the best last
    assert out["history"] == 3
    assert out["path"].endswith(f"/api/v1/jobs/{out['job']}")
    # Progress: a line per report, and the workers' lines.
    assert r.stderr.count("[report]") == 3, r.stderr
    assert "(rank 1) epoch 2 rank 1/2 quick" in r.stderr, r.stderr
    assert "uploaded)" in r.stderr, r.stderr
    # The same directory again: neither packed nor sent (the server still holds its package).
    r = run_script(server, tmp_path, "ok")
    assert r.returncode == 0 and "unchanged)" in r.stderr, r.stderr


def test_failing_rank_raises_training_failed_error_with_its_log_tail(server, agent_factory,
                                                                     tmp_path):
    agent_factory(cpus=2)
    r = run_script(server, tmp_path, "fail")
    assert r.returncode == 3, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["rank"] == 1, out
    assert "ValueError: rank one gives up" in out["failed"], out
    assert "epoch 0 rank 1/2" in out["failed"], out


def test_quality_gate_in_fit_names_the_metric_and_value(server, agent_factory, tmp_path):
    agent_factory(cpus=2)
    r = run_script(server, tmp_path, "gate")
    assert r.returncode == 4, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert "accuracy>=0.99: accuracy is 0.9" in out["gate"], out


def test_ctrl_c_stops_the_job(server, agent_factory, tmp_path):
    agent_factory(cpus=2)
    p = run_script(server, tmp_path, "hang", popen=True)
    try:
        deadline = time.time() + 60
        jobs = []
        while time.time() < deadline:
            jobs = server.request("GET", "/api/v1/jobs").json["jobs"]
            if jobs and jobs[0]["status"] == "RUNNING":
                break
            time.sleep(0.1)
        assert jobs and jobs[0]["status"] == "RUNNING", jobs
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode != 0 and "KeyboardInterrupt" in err, err[-2000:]
    assert f"stopping job {jobs[0]['id']}" in err, err[-2000:]
    done = server.wait_job(jobs[0]["id"], {"STOPPED"})
    assert done["status"] == "STOPPED"


def test_job_submission_client_submits_a_directory_follows_and_stops(server, agent_factory,
                                                                     tmp_path):
    import sys
    sys.path.insert(0, os.path.join(harness.SOURCE_DIR, "worker", "python"))
    from trainyard.job_submission import JobSubmissionClient
    agent_factory(cpus=2)
    d = tmp_path / "nb"
    d.mkdir()
    (d / "hello.py").write_text("import sys, time\nprint('hello from', sys.argv[1], flush=True)\n"
                                "time.sleep(float(sys.argv[2]))\n")
    client = JobSubmissionClient(server.url, server.admin_token)
    job = client.submit_job(entrypoint=["/usr/bin/python3", "hello.py", "notebook", "0"],
                            working_dir=str(d), name="nb")
    assert server.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    assert client.get_job_status(job) == "SUCCEEDED"
    assert "hello from notebook" in client.get_job_logs(job)
    long = client.submit_job(entrypoint=["/usr/bin/python3", "hello.py", "again", "600"],
                             working_dir=str(d), name="nb-long")
    assert [j.submission_id for j in client.list_jobs()][:2] == [long, job]
    server.wait_job(long, {"RUNNING"})
    client.stop_job(long)
    assert server.wait_job(long, {"STOPPED"})["status"] == "STOPPED"


TF_SCRIPT = """\
import json, os
import trainyard.train as train
from trainyard.train import ScalingConfig
from trainyard.train.tensorflow import TensorflowTrainer


def train_func():
    cfg = json.loads(os.environ["TF_CONFIG"])
    train.report({"task_index": cfg["task"]["index"],
                  "workers": len(cfg["cluster"]["worker"])})


if __name__ == "__main__":
    r = TensorflowTrainer(train_func, scaling_config=ScalingConfig(num_workers=2)).fit()
    print(json.dumps(r.metrics))
"""


def test_tensorflow_trainer_workers_get_tf_config(server, agent_factory, tmp_path):
    agent_factory(cpus=2)
    d = tmp_path / "tf"
    d.mkdir()
    (d / "train.py").write_text(TF_SCRIPT)
    env = dict(os.environ, TRAINYARD_SERVER=server.url, TRAINYARD_TOKEN=server.admin_token,
               PYTHONPATH=os.path.join(harness.SOURCE_DIR, "worker", "python"),
               TRAINYARD_WORKER_PYTHON="/usr/bin/python3",
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    r = subprocess.run(["/usr/bin/python3", "train.py"], cwd=d, env=env, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"task_index": 0, "workers": 2}
    job = server.request("GET", "/api/v1/jobs").json["jobs"][0]
    assert job["spec"]["backend"] == "tensorflow"
