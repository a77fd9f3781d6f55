"""Ray parity (issue 24, point 5): trainyard.data datasets given to a trainer's datasets=, read
per worker through train.get_dataset_shard(name) on a real server, agent and two plain Python
workers: from_items (cut into per-worker blocks in the code package), a CSV file (one file,
two workers: byte ranges), a directory of JSON Lines files (a file per worker), range (made on
the workers) shuffled per epoch. The shards are disjoint and cover each dataset, and the table
every worker loads holds none of the rows."""
import json
import os
import subprocess

import harness

SCRIPT = """\
import json, os
from trainyard import train
import trainyard.data as data
from trainyard.train import DataParallelTrainer, RunConfig, ScalingConfig


def train_func(config):
    items = train.get_dataset_shard("items")
    csv_shard = train.get_dataset_shard("csv")
    ids = train.get_dataset_shard("ids")
    with open("__trainyard_datasets__.pkl", "rb") as f:
        table = f.read()
    return {
        "items": [str(x) for b in items.iter_batches(batch_size=2) for x in b["item"]],
        "csv": [(int(x), float(y)) for b in csv_shard.iter_batches(batch_size=3,
                                                                   batch_format="numpy")
                for x, y in zip(b["x"], b["y"])],
        "json": [r["k"] for r in train.get_dataset_shard("json").iter_rows()],
        "epochs": [[int(i) for b in ids.iter_batches(batch_size=None) for i in b["id"]]
                   for _ in range(2)],
        "rows_in_table": b"item-3" in table,
    }


if __name__ == "__main__":
    trainer = DataParallelTrainer(
        train_func, scaling_config=ScalingConfig(num_workers=2), run_config=RunConfig(verbose=0),
        datasets={"items": data.from_items([f"item-{i}" for i in range(7)]),
                  "csv": data.read_csv(os.environ["CSV_FILE"]),
                  "json": data.read_json(os.environ["JSON_DIR"]),
                  "ids": data.range(20).random_shuffle(seed=3)})
    print(json.dumps(trainer.run()))
"""


def test_dataset_shards_read_only_their_part(server, agent_factory, tmp_path):
    agent_factory(cpus=2)
    shared = tmp_path / "shared"
    (shared / "json").mkdir(parents=True)
    (shared / "t.csv").write_text("x,y\n" + "".join(f"{i},{i / 2}\n" for i in range(11)))
    for n in range(2):
        (shared / "json" / f"part-{n}.jsonl").write_text(
            "".join(json.dumps({"k": f"{n}-{i}"}) + "\n" for i in range(3)))
    d = tmp_path / "proj"
    d.mkdir()
    (d / "train.py").write_text(SCRIPT)
    env = dict(os.environ, TRAINYARD_SERVER=server.url, TRAINYARD_TOKEN=server.admin_token,
               PYTHONPATH=os.path.join(harness.SOURCE_DIR, "worker", "python"),
               TRAINYARD_WORKER_PYTHON="/usr/bin/python3", XDG_CACHE_HOME=str(tmp_path / "c"),
               CSV_FILE=str(shared / "t.csv"), JSON_DIR=str(shared / "json"))
    r = subprocess.run(["/usr/bin/python3", "train.py"], cwd=d, env=env, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    w0, w1 = json.loads(r.stdout.strip().splitlines()[-1])
    # from_items: one block per worker, in order.
    assert w0["items"] == [f"item-{i}" for i in range(3)], w0
    assert w1["items"] == [f"item-{i}" for i in range(3, 7)], w1
    assert not w0["rows_in_table"] and not w1["rows_in_table"]
    # One CSV file, two workers: disjoint byte ranges that cover it, header read by both.
    assert w0["csv"] and w1["csv"] and w0["csv"] + w1["csv"] == [[i, i / 2] for i in range(11)]
    # Two JSON Lines files, two workers: a file each.
    assert w0["json"] == ["0-0", "0-1", "0-2"] and w1["json"] == ["1-0", "1-1", "1-2"]
    # range: made on the workers, half each; shuffled, in another order each epoch.
    for w, part in ((w0, set(range(10))), (w1, set(range(10, 20)))):
        first, second = w["epochs"]
        assert set(first) == set(second) == part and first != second, w["epochs"]
