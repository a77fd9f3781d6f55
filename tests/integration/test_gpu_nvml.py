"""GPU metrics with a declared fake GPU (tests/fake_nvml, loaded through --nvml-library, its
values from a file the test writes): the agent's NVML samples reach GET /nodes and /metrics, and
a GPU that disappears leaves the node's capacity while the job running on it gets an event."""
import os
import time

from prometheus_client.parser import text_string_to_metric_families

import harness
from wsclient import WebSocket

FAKE_NVML = os.path.join(harness.BUILD_DIR, "tests", "progs", "libfake-nvml.so")
NAME = "NVIDIA H100 80GB HBM3"
GPU0 = f"GPU-00000000-aaaa|{NAME}|81559|2048|42|55|300000\n"
GPU1 = f"GPU-11111111-bbbb|{NAME}|81559|1024|7|41|90000\n"


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)  # the agent never reads half a file


def wait_for(what, fn, timeout=30):
    deadline = time.time() + timeout
    while True:
        got = fn()
        if got:
            return got
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def gpu_gauges(server):
    r = server.request("GET", "/metrics")
    assert r.status == 200, r
    out = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            if s.name.startswith("trainyard_gpu_") and "gpu" in s.labels:
                out[(s.name, s.labels["node"], s.labels["gpu"], s.labels["uuid"])] = s.value
    return out


def test_gpu_samples_reach_api_and_metrics_and_a_lost_gpu_leaves_capacity(server, agent_factory):
    nvml = os.path.join(harness.make_tmpdir("ty-nvml-"), "gpus")
    write(nvml, GPU0 + GPU1)
    a = agent_factory(args=["--cpus", "4", "--nvml-library", FAKE_NVML,
                            "--gpu-sample-interval", "1"], env={"TY_FAKE_NVML_FILE": nvml})
    node_id = a.wait_node()["id"]

    def sampled():
        n = server.request("GET", f"/api/v1/nodes/{node_id}").json
        return n if len(n.get("gpus", [])) == 2 else None
    node = wait_for("the first GPU sample", sampled)
    g0, g1 = sorted(node["gpus"], key=lambda g: g["index"])
    assert (g0["uuid"], g0["name"], g0["memory_mb"], g0["memory_used_mb"]) == (
        "GPU-00000000-aaaa", NAME, 81559, 2048)
    assert (g0["utilization_pct"], g0["temperature_c"], g0["power_mw"], g0["lost"]) == (
        42, 55, 300000, False)
    assert g1["uuid"] == "GPU-11111111-bbbb" and g1["utilization_pct"] == 7
    nodes = server.request("GET", "/api/v1/nodes").json["nodes"]
    assert [n["gpus"] for n in nodes if n["id"] == node_id][0] == node["gpus"]

    m = gpu_gauges(server)
    key = (node_id, "0", "GPU-00000000-aaaa")
    assert m[("trainyard_gpu_utilization_ratio", *key)] == 0.42
    assert m[("trainyard_gpu_memory_used_bytes", *key)] == 2048 * 1048576
    assert m[("trainyard_gpu_temperature_celsius", *key)] == 55
    assert m[("trainyard_gpu_power_watts", *key)] == 300
    assert m[("trainyard_gpu_lost", *key)] == 0

    # A new sample is shown: GPU 0 gets busier.
    write(nvml, GPU0.replace("|42|", "|88|") + GPU1)
    wait_for("the next sample", lambda: [g for g in server.request(
        "GET", f"/api/v1/nodes/{node_id}").json["gpus"] if g["utilization_pct"] == 88])

    job = server.submit({"entrypoint": "sleep 60",
                         "scaling_config": {"num_workers": 2, "use_gpu": True}})
    server.wait_job(job["id"], {"RUNNING"})
    write(nvml, GPU0)  # GPU 1 disappears

    def shrunk():
        n = server.request("GET", f"/api/v1/nodes/{node_id}").json
        return n if n["resources"]["GPU"] == [0] else None
    node = wait_for("the node's capacity to shrink", shrunk)
    assert [g["lost"] for g in sorted(node["gpus"], key=lambda g: g["index"])] == [False, True]
    events = server.request("GET", f"/api/v1/jobs/{job['id']}/events").json["events"]
    lost = [e for e in events if "GPU 1 (GPU-11111111-bbbb)" in (e["message"] or "")]
    assert len(lost) == 1 and node_id in lost[0]["message"], events
    assert gpu_gauges(server)[("trainyard_gpu_lost", node_id, "1", "GPU-11111111-bbbb")] == 1
    assert "GPU 1 (GPU-11111111-bbbb) disappeared" in a.log_text()
    server.request("POST", f"/api/v1/jobs/{job['id']}/stop")
    server.wait_job(job["id"], {"STOPPED", "FAILED"})


def test_a_critical_xid_takes_its_gpu_out_and_one_nvml_session_serves_the_agent(
        server, agent_factory):
    """The fake raises Xid 79 (fallen off the bus) on GPU 1 and Xid 13 (an application fault) on
    GPU 0 at once: GPU 1 leaves the node's capacity, shown lost with its Xid in GET /nodes, and
    the job on it gets an event naming the GPU and the Xid; GPU 0 stays. The agent initialised
    NVML once for all its samples and shuts it down when it stops."""
    tmp = harness.make_tmpdir("ty-nvml-")
    nvml, calls = os.path.join(tmp, "gpus"), os.path.join(tmp, "calls")
    write(nvml, GPU0 + GPU1)
    a = agent_factory(args=["--cpus", "4", "--nvml-library", FAKE_NVML,
                            "--gpu-sample-interval", "1"],
                      env={"TY_FAKE_NVML_FILE": nvml, "TY_FAKE_NVML_CALLS": calls})
    node_id = a.wait_node()["id"]
    wait_for("the first GPU sample",
             lambda: len(server.request("GET", f"/api/v1/nodes/{node_id}").json["gpus"]) == 2)
    job = server.submit({"entrypoint": "sleep 60",
                         "scaling_config": {"num_workers": 2, "use_gpu": True}})
    server.wait_job(job["id"], {"RUNNING"})
    write(nvml, GPU0.replace("\n", "|13\n") + GPU1.replace("\n", "|79\n"))

    def shrunk():
        n = [n for n in server.request("GET", "/api/v1/nodes").json["nodes"]
             if n["id"] == node_id][0]
        return n if n["resources"]["GPU"] == [0] else None
    node = wait_for("the node's capacity to shrink", shrunk)
    g0, g1 = sorted(node["gpus"], key=lambda g: g["index"])
    assert (g0["lost"], g0.get("xid")) == (False, None), g0
    assert (g1["uuid"], g1["lost"], g1["xid"]) == ("GPU-11111111-bbbb", True, 79), g1
    events = server.request("GET", f"/api/v1/jobs/{job['id']}/events").json["events"]
    xid = [e for e in events if "GPU 1 (GPU-11111111-bbbb)" in (e["message"] or "")]
    assert len(xid) == 1 and "Xid 79" in xid[0]["message"], events
    assert node_id in xid[0]["message"]
    assert not [e for e in events if "GPU 0 (" in (e["message"] or "")], events
    log = a.log_text()
    assert "GPU 1 (GPU-11111111-bbbb): critical Xid 79" in log
    assert "GPU 0 (GPU-00000000-aaaa): Xid 13 (the GPU stays usable)" in log
    assert "disappeared" not in log

    # Later samples keep GPU 1 out, with its Xid, though the file still lists it.
    write(nvml, GPU0.replace("|42|", "|66|") + GPU1.replace("\n", "|79\n"))
    node = wait_for("a later sample", lambda: [g for g in server.request(
        "GET", f"/api/v1/nodes/{node_id}").json["gpus"] if g["utilization_pct"] == 66] and
        server.request("GET", f"/api/v1/nodes/{node_id}").json)
    assert [(g["lost"], g.get("xid")) for g in sorted(node["gpus"], key=lambda g: g["index"])] \
        == [(False, None), (True, 79)]
    assert node["resources"]["GPU"] == [0]
    server.request("POST", f"/api/v1/jobs/{job['id']}/stop")
    server.wait_job(job["id"], {"STOPPED", "FAILED"})
    with open(calls) as f:
        assert f.read().split() == ["init"]
    a.stop()
    with open(calls) as f:
        assert f.read().split() == ["init", "shutdown"]


def test_gpus_message_before_register_is_refused(server):
    """Only a registered node may send GPU samples: before `register` the server answers an
    error and closes, storing nothing."""
    with WebSocket(server.ws_url + "/agent") as ws:
        ws.send_json({"type": "gpus", "gpus": [
            {"index": 0, "uuid": "GPU-rogue", "name": NAME, "memory_mb": 1, "memory_used_mb": 0,
             "utilization_pct": 1, "temperature_c": 1, "power_mw": 1, "lost": False}]})
        got = ws.expect_closed()
    assert any(m.get("type") == "error" and "register first" in m.get("message", "")
               for m in got), got
    assert all(not n["gpus"] for n in server.request("GET", "/api/v1/nodes").json["nodes"])
