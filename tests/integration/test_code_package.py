"""Code that travels (issue 15): `trainyard submit --working-dir DIR` packs DIR, uploads it once
to the server's artifact store (content-addressed), and each node fetches it, checks its hash,
caches it and runs the workers in a private copy. Who may use it: users upload, viewers may not;
a node fetches only packages of jobs placed on it. Real server, agent, CLI and workers."""
import hashlib
import json
import os
import textwrap
import time

import harness

PY = "/usr/bin/python3"

TRAIN = textwrap.dedent("""\
    import json, os
    with open("data/config.json") as f:
        cfg = json.load(f)
    files = sorted(os.path.relpath(os.path.join(r, n), ".")
                   for r, _, ns in os.walk(".") for n in ns)
    print("CWD", os.getcwd(), flush=True)
    print("FILES", json.dumps(files), flush=True)
    print("CONFIG", cfg["lr"], flush=True)
    open("written-by-worker.txt", "w").write("mine")
    """)


def project(tmp):
    """A directory as a user would submit it, with things to leave out."""
    d = os.path.join(tmp, "proj")
    os.makedirs(os.path.join(d, "data"))
    os.makedirs(os.path.join(d, ".git"))
    os.makedirs(os.path.join(d, "__pycache__"))
    files = {"train.py": TRAIN, "data/config.json": json.dumps({"lr": 0.5}),
             ".gitignore": "*.bin\nlogs/\n", ".trainyardignore": "secret.txt\n",
             "big.bin": "x" * 1000, "secret.txt": "s", "logs/out.log": "l",
             ".git/HEAD": "ref", "__pycache__/x.pyc": "c"}
    for name, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    spec = os.path.join(tmp, "spec.json")
    with open(spec, "w") as f:
        json.dump({"name": "travels", "entrypoint": [PY, "train.py"],
                   "scaling_config": {"num_workers": 2}}, f)
    return d, spec


def job_logs(cli, job):
    r = cli("logs", str(job))
    assert r.returncode == 0, r.stderr
    return r.stdout


def wait_gone(path, timeout=20):
    deadline = time.time() + timeout
    while os.path.exists(path) and time.time() < deadline:
        time.sleep(0.1)
    return not os.path.exists(path)


def mapped(agent, lib):
    """Whether the agent process has shared library `lib` (a name prefix) mapped."""
    with open(f"/proc/{agent.proc.pid}/maps") as f:
        return any(os.path.basename(line.split()[-1]).startswith(lib + ".so")
                   for line in f if "/" in line)


def test_working_dir_is_packed_uploaded_once_and_run_in_a_private_copy(server, agent_factory,
                                                                       cli, tmp_path):
    agent = agent_factory(cpus=2)
    # libcurl and libarchive are loaded at their first use, not at the agent's start
    # (worker/agent/iolib.c): neither is mapped before the first fetch and unpack, both after.
    direct = not harness.AGENT_WRAPPER
    if direct:
        assert not mapped(agent, "libcurl") and not mapped(agent, "libarchive")
    d, spec = project(str(tmp_path))
    r = cli("submit", spec, "--working-dir", d, "--wait")
    assert r.returncode == 0, r.stdout + r.stderr
    if direct:
        assert mapped(agent, "libcurl") and mapped(agent, "libarchive")
    assert "uploaded" in r.stderr, r.stderr
    job = int(r.stdout.strip().splitlines()[0])
    out = job_logs(cli, job)
    files = json.loads(out.split("FILES ", 1)[1].splitlines()[0])
    # Both ranks saw exactly what was packed (rank 1 may see rank 0's written file).
    packed = sorted(f for f in files if f != "written-by-worker.txt")
    assert packed == [".trainyardignore", "data/config.json", "train.py"], files
    assert "CONFIG 0.5" in out
    spec_json = server.request("GET", f"/api/v1/jobs/{job}").json["spec"]
    sha = spec_json["code_package"]
    assert "working_dir" not in spec_json or spec_json["working_dir"] is None
    # The node's cache holds the verified package; the job's private copy went with the job.
    cache = os.path.join(agent.data_dir, "code", sha)
    assert os.listdir(cache) == ["package.tar.gz"]
    cwd = out.split("CWD ", 1)[1].splitlines()[0]
    assert cwd == os.path.join(agent.data_dir, "code", "run", str(job), "1"), cwd
    assert wait_gone(cwd)
    stored = os.path.join(server.data_dir, "artifacts", "sha256", sha[:2], sha)
    with open(stored, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == sha

    # Unchanged directory: not sent again, same package, the node's cache serves it.
    r = cli("submit", spec, "--working-dir", d, "--wait")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "unchanged" in r.stderr and "uploaded" not in r.stderr, r.stderr
    job2 = int(r.stdout.strip().splitlines()[0])
    assert server.request("GET", f"/api/v1/jobs/{job2}").json["spec"]["code_package"] == sha
    assert "fetched into" not in agent.log_text().split(f"launch job {job2} ", 1)[1]

    # A changed file is a new package.
    with open(os.path.join(d, "data", "config.json"), "w") as f:
        f.write(json.dumps({"lr": 0.25}))
    r = cli("submit", spec, "--working-dir", d, "--wait")
    assert r.returncode == 0 and "uploaded" in r.stderr, r.stdout + r.stderr
    assert "CONFIG 0.25" in job_logs(cli, int(r.stdout.strip().splitlines()[0]))


def test_package_over_the_size_cap_is_refused_with_its_size(server, cli, tmp_path):
    d, spec = project(str(tmp_path))
    with open(os.path.join(d, "weights.pt"), "wb") as f:
        f.write(os.urandom(2 << 20))
    r = cli("submit", spec, "--working-dir", d, "--max-package-mb", "1")
    assert r.returncode != 0
    assert "over the cap of 1048576 bytes" in r.stderr and "--max-package-mb" in r.stderr, r.stderr


def node_credential(agent):
    with open(os.path.join(agent.data_dir, "node.credential")) as f:
        return f.read().strip()


def upload(srv, data, token="admin"):
    sha = hashlib.sha256(data).hexdigest()
    r = srv.request("PUT", f"/api/v1/code/{sha}?offset=0", body=data, token=token,
                    headers={"X-Content-SHA256": sha, "Content-Type": "application/octet-stream"})
    if r.status != 200:
        return sha, r
    return sha, srv.request("POST", f"/api/v1/code/{sha}/complete", body={}, token=token)


def test_who_may_upload_and_fetch_code_packages(server, agent_factory, tmp_path):
    srv = server
    agent = agent_factory(cpus=2)
    viewer = srv.create_token("watcher", "viewer")
    data = b"not really a tar.gz, but bytes with a hash"
    sha, r = upload(srv, data, token=viewer)
    assert r.status == 403, r
    r = srv.request("GET", f"/api/v1/code/{sha}", token=viewer)
    assert r.status == 403, r
    r = srv.request("GET", f"/api/v1/code/{sha}")
    assert r.status == 200 and r.json["state"] == "missing", r
    user = srv.create_token("alice", "user")
    sha, r = upload(srv, data, token=user)
    assert r.status == 200 and r.json == {"state": "complete", "offset": len(data),
                                          "size": len(data), "owned": True}, r

    # The node may not fetch it: no job of it runs there.
    node_h = {"X-Trainyard-Node": agent.node_id}
    r = srv.request("GET", f"/api/v1/agent/code/{sha}", token=node_credential(agent),
                    headers=node_h)
    assert r.status == 403, r
    # A user token is not a node credential.
    r = srv.request("GET", f"/api/v1/agent/code/{sha}", token=user, headers=node_h)
    assert r.status == 401, r

    # Once a job naming it is placed on the node, the node may fetch it (the job itself fails:
    # the bytes do not unpack, which its error says).
    job = srv.submit({"name": "bad-package", "entrypoint": [PY, "x.py"], "code_package": sha},
                     token=user)["id"]
    done = srv.wait_job(job, {"FAILED", "SUCCEEDED"})
    assert done["status"] == "FAILED" and "code package" in json.dumps(done), done
    r = srv.request("GET", f"/api/v1/agent/code/{sha}", token=node_credential(agent),
                    headers=node_h)
    assert r.status == 200 and r.text == data.decode(), r


def test_spec_code_package_is_validated_with_field_named_errors(server):
    srv = server
    bad = [({"code_package": "xyz"}, "code_package"),
           ({"code_package": "A" * 64}, "code_package"),
           ({"code_package": "a" * 64, "working_dir": "/tmp"}, "working_dir")]
    for extra, field in bad:
        r = srv.request("POST", "/api/v1/jobs", body={"name": "v", "entrypoint": ["true"], **extra})
        assert r.status == 400, r
        assert [e["field"] for e in r.json["errors"]] == [field], r.json
    r = srv.request("POST", "/api/v1/jobs",
                    body={"name": "v", "entrypoint": ["true"], "code_package": "b" * 64})
    assert r.status == 422 and r.json["errors"][0]["field"] == "code_package", r.json
    assert "upload it first" in r.json["detail"], r.json


ISOLATED = textwrap.dedent("""\
    import json, os
    cache = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.getcwd()))))
    try:
        os.listdir(cache)
        cache_readable = True
    except PermissionError:
        cache_readable = False
    with open("written-by-worker.txt", "w") as f:
        f.write("mine")
    print("RESULT", json.dumps({"uid": os.getuid(), "owner": os.stat(".").st_uid,
                                "cache_readable": cache_readable,
                                "train": open("train.py").read()[:6]}), flush=True)
    """)


def test_isolated_workers_own_their_copy_and_cannot_read_the_node_cache(server, agent_factory,
                                                                          cli, tmp_path):
    agent = agent_factory(cpus=2, env={"TRAINYARD_AGENT_RUN_AS": "auto"})
    d = tmp_path / "proj"
    d.mkdir()
    (d / "train.py").write_text(ISOLATED)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"name": "iso", "entrypoint": [PY, "train.py"]}))
    r = cli("submit", str(spec), "--working-dir", str(d), "--wait")
    assert r.returncode == 0, r.stdout + r.stderr
    job = int(r.stdout.strip().splitlines()[0])
    out = json.loads(job_logs(cli, job).split("RESULT ", 1)[1].splitlines()[0])
    assert out["uid"] != 0 and out["owner"] == out["uid"], out
    assert out["cache_readable"] is False, out  # <data>/code is searchable, not readable
    assert out["train"] == "import"
    sha = server.request("GET", f"/api/v1/jobs/{job}").json["spec"]["code_package"]
    assert os.stat(os.path.join(agent.data_dir, "code", sha)).st_mode & 0o077 == 0
