"""Ray parity (issue 24, point 4): training functions with no importable home travel by value
(Debian's python3-cloudpickle), closures included; what cannot run is refused before submission.
A real notebook, written here, executed headless by nbclient (a real ipykernel) against a real
server and two workers: a function defined in a cell, using a closure and a helper of another
cell, fit() from the notebook; a function whose closure holds a lock is refused with no job
submitted. Then `python3 -` with the function under `if __name__ == "__main__":`."""
import json
import os
import subprocess

import pytest

import harness

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("cloudpickle")

SDK = os.path.join(harness.SOURCE_DIR, "worker", "python")

CELLS = [
    f"import sys\nsys.path.insert(0, {SDK!r})",
    "from trainyard import train\n"
    "from trainyard.train import DataParallelTrainer, RunConfig, ScalingConfig",
    "def make_scale(k):\n"
    "    return lambda x: k * x\n"
    "\n"
    "scale = make_scale(10)",
    "def train_func(config):\n"
    "    rank = train.get_context().get_world_rank()\n"
    "    train.report({'value': scale(rank + config['base'])})\n"
    "    return rank",
    "trainer = DataParallelTrainer(train_func, train_loop_config={'base': 1},\n"
    "                              scaling_config=ScalingConfig(num_workers=2),\n"
    "                              run_config=RunConfig(verbose=0))\n"
    "returned = trainer.run()",
    "import threading\n"
    "lock = threading.Lock()\n"
    "def bad(config):\n"
    "    with lock:\n"
    "        pass\n"
    "try:\n"
    "    DataParallelTrainer(bad, scaling_config=ScalingConfig(num_workers=2)).fit()\n"
    "    refused = None\n"
    "except ValueError as e:\n"
    "    refused = str(e)",
    "import json\nprint(json.dumps({'returned': returned, 'refused': refused,\n"
    "                               'job': trainer.job_id}))",
]

STDIN_SCRIPT = """\
from trainyard import train
from trainyard.train import DataParallelTrainer, RunConfig, ScalingConfig

if __name__ == "__main__":
    greeting = "hello"

    def train_func():
        train.report({"greeting": greeting, "rank": train.get_context().get_world_rank()})

    result = DataParallelTrainer(train_func, scaling_config=ScalingConfig(num_workers=2),
                                 run_config=RunConfig(verbose=0)).fit()
    print(result.metrics["greeting"], result.metrics["rank"])
"""


def test_notebook_and_stdin_functions_travel_by_value(server, agent_factory, tmp_path,
                                                     monkeypatch):
    agent_factory(cpus=2)
    for k, v in (("TRAINYARD_SERVER", server.url), ("TRAINYARD_TOKEN", server.admin_token),
                 ("TRAINYARD_WORKER_PYTHON", "/usr/bin/python3"),
                 ("XDG_CACHE_HOME", str(tmp_path / "cache"))):
        monkeypatch.setenv(k, v)
    work = tmp_path / "nb"
    work.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nbformat.write(nb, str(work / "train.ipynb"))
    nb = nbformat.read(str(work / "train.ipynb"), as_version=4)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(work)}}).execute()
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    out = json.loads(text.strip().splitlines()[-1])
    assert out["returned"] == [0, 1], out
    refused = out["refused"] or ""
    assert "bad cannot travel to the workers" in refused and "lock" in refused, out
    # The refusal came before submission: the notebook's one job is the only one.
    jobs = server.request("GET", "/api/v1/jobs").json["jobs"]
    assert [j["id"] for j in jobs] == [out["job"]], jobs
    points = server.request("GET", f"/api/v1/jobs/{out['job']}/metrics").json["metrics"]
    assert sorted((p["rank"], p["value"]) for p in points) == [(0, 10), (1, 20)], points

    r = subprocess.run(["/usr/bin/python3", "-"], input=STDIN_SCRIPT, cwd=work, text=True,
                       env=dict(os.environ, PYTHONPATH=SDK), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    assert r.stdout.strip().splitlines()[-1] == "hello 0", r.stdout
