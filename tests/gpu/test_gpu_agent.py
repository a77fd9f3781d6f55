"""On a real GPU (label `gpu`, gated by gpu_gate.py): the agent finds the GPUs through NVML, names
the node's gpu_type after them, and a worker sees exactly the GPU it was given, by UUID."""
import json
import os
import sys

import harness

PY = sys.executable  # the python3 with PyTorch that runs the test


def test_nvml_discovery_and_a_job_on_its_gpu(server, agent_factory):
    a = agent_factory(args=["--cpus", "4"])
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
