"""Ray Train's PyTorch quick start (examples/ray_quickstart/train.py: only its import lines
changed) through a real server, agent and two DDP workers: the function ships with its
directory, trains a small model on Debian's Fashion-MNIST with prepare_model and
prepare_data_loader, reports a checkpoint each epoch, and fit() returns a Result whose
checkpoint loads back into the model. The agent advertises two GPUs so that the quick start's
use_gpu=True places (the workers fall back to the CPU when CUDA is absent)."""
import json
import os
import shutil
import subprocess

import pytest

import harness

DRIVER = """\
import json, runpy
g = runpy.run_path("train.py", run_name="__main__")
r = g["result"]
print(json.dumps({"metrics": r.metrics, "history": [h["loss"] for h in r._history],
                  "checkpoint": r.checkpoint.id, "error": r.error,
                  "params": sum(p.numel() for p in g["model"].parameters()),
                  "kept": len(r.best_checkpoints)}))
"""


def have_torch():
    return subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                          capture_output=True).returncode == 0


@pytest.mark.skipif(not os.path.isdir("/usr/share/datasets/fashion-mnist"),
                    reason="Debian's fashion-mnist package is not installed")
@pytest.mark.skipif(not have_torch(), reason="python3-torch is not installed")
def test_ray_quickstart_runs_with_only_its_imports_changed(server, agent_factory, tmp_path):
    agent_factory(cpus=2, gpus="0,1")
    work = tmp_path / "quickstart"
    shutil.copytree(os.path.join(harness.SOURCE_DIR, "examples", "ray_quickstart"), work)
    (work / "driver.py").write_text(DRIVER)
    env = dict(os.environ, TRAINYARD_SERVER=server.url, TRAINYARD_TOKEN=server.admin_token,
               PYTHONPATH=os.path.join(harness.SOURCE_DIR, "worker", "python"),
               TRAINYARD_WORKER_PYTHON="/usr/bin/python3",
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    r = subprocess.run(["/usr/bin/python3", "driver.py"], cwd=work, env=env, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["error"] is None
    assert out["metrics"]["epoch"] == 9, out
    assert len(out["history"]) == 10, out
    # Learning happened: below chance (ln 10 = 2.30) and below where it started.
    assert out["metrics"]["loss"] < 1.5 and out["metrics"]["loss"] < out["history"][0], out
    assert out["checkpoint"] is not None and out["kept"] == 10, out
    assert out["params"] == 64 * 49 + 64 * 16 * 10 + 10, out  # the checkpoint loaded back
    assert r.stderr.count("[report]") == 10, r.stderr[-3000:]
    assert "{'loss':" in r.stderr  # rank 0's own print, streamed
