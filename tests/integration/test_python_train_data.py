"""trainyard.train (issue 15): what travels with a fit() besides the code. A local checkpoint
directory given as resume_from_checkpoint=Checkpoint.from_directory(dir) is uploaded as a
package and every rank reads it through get_checkpoint(); only a user who uploaded a package may
resume from it (or an admin). datasets= travel with the function and get_dataset_shard(name)
gives each rank a disjoint share, the shares covering the dataset. Real server, agent and
workers; the script is run as a user would run it. fit() follows the job over the /stream
websocket: each worker line printed once, a progress line per report, also across reconnects."""
import hashlib
import io
import json
import os
import subprocess
import tarfile
import textwrap

import harness

SCRIPT = textwrap.dedent("""\
    import json, os, sys
    import trainyard.train as train
    from trainyard.train import Checkpoint, DataParallelTrainer, ScalingConfig


    class Squares:  # a dataset class of the user's script: it travels pickled
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return i * i


    def read_checkpoint():
        rank = train.get_context().get_world_rank()
        ck = train.get_checkpoint()
        with ck.as_directory() as d:
            files = {}
            for root, _, names in os.walk(d):
                for n in names:
                    p = os.path.join(root, n)
                    files[os.path.relpath(p, d)] = open(p).read()
            # The job's private copy on this node: its workers may write there.
            files["writable"] = os.access(d, os.W_OK)
        print("CKPT", rank, json.dumps(files, sort_keys=True), flush=True)


    def use_datasets():
        rank = train.get_context().get_world_rank()
        shards = {"ids": train.get_dataset_shard("ids"),
                  "squares": list(train.get_dataset_shard("squares"))}
        print("SHARD", rank, json.dumps(shards), flush=True)
        try:
            train.get_dataset_shard("nope")
        except KeyError as e:
            print("MISSING", rank, str(e), flush=True)


    def chatty():
        rank = train.get_context().get_world_rank()
        for epoch in range(3):
            for i in range(15):
                print(f"line {rank} {epoch} {i}", flush=True)
            train.report({"epoch": epoch})


    if __name__ == "__main__":
        mode = sys.argv[1]
        if mode == "stream":
            trainer = DataParallelTrainer(chatty, scaling_config=ScalingConfig(num_workers=2))
        elif mode == "resume":
            trainer = DataParallelTrainer(
                read_checkpoint, scaling_config=ScalingConfig(num_workers=2),
                resume_from_checkpoint=Checkpoint.from_directory(sys.argv[2]))
        else:
            trainer = DataParallelTrainer(
                use_datasets, scaling_config=ScalingConfig(num_workers=2),
                datasets={"ids": list(range(11)), "squares": Squares(7)})
        result = trainer.fit()
        print(json.dumps({"job": result.job_id}))
    """)


def run_script(server, tmp_path, token, *args, env=None):
    d = tmp_path / "proj"
    d.mkdir(exist_ok=True)
    (d / "train.py").write_text(SCRIPT)
    env = dict(os.environ, TRAINYARD_SERVER=server.url, TRAINYARD_TOKEN=token,
               PYTHONPATH=os.path.join(harness.SOURCE_DIR, "worker", "python"),
               TRAINYARD_WORKER_PYTHON="/usr/bin/python3",
               XDG_CACHE_HOME=str(tmp_path / "cache"), **(env or {}))
    r = subprocess.run(["/usr/bin/python3", "train.py", *args], cwd=d, env=env, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])["job"], r.stderr


def lines(server, job, tag):
    r = server.request("GET", f"/api/v1/jobs/{job}/logs?format=jsonl")
    assert r.status == 200, r
    out = {}
    for x in r.text.splitlines():
        ln = json.loads(x)
        if ln["line"].startswith(tag + " "):
            _, rank, rest = ln["line"].split(" ", 2)
            out[int(rank)] = rest
    return out


def checkpoint_package(files):
    """The package fit() makes of a checkpoint directory holding `files`, and its sha256."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text.encode()))
    data = raw.getvalue()
    return data, hashlib.sha256(data).hexdigest()


def upload(server, token, data, sha):
    r = server.request("PUT", f"/api/v1/code/{sha}?offset=0", data, token=token,
                       headers={"X-Content-SHA256": sha,
                                "Content-Type": "application/octet-stream"})
    assert r.status == 200, r
    r = server.request("POST", f"/api/v1/code/{sha}/complete", {}, token=token)
    assert r.status == 200 and r.json["state"] == "complete" and r.json["owned"], r


def test_fit_resumes_from_a_local_checkpoint_directory(server, agent_factory, tmp_path):
    agent_factory(cpus=2)
    alice = server.create_token("alice", "user")
    ck = tmp_path / "ck"
    (ck / "sub").mkdir(parents=True)
    (ck / "weights.txt").write_text("w=42")
    (ck / "sub" / "state.json").write_text('{"epoch": 7}')
    (ck / ".gitignore").write_text("*\n")  # a checkpoint travels whole: no ignore rules
    job, _ = run_script(server, tmp_path, alice, "resume", str(ck))
    want = {".gitignore": "*\n", "sub/state.json": '{"epoch": 7}', "weights.txt": "w=42",
            "writable": True}
    got = lines(server, job, "CKPT")
    assert {r: json.loads(t) for r, t in got.items()} == {0: want, 1: want}, got
    spec = server.request("GET", f"/api/v1/jobs/{job}").json["spec"]
    sha = spec["resume_from_package"]
    assert "resume_from_checkpoint" not in spec or spec["resume_from_checkpoint"] is None
    assert server.request("GET", f"/api/v1/code/{sha}", token=alice).json["owned"] is True

    base = {"name": "r", "entrypoint": ["/usr/bin/true"], "scaling_config": {"num_workers": 1}}
    # Someone else's package: refused, naming the field; an admin may.
    bob = server.create_token("bob", "user")
    r = server.request("GET", f"/api/v1/code/{sha}", token=bob)
    assert r.json["state"] == "complete" and r.json["owned"] is False, r
    r = server.request("POST", "/api/v1/jobs", dict(base, resume_from_package=sha), token=bob)
    assert r.status == 403 and r.json["code"] == "package-forbidden", r
    assert r.json["errors"][0]["field"] == "resume_from_package", r
    # Completing without sending the bytes does not make bob an owner.
    r = server.request("POST", f"/api/v1/code/{sha}/complete", {}, token=bob)
    assert r.status == 409, r
    assert server.request("POST", "/api/v1/jobs", dict(base, resume_from_package=sha),
                          token=bob).status == 403
    r = server.request("POST", "/api/v1/jobs", dict(base, resume_from_package=sha))
    assert r.status == 201, r
    # A package nobody uploaded, a malformed one, and both ways of resuming at once.
    r = server.request("POST", "/api/v1/jobs", dict(base, resume_from_package="ab" * 32),
                       token=bob)
    assert r.status == 422 and r.json["code"] == "code-package-not-found", r
    assert r.json["errors"][0]["field"] == "resume_from_package", r
    r = server.request("POST", "/api/v1/jobs", dict(base, resume_from_package="xyz"), token=bob)
    assert r.status == 400 and r.json["errors"][0]["field"] == "resume_from_package", r
    r = server.request("POST", "/api/v1/jobs", dict(base, resume_from_package=sha,
                                                    resume_from_checkpoint=1), token=bob)
    assert r.status == 400 and r.json["errors"][0]["field"] == "resume_from_package", r


def test_a_user_who_uploads_the_same_bytes_owns_the_package(server, agent_factory):
    carol = server.create_token("carol", "user")
    dave = server.create_token("dave", "user")
    viewer = server.create_token("val", "viewer")
    data, sha = checkpoint_package({"w.txt": "same bytes"})
    upload(server, carol, data, sha)
    assert server.request("GET", f"/api/v1/code/{sha}", token=dave).json["owned"] is False
    upload(server, dave, data, sha)
    base = {"name": "r", "entrypoint": ["/usr/bin/true"], "scaling_config": {"num_workers": 1},
            "resume_from_package": sha}
    assert server.request("POST", "/api/v1/jobs", base, token=dave).status == 201
    # Viewers may neither ask nor upload.
    assert server.request("GET", f"/api/v1/code/{sha}", token=viewer).status == 403


def test_datasets_are_sharded_disjoint_and_covering(server, agent_factory, tmp_path):
    agent_factory(cpus=2)
    job, _ = run_script(server, tmp_path, server.admin_token, "datasets")
    got = {r: json.loads(t) for r, t in lines(server, job, "SHARD").items()}
    assert sorted(got) == [0, 1], got
    for name, full in (("ids", list(range(11))), ("squares", [i * i for i in range(7)])):
        a, b = got[0][name], got[1][name]
        assert not set(a) & set(b), (name, a, b)
        assert sorted(a + b) == sorted(full), (name, a, b)
    assert got[0]["ids"] == list(range(0, 11, 2)) and got[1]["ids"] == list(range(1, 11, 2))
    missing = lines(server, job, "MISSING")
    assert "no dataset named 'nope'" in missing[0] and "ids, squares" in missing[0], missing


def check_stream_output(server, job, stderr):
    assert "polling instead" not in stderr, stderr
    printed = [ln for ln in stderr.splitlines() if ln.startswith("(rank ")]
    want = []
    for rank in (0, 1):
        mine = [f"(rank {rank}) line {rank} {e} {i}" for e in range(3) for i in range(15)]
        got = [ln for ln in printed if ln.startswith(f"(rank {rank}) ")]
        assert got == mine, (rank, got)
        want += mine
    assert sorted(printed) == sorted(want)
    # The same as the job's stored log, once each.
    stored = server.request("GET", f"/api/v1/jobs/{job}/logs?format=jsonl").text.splitlines()
    assert len(stored) == len(printed)
    assert [ln for ln in stderr.splitlines() if "[report]" in ln] == \
        [f"trainyard: [report] epoch={e}" for e in range(3)], stderr


def test_fit_prints_the_stream_once_each(server, agent_factory, tmp_path):
    agent_factory(cpus=2)
    job, err = run_script(server, tmp_path, server.admin_token, "stream")
    check_stream_output(server, job, err)
    assert "stream connection lost" not in err, err


def test_fit_resumes_the_stream_after_a_dropped_connection(server, agent_factory, tmp_path):
    agent_factory(cpus=2)
    job, err = run_script(server, tmp_path, server.admin_token, "stream",
                          env={"TRAINYARD_STREAM_DROP_AFTER": "2"})
    check_stream_output(server, job, err)
    assert err.count("stream connection lost; resuming after seq") >= 3, err
