"""The node's code cache (issue 15): an agent keeps at most --code-cache-bytes of packages (as
fetched: each attempt unpacks its own copy, issue 22) in <data>/code, removing the least recently used first and never one a running worker
was launched with. Real server, agent and workers."""
import hashlib
import io
import os
import random
import tarfile

import harness

PAD = 1000  # random bytes of each package's pad file: about 1.25 kB packed with its program


def package(tag):
    """A code package (tar.gz) whose program sleeps argv[1] seconds; distinct per tag."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, data in (("w.py", f"# {tag}\nimport sys, time\n"
                                    "time.sleep(float(sys.argv[1]))\n".encode()),
                           ("pad.bin", random.Random(tag).randbytes(PAD))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data = raw.getvalue()
    return data, hashlib.sha256(data).hexdigest()


def upload(srv, data, sha):
    r = srv.request("PUT", f"/api/v1/code/{sha}?offset=0", body=data,
                    headers={"X-Content-SHA256": sha, "Content-Type": "application/octet-stream"})
    assert r.status == 200, r
    r = srv.request("POST", f"/api/v1/code/{sha}/complete", body={})
    assert r.status == 200 and r.json["state"] == "complete", r


def run(srv, sha, seconds, wait=True):
    job = srv.submit({"name": "cache", "entrypoint": ["/usr/bin/python3", "w.py", str(seconds)],
                      "code_package": sha, "scaling_config": {"num_workers": 1}})["id"]
    if wait:
        assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    return job


def cached(agent):
    root = os.path.join(agent.data_dir, "code")
    return {n for n in os.listdir(root) if len(n) == 64}


def test_code_cache_is_trimmed_lru_never_a_running_package(server, agent_factory):
    p, largest = {}, 0
    for tag in ("one", "two", "three"):
        data, sha = package(tag)
        upload(server, data, sha)
        p[tag] = sha
        largest = max(largest, len(data))
    # Room for two packages (about 2.5 kB), not three.
    agent = agent_factory(cpus=2, extra_args=["--code-cache-bytes", str(int(2.5 * largest))])
    long = run(server, p["one"], 600, wait=False)  # "one" stays in use
    server.wait_job(long, {"RUNNING"})
    run(server, p["two"], 0)
    assert cached(agent) == {p["one"], p["two"]}
    # A third: over the cap. "one" is the oldest but a running worker uses it; "two" goes.
    run(server, p["three"], 0)
    assert cached(agent) == {p["one"], p["three"]}
    assert server.request("POST", f"/api/v1/jobs/{long}/stop").status in (200, 202)
    assert server.wait_job(long, {"STOPPED"})["status"] == "STOPPED"
    # "one" used again (a cache hit) is now the most recent: "three" is the least recently used
    # when "two" comes back (fetched again).
    run(server, p["one"], 0)
    assert cached(agent) == {p["one"], p["three"]}
    run(server, p["two"], 0)
    assert cached(agent) == {p["one"], p["two"]}


def test_restarted_agent_keeps_the_package_of_a_readopted_worker(server, agent_factory):
    # The worker's record keeps its package (adopt.c): an agent SIGKILLed and restarted with a
    # cache too small for any package still knows the re-adopted worker runs from it.
    gate_dir = harness.make_tmpdir("ty-cache-gate-")
    os.chmod(gate_dir, 0o777)  # the worker may run under a uid of its own (TY_TEST_RUN_AS=auto)
    gate = os.path.join(gate_dir, "go")
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        text = ("import os, sys, time\n"
                "while not os.path.exists(sys.argv[1]):\n    time.sleep(0.05)\n").encode()
        info = tarfile.TarInfo("w.py")
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    gated, gated_sha = raw.getvalue(), hashlib.sha256(raw.getvalue()).hexdigest()
    upload(server, gated, gated_sha)
    other, other_sha = package("other")
    upload(server, other, other_sha)
    agent = agent_factory(cpus=2)
    long = server.submit({"name": "cache", "entrypoint": ["/usr/bin/python3", "w.py", gate],
                          "code_package": gated_sha, "scaling_config": {"num_workers": 1}})["id"]
    server.wait_job(long, {"RUNNING"})
    agent.kill()
    agent.args += ["--code-cache-bytes", "1"]
    agent.start()
    assert "re-adopted job" in agent.log_text()
    run(server, other_sha, 0)  # its launch trims the cache: everything is over 1 byte
    assert gated_sha in cached(agent), agent.log_text()
    assert other_sha in cached(agent)  # used by no one now, but the trim came with its launch
    open(gate, "w").close()
    assert server.wait_job(long, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
