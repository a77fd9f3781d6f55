"""A node short of disk space (issue 23, point 3): each agent's heartbeat carries the free space
of its data directory, GET /api/v1/nodes shows it, and below the server's --disk-pressure-mb the
node is under disk pressure: no new workers go there, and a job that fits nowhere else waits
saying so. Real server and agent, the agent's data directory on a small tmpfs."""
import os
import subprocess

import pytest

import harness

PY = "/usr/bin/python3"


@pytest.fixture
def small_disk():
    mnt = harness.make_tmpdir("ty-smalldisk-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", mnt], check=True)
    yield mnt
    subprocess.run(["umount", "-l", mnt], check=False)


def node_disk(srv):
    nodes = srv.request("GET", "/api/v1/nodes").json["nodes"]
    return nodes[0]["disk"] if nodes else None


def test_a_node_under_disk_pressure_takes_no_new_workers(server_factory, agent_factory,
                                                         small_disk):
    srv = server_factory(extra_args=["--disk-pressure-mb", "12", "--heartbeat-timeout-s", "4"])
    data = os.path.join(small_disk, "data")
    agent_factory(srv, data_dir=data)
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
