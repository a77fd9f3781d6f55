"""GPU placement with GPUs that can exist here: declared GPUs (--gpus) and a declared fake NVML
(tests/fake_nvml, loaded through --nvml-library): the NVML name as the node's gpu_type,
accelerator_type matched by its tokens, CUDA_VISIBLE_DEVICES by UUID, distinct GPUs per worker,
PACK on one node when the job fits there."""
import os
import time

import harness

FAKE_NVML = os.path.join(harness.BUILD_DIR, "tests", "progs", "libfake-nvml.so")
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-40GB"


def read_env(path):
    with open(path) as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


def fake_nvml_file(gpus):
    """A file for the fake NVML: one GPU (uuid, name) a line, 80 GiB, idle."""
    path = os.path.join(harness.make_tmpdir("ty-nvml-"), "gpus")
    with open(path, "w") as f:
        for uuid, name in gpus:
            f.write(f"{uuid}|{name}|81559|0|0|30|70000\n")
    return path


def env_job(out, n, **scaling):
    return {"entrypoint": ["/bin/sh", "-c", f"env > {out}/env-$RANK"],
            "scaling_config": {"num_workers": n, "use_gpu": True, **scaling}}


def wait_message(server, job_id, word, timeout=15):
    deadline = time.time() + timeout
    while True:
        j = server.request("GET", f"/api/v1/jobs/{job_id}").json
        if word in (j["status_message"] or "") or time.time() > deadline:
            return j
        time.sleep(0.1)


def test_nvml_gpus_are_named_and_given_by_uuid(server, agent_factory):
    nvml = fake_nvml_file([("GPU-11111111-aaaa", H100), ("GPU-22222222-bbbb", H100)])
    a = agent_factory(args=["--cpus", "4", "--nvml-library", FAKE_NVML],
                      env={"TY_FAKE_NVML_FILE": nvml})
    node = a.wait_node()
    assert node["resources"]["GPU"] == [0, 1], node
    assert node["gpu_type"] == H100
    assert "NVML GPU 1: " + H100 + ", GPU-22222222-bbbb, 81559 MiB" in a.log_text()
    out = harness.make_tmpdir("ty-env-")
    job = server.submit(env_job(out, 2, accelerator_type="h100"))
    done = server.wait_job(job["id"], {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", done
    seen = sorted(read_env(os.path.join(out, f"env-{r}"))["CUDA_VISIBLE_DEVICES"] for r in (0, 1))
    assert seen == ["GPU-11111111-aaaa", "GPU-22222222-bbbb"]


def test_agent_with_failing_nvml_offers_no_gpu(server, agent_factory):
    missing = os.path.join(harness.make_tmpdir("ty-nvml-"), "absent")
    a = agent_factory(args=["--cpus", "2", "--nvml-library", FAKE_NVML],
                      env={"TY_FAKE_NVML_FILE": missing})
    node = a.wait_node()
    assert node["resources"].get("GPU", []) == [] and node["gpu_type"] is None, node
    assert "nvmlInit failed" in a.log_text()


def test_pack_type_and_distinct_gpus_on_two_declared_nodes(server, agent_factory):
    h = agent_factory(cpus=4, gpus="0,1", gpu_type=H100)
    a = agent_factory(cpus=4, gpus="0,1", gpu_type=A100)
    out = harness.make_tmpdir("ty-env-")
    held = server.submit({"entrypoint": ["/bin/sh", "-c", f"env > {out}/held-$RANK; sleep 60"],
                          "scaling_config": {"num_workers": 1, "use_gpu": True,
                                             "accelerator_type": "H100"}})
    server.wait_job(held["id"], {"RUNNING"})
    job = server.submit(env_job(out, 2, accelerator_type="A100", placement_strategy="PACK"))
    done = server.wait_job(job["id"], {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", done
    workers = server.request("GET", f"/api/v1/jobs/{job['id']}/workers").json["workers"]
    assert {w["node_id"] for w in workers} == {a.node_id}
    assert sorted(read_env(os.path.join(out, f"env-{r}"))["CUDA_VISIBLE_DEVICES"]
                  for r in (0, 1)) == ["0", "1"]
    # The H100 node has one GPU left: a second H100 worker gets the other one, never GPU 0.
    more = server.submit({"entrypoint": ["/bin/sh", "-c", f"env > {out}/more-$RANK"],
                          "scaling_config": {"num_workers": 1, "use_gpu": True,
                                             "accelerator_type": "H100 80GB"}})
    assert server.wait_job(more["id"], {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    assert read_env(os.path.join(out, "held-0"))["CUDA_VISIBLE_DEVICES"] == "0"
    assert read_env(os.path.join(out, "more-0"))["CUDA_VISIBLE_DEVICES"] == "1"
    more_w = server.request("GET", f"/api/v1/jobs/{more['id']}/workers").json["workers"]
    assert more_w[0]["node_id"] == h.node_id
    server.request("POST", f"/api/v1/jobs/{held['id']}/stop")
    server.wait_job(held["id"], {"STOPPED"})
    nothing = server.submit(env_job(out, 1, accelerator_type="L4"))
    j = wait_message(server, nothing["id"], "L4")
    assert j["status"] == "PENDING" and "GPU type L4" in j["status_message"], j
