"""A node whose disk fills up (issue 23, point 3, the rest of it): disk pressure is one of the
node's `conditions` in the API (set and cleared as the free space crosses --disk-pressure-mb) and
`trainyard nodes` shows the free space; a code package that does not fit the agent's data
directory becomes an event of the job naming the node, the path and ENOSPC, and the partial copy
is removed. Real server, agent and worker, the agent's data directory on a small tmpfs."""
import hashlib
import io
import os
import random
import subprocess
import tarfile

import pytest

import harness
from test_code_cache import upload

MIB = 1024 * 1024


@pytest.fixture
def small_disk():
    mnt = harness.make_tmpdir("ty-fulldisk-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", mnt], check=True)
    yield mnt
    subprocess.run(["umount", "-l", mnt], check=False)


def leave_free(mnt, filler, mib):
    """Resizes the filler file so that about `mib` MiB stay free on mnt."""
    have = os.path.getsize(filler) if os.path.exists(filler) else 0
    st = os.statvfs(mnt)
    free = st.f_bavail * st.f_frsize
    size = max(0, have + free - mib * MIB)
    with open(filler, "wb") as f:
        f.write(b"\0" * size)


def node(srv, node_id):
    return srv.request("GET", f"/api/v1/nodes/{node_id}").json


def condition(srv, node_id, kind):
    return [c for c in node(srv, node_id)["conditions"] if c["type"] == kind]


def big_package(size):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, data in (("w.py", b"print('ran')\n"),
                           ("pad.bin", random.Random(23).randbytes(size))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data = raw.getvalue()
    return data, hashlib.sha256(data).hexdigest()


def test_disk_pressure_condition_and_a_code_package_that_does_not_fit(server_factory,
                                                                      agent_factory, small_disk):
    srv = server_factory(extra_args=["--disk-pressure-mb", "8", "--heartbeat-timeout-s", "4"])
    agent = agent_factory(srv, data_dir=os.path.join(small_disk, "data"))
    nid = agent.node_id
    harness.wait_for(lambda: node(srv, nid)["disk"], what="the node's disk")
    filler = os.path.join(small_disk, "filler")

    leave_free(small_disk, filler, 4)
    [cond] = harness.wait_for(lambda: condition(srv, nid, "disk-pressure"),
                              what="the disk-pressure condition")
    assert "below --disk-pressure-mb 8" in cond["message"] and cond["since"], cond
    r = harness.run_cli(srv, "nodes")
    assert r.returncode == 0 and "DISK FREE" in r.stdout and "MiB (pressure)" in r.stdout, r.stdout

    leave_free(small_disk, filler, 10)
    harness.wait_for(lambda: not condition(srv, nid, "disk-pressure"),
                     what="the disk-pressure condition cleared")
    assert node(srv, nid)["disk"]["pressure"] is False
    assert "(pressure)" not in harness.run_cli(srv, "nodes").stdout

    # A code package larger than the free space: its fetch fails for want of space.
    data, sha = big_package(15 * MIB)
    upload(srv, data, sha)
    job = srv.submit({"name": "full", "entrypoint": ["/usr/bin/python3", "w.py"],
                      "code_package": sha, "scaling_config": {"num_workers": 1}})["id"]
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "FAILED", done
    path = os.path.join(agent.data_dir, "code", f"{sha}.part", "package.tar.gz")

    def full_event():
        events = srv.request("GET", f"/api/v1/jobs/{job}/events").json["events"]
        return [e["message"] for e in events if (e["message"] or "").startswith(f"node {nid}: ")]
    [event] = harness.wait_for(full_event, what="the job's disk-full event")
    assert event == (f"node {nid}: code package fetch: cannot write {path}: No space left on "
                     "device (ENOSPC); what was written there for the job was removed"), event
    # The partial copy is gone, and nothing of the job's is left in the code directory.
    code = os.path.join(agent.data_dir, "code")
    assert not os.path.exists(os.path.join(code, f"{sha}.part"))
    harness.wait_for(lambda: not os.path.exists(os.path.join(code, "run", str(job), "1")),
                     what="the attempt's copy removed")
    assert condition(srv, nid, "artifact-store-unreachable") == []
