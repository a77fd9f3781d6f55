"""On a real GPU (label `gpu`, gated by gpu_gate.py): the agent finds the GPUs through NVML, names
the node's gpu_type after them, a worker sees exactly the GPU it was given, by UUID, and the
agent's NVML samples of the real driver reach GET /nodes and /metrics. With TY_GPU_OUT set
(scripts/gpu-run.sh) the samples as the API and /metrics showed them are written there."""
import json
import os
import sys
import time

import harness

PY = sys.executable  # the python3 with PyTorch that runs the test


def test_nvml_discovery_and_a_job_on_its_gpu(server, agent_factory):
    a = agent_factory(args=["--cpus", "4", "--gpu-sample-interval", "1"])
    node = a.wait_node()
    gpus = node["resources"]["GPU"]
    assert gpus and gpus == list(range(len(gpus))), node
    assert node["gpu_type"] and node["gpu_type"].startswith("NVIDIA"), node
    assert "NVML GPU 0: " in a.log_text() and ", GPU-" in a.log_text()
    out = harness.make_tmpdir("ty-gpu-")
    probe = ("import json, os, torch; print(json.dumps({'visible': os.environ["
             "'CUDA_VISIBLE_DEVICES'], 'count': torch.cuda.device_count(), "
             "'name': torch.cuda.get_device_name(0)}))")
    token = node["gpu_type"].split()[1]  # "H100" of "NVIDIA H100 80GB HBM3"
    job = server.submit({"entrypoint": ["/bin/sh", "-c", f"{PY} -c \"{probe}\" > {out}/probe"],
                         "scaling_config": {"num_workers": 1, "use_gpu": True,
                                            "accelerator_type": token}})
    done = server.wait_job(job["id"], {"SUCCEEDED", "FAILED"}, timeout=120)
    assert done["status"] == "SUCCEEDED", done
    with open(os.path.join(out, "probe")) as f:
        seen = json.load(f)
    print("worker saw", seen)
    assert seen["visible"].startswith("GPU-") and "," not in seen["visible"]
    assert seen["count"] == 1 and token in seen["name"]

    # The real driver's samples, as the API and /metrics show them.
    deadline = time.time() + 30
    while True:
        api = server.request("GET", f"/api/v1/nodes/{node['id']}").json
        if len(api.get("gpus", [])) == len(gpus):
            break
        assert time.time() < deadline, f"no NVML sample in GET /nodes: {api}"
        time.sleep(0.5)
    metrics = [line for line in server.request("GET", "/metrics").text.splitlines()
               if line.startswith("trainyard_gpu_")]
    if os.environ.get("TY_GPU_OUT"):
        with open(os.path.join(os.environ["TY_GPU_OUT"], "nvml-samples.txt"), "w") as f:
            f.write(json.dumps(api["gpus"], indent=1) + "\n" + "\n".join(metrics) + "\n")
    for g in api["gpus"]:
        assert g["uuid"].startswith("GPU-") and not g["lost"], g
        assert g["memory_mb"] > 0 and 0 <= g["memory_used_mb"] <= g["memory_mb"], g
        assert 0 <= g["utilization_pct"] <= 100 and g["temperature_c"] > 0, g
        assert g["power_mw"] > 0, g
        total = [line for line in metrics if line.startswith("trainyard_gpu_memory_total_bytes")
                 and f'uuid="{g["uuid"]}"' in line]
        assert len(total) == 1 and float(total[0].split()[-1]) == g["memory_mb"] * 1048576, metrics
