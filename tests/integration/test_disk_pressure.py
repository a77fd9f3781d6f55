"""A node short of disk space (issue 23, point 3): each agent's heartbeat carries the free space
of its data directory, GET /api/v1/nodes shows it, and below the server's --disk-pressure-mb the
node is under disk pressure: no new workers go there, and a job that fits nowhere else waits
saying so. A checkpoint the agent cannot stage for want of space fails the worker's report, and
the job's restart event names the node, the staging directory and "No space left on device".
Real server and agent, the agent's data directory on a small tmpfs."""
import os
import subprocess

import pytest

import harness

PY = "/usr/bin/python3"

# A checkpoint larger than the agent's data directory can hold.
BIG_CHECKPOINT = """
import os, tempfile, trainyard
d = tempfile.mkdtemp(dir="/tmp")
with open(os.path.join(d, "w.bin"), "wb") as f:
    f.write(b"x" * (30 * 1024 * 1024))
trainyard.report({"loss": 1.0}, checkpoint=d)
"""


@pytest.fixture
def small_disk():
    mnt = harness.make_tmpdir("ty-smalldisk-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", mnt], check=True)
    yield mnt
    subprocess.run(["umount", "-l", mnt], check=False)


def node_disk(srv):
    nodes = srv.request("GET", "/api/v1/nodes").json["nodes"]
    return nodes[0]["disk"] if nodes else None


def test_disk_pressure_keeps_new_workers_off_and_a_full_staging_says_where(server_factory, agent_factory,
                                                         small_disk):
    srv = server_factory(extra_args=["--disk-pressure-mb", "12", "--heartbeat-timeout-s", "4"])
    data = os.path.join(small_disk, "data")
    agent = agent_factory(srv, data_dir=data)
    disk = harness.wait_for(lambda: node_disk(srv), what="the node's disk in GET /api/v1/nodes")
    assert disk["path"] == data and 20 <= disk["total_mb"] <= 24, disk
    assert disk["free_mb"] >= 12 and disk["pressure"] is False, disk

    filler = os.path.join(small_disk, "filler")
    with open(filler, "wb") as f:
        f.write(b"\0" * (16 * 1024 * 1024))
    disk = harness.wait_for(lambda: (node_disk(srv) or {}).get("pressure") and node_disk(srv),
                            what="disk pressure")
    assert disk["free_mb"] < 12, disk

    job = srv.submit({"name": "waits", "entrypoint": [PY, "-c", "print('ran')"],
                      "working_dir": "/tmp", "scaling_config": {"num_workers": 1}})["id"]
    waiting = harness.wait_for(
        lambda: (lambda j: j if "disk pressure" in (j["status_message"] or "") else None)(
            srv.request("GET", f"/api/v1/jobs/{job}").json),
        what="the job waiting for disk space")
    assert waiting["status"] == "PENDING", waiting

    os.unlink(filler)
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", done
    assert node_disk(srv)["pressure"] is False

    # A checkpoint that does not fit: the worker's report fails, and the restart event says where.
    job = srv.submit({"name": "big", "entrypoint": [PY, "-c", BIG_CHECKPOINT],
                      "working_dir": "/tmp", "scaling_config": {"num_workers": 1},
                      "run_config": {"failure_config": {"max_failures": 1}}})["id"]
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "FAILED", done
    staging = os.path.join(data, "checkpoints", str(job))
    assert staging in done["result"]["error"], done
    assert "No space left on device" in done["result"]["error"], done
    events = [e["message"] or "" for e in
              srv.request("GET", f"/api/v1/jobs/{job}/events").json["events"]]
    restart = [m for m in events if m.startswith("restarting after failure 1 of 1")]
    assert restart and staging in restart[0] and "No space left on device" in restart[0], events
    assert restart[0].endswith(f"on node {agent.node_id}"), restart
    # The partial copy is gone: the node is not left under disk pressure.
    harness.wait_for(lambda: node_disk(srv)["pressure"] is False, what="disk pressure over")
