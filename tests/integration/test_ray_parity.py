"""Ray parity (issue 24): scripts written as Ray's documentation and the seeds write them, only
their imports changed, through a real server, agent and workers (plain Python workers, no
torch). One cluster runs the training side: Ray 1.9's Trainer (start / run returning every
worker's value / callbacks / save_checkpoint / load_checkpoint / latest_checkpoint /
shutdown), the seed's TorchTrainer(scaling_config=dict) + load_checkpoint + run, fit() resumed
from a Result's Checkpoint, best_checkpoints in Ray's order, metrics_dataframe without pandas,
TrainingFailedError from trainyard.train.base_trainer. The other runs Ray's Jobs SDK:
runtime_env, JobStatus, get_job_info, tail_job_logs, stop_job's booleans, delete_job, string
submission ids."""
import asyncio
import json
import os
import subprocess
import sys

import pytest

import harness

sys.path.insert(0, os.path.join(harness.SOURCE_DIR, "worker", "python"))

SCRIPT = """\
import json, os, sys
from trainyard import train
from trainyard.train import Trainer, Checkpoint, CheckpointConfig, RunConfig, ScalingConfig
from trainyard.train import DataParallelTrainer
from trainyard.train.base_trainer import TrainingFailedError
from trainyard.train.callbacks import JsonLoggerCallback, PrintCallback
from trainyard.train.torch import TorchTrainer

out = {}


def train_func(config):
    # Ray 1.9: report(**metrics), save_checkpoint(**state), load_checkpoint(), ranks.
    state = train.load_checkpoint() or {"epoch": -1}
    for epoch in range(state["epoch"] + 1, config["epochs"]):
        train.report(loss=1.0 / (epoch + 1), epoch=epoch)
        train.save_checkpoint(epoch=epoch, rank=train.world_rank())
    return {"rank": train.world_rank(), "local_rank": train.local_rank(),
            "world_size": train.world_size(), "resumed_from": state["epoch"]}


def train_loop_per_worker(config):
    # Ray 2: report(metrics, checkpoint=Checkpoint), get_checkpoint().
    import tempfile
    start = 0
    ck = train.get_checkpoint()
    if ck:
        with ck.as_directory() as d:
            start = int(open(os.path.join(d, "epoch")).read()) + 1
    if config.get("fail") and train.get_context().get_world_rank() == 1:
        raise ValueError("rank one gives up")
    for epoch in range(start, start + 3):
        d = tempfile.mkdtemp()
        if train.get_context().get_world_rank() == 0:
            with open(os.path.join(d, "epoch"), "w") as f:
                f.write(str(epoch))
        train.report({"loss": 1.0 / (epoch + 1), "epoch": epoch},
                     checkpoint=Checkpoint.from_directory(d))


if __name__ == "__main__":
    # Ray 1.9's Trainer, as its docs write it.
    trainer = Trainer(backend="tensorflow", num_workers=2)
    trainer.start()
    results = trainer.run(train_func, config={"epochs": 2},
                          callbacks=[JsonLoggerCallback(), PrintCallback()])
    out["run"] = results
    out["latest"] = trainer.latest_checkpoint
    with open(os.path.join(trainer.latest_run_dir, "results.json")) as f:
        out["json_log"] = json.load(f)
    trainer.shutdown()

    # The seed's resume: scaling_config as a dict, load_checkpoint before run.
    checkpoint = Checkpoint.from_dict({"epoch": 1})
    trainer = TorchTrainer(train_loop_per_worker=train_func, scaling_config={"num_workers": 2})
    trainer.start()
    trainer.load_checkpoint(checkpoint)
    out["seed_resume"] = trainer.run(train_func, config={"epochs": 3})
    out["seed_latest"] = trainer.latest_checkpoint

    # fit() resumed from a previous fit's Result.checkpoint; Ray's Result fields.
    run_config = RunConfig(checkpoint_config=CheckpointConfig(
        num_to_keep=2, checkpoint_score_attribute="loss", checkpoint_score_order="min"))
    trainer = DataParallelTrainer(train_loop_per_worker,
                                  scaling_config=ScalingConfig(num_workers=2),
                                  run_config=run_config)
    result = trainer.fit()
    resumed = DataParallelTrainer(train_loop_per_worker,
                                  scaling_config=ScalingConfig(num_workers=2),
                                  run_config=run_config,
                                  resume_from_checkpoint=result.checkpoint).fit()
    out["fit"] = result.metrics
    out["resumed"] = resumed.metrics
    out["best"] = [m["loss"] for _, m in resumed.best_checkpoints]
    out["best_types"] = [type(c).__name__ for c, _ in resumed.best_checkpoints]
    out["path"] = resumed.path
    try:
        out["dataframe_rows"] = len(resumed.metrics_dataframe)
    except ImportError as e:
        out["dataframe_error"] = str(e)

    try:
        DataParallelTrainer(train_loop_per_worker, train_loop_config={"fail": True},
                            scaling_config=ScalingConfig(num_workers=2)).fit()
    except TrainingFailedError as e:
        out["failed"] = str(e)
    print(json.dumps(out))
"""


def run_script(server, tmp_path, text):
    d = tmp_path / "proj"
    d.mkdir(exist_ok=True)
    (d / "train.py").write_text(text)
    env = dict(os.environ, TRAINYARD_SERVER=server.url, TRAINYARD_TOKEN=server.admin_token,
               PYTHONPATH=os.path.join(harness.SOURCE_DIR, "worker", "python"),
               TRAINYARD_WORKER_PYTHON="/usr/bin/python3", HOME=str(tmp_path / "home"),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    return subprocess.run(["/usr/bin/python3", "train.py"], cwd=d, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)


def have_pandas():
    return subprocess.run(["/usr/bin/python3", "-c", "import pandas"],
                          capture_output=True).returncode == 0


def test_ray_train_scripts_run_with_only_their_imports_changed(server, agent_factory, tmp_path):
    agent_factory(cpus=2)
    r = run_script(server, tmp_path, SCRIPT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # Ray 1.9: every worker's return value, in rank order.
    assert out["run"] == [{"rank": 0, "local_rank": 0, "world_size": 2, "resumed_from": -1},
                          {"rank": 1, "local_rank": 1, "world_size": 2, "resumed_from": -1}]
    assert out["latest"] == {"epoch": 1, "rank": 0}, out  # rank 0's save_checkpoint
    # JsonLoggerCallback: rank 0's reports in the run's directory; PrintCallback: every rank's.
    assert [(x["epoch"], x["loss"]) for x in out["json_log"]] == [(0, 1.0), (1, 0.5)], out
    printed = "\n".join(r.stdout.strip().splitlines()[:-1])
    assert printed.count('"_training_iteration": 2') == 2, r.stdout[-3000:]
    assert "__trainyard_return__" not in r.stderr  # the return values' lines are not shown
    # The seed: load_checkpoint(Checkpoint.from_dict) before run().
    assert [v["resumed_from"] for v in out["seed_resume"]] == [1, 1], out
    assert out["seed_latest"] == {"epoch": 2, "rank": 0}, out
    # fit(resume_from_checkpoint=result.checkpoint) goes on from the first fit's last epoch.
    assert out["fit"]["epoch"] == 2 and out["resumed"]["epoch"] == 5, out
    # best_checkpoints as Ray orders them: by the score, the best last.
    assert out["best"] == [0.2, 1 / 6] and out["best_types"] == ["Checkpoint"] * 2, out
    assert out["path"].startswith(server.url + "/api/v1/jobs/"), out
    if have_pandas():
        assert out["dataframe_rows"] == 3, out
    else:
        assert "python3-pandas" in out["dataframe_error"], out
    assert "ValueError: rank one gives up" in out["failed"], out


def test_ray_job_submission_client(server, agent_factory, tmp_path, monkeypatch):
    from trainyard.job_submission import JobStatus, JobSubmissionClient
    agent_factory(cpus=2)
    monkeypatch.setenv("TRAINYARD_TOKEN", server.admin_token)
    d = tmp_path / "wd"
    d.mkdir()
    (d / "script.py").write_text("import os\nprint(open('data.txt').read(), "
                                 "os.environ['GREETING'], flush=True)\n")
    (d / "data.txt").write_text("travelled")
    (d / "slow.py").write_text("import time\nprint('started', flush=True)\ntime.sleep(600)\n")

    client = JobSubmissionClient(server.url)
    job_id = client.submit_job(entrypoint="python3 script.py",
                               runtime_env={"working_dir": str(d),
                                            "env_vars": {"GREETING": "hello"}},
                               metadata={"owner": "ray-docs"})
    assert isinstance(job_id, str)
    server.wait_job(int(job_id), {"SUCCEEDED", "FAILED"})
    assert client.get_job_status(job_id) == JobStatus.SUCCEEDED
    assert client.get_job_status(f"raysubmit_{job_id}").is_terminal()
    assert "travelled hello" in client.get_job_logs(job_id)
    info = client.get_job_info(job_id)
    assert info.submission_id == job_id and info.status == JobStatus.SUCCEEDED
    assert info.metadata == {"owner": "ray-docs"} and info.end_time is not None, info
    assert client.stop_job(job_id) is False  # it had ended
    with pytest.raises(ValueError, match="'pip'"):
        client.submit_job(entrypoint="python3 script.py", runtime_env={"pip": ["requests"]})

    slow = client.submit_job(entrypoint="python3 slow.py", runtime_env={"working_dir": str(d)})
    assert [j.submission_id for j in client.list_jobs()][:2] == [slow, job_id]

    async def tail():
        seen, stopped = "", None
        async for lines in client.tail_job_logs(slow):
            seen += lines
            if "started" in seen and stopped is None:
                stopped = client.stop_job(slow)
        return seen, stopped

    seen, stopped = asyncio.run(tail())  # ends once the job has stopped
    assert "started" in seen and stopped is True
    assert client.get_job_status(slow) == JobStatus.STOPPED
    assert client.delete_job(slow) is True
    with pytest.raises(RuntimeError, match="404"):
        client.get_job_status(slow)
