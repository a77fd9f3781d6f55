#!/usr/bin/env bash
# The whole GPU run in one command, for a lent GPU machine (CUDA, nvcc, PyTorch with CUDA, NCCL,
# CMake; no Debian -dev libraries, no package registry). Before it, HERE: scripts/gpu-bundle.sh,
# then carry .gpu-bundle/root.tar.xz (or .gpu-bundle/root). It:
#   1. unpacks the bundle and points PATH, LD_LIBRARY_PATH, pkg-config and PYTHONPATH at it;
#   2. configures and builds into build-gpu (no dashboard: npm has no registry there);
#   3. runs the `gpu`-labelled tests (tests/gpu: NVML discovery and a job on its GPU by UUID, the
#      PyTorch example with nccl, NCCL through the SDK at world size 1, the CUDA example to its
#      bar, resuming across the CPU and CUDA examples) and the placement/NVML tests;
#   4. benchmarks the same MLP for 3 epochs: the CUDA example, PyTorch on the GPU, the C example
#      and PyTorch on the CPU (epoch times, accuracy), and the GPU's busy share (NVML
#      utilisation through nvidia-smi, every 100 ms) during each GPU run; then ty_allreduce on
#      device buffers through NCCL at world size 1 (bench/nccl_bench.c);
#   5. writes everything to ./gpu-out: logs, ctest output, nvidia-smi -q, the NVML samples the
#      API and /metrics showed (gpu.agent writes them), timings. Where $OUT is set (the device
#      tool), the main files and a tarball of the rest go there (it takes 8 files at most).
# Without a GPU it stops after step 3 with the gpu tests "Not Run" (the local dry run).
# Usage: scripts/gpu-run.sh
set -uo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
out=$src/gpu-out
rm -rf "$out"
mkdir -p "$out"
export TY_GPU_OUT=$out
# The files the device tool brings back: at most 8, so the rest travel in one tarball.
collect() {
  [[ -n ${OUT:-} ]] || return 0
  for f in gpu-run.log bench.json nvml-samples.txt nccl-bench.txt ctest-gpu.log nvidia-smi-q.txt; do
    [[ -f $out/$f ]] && cp "$out/$f" "$OUT/"
  done
  tar -C "$out" -czf "$OUT/gpu-out.tar.gz" .
}
trap collect EXIT
exec > >(tee -a "$out/gpu-run.log") 2>&1
echo "== gpu-run $(date -u +%FT%TZ) on $(hostname), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

bundle=$src/.gpu-bundle
root=$bundle/root
if [[ ! -d $root && -f $bundle/root.tar.xz ]]; then
  tar -C "$bundle" -xJf "$bundle/root.tar.xz"
fi
if [[ -d $root ]]; then
  multi=$root/usr/lib/x86_64-linux-gnu
  # PostgreSQL's own bin first: /usr/bin/psql is a perl wrapper (postgresql-common, not bundled).
  export PATH=$root/usr/lib/postgresql/15/bin:$root/usr/bin:$PATH
  # OpenBLAS lives in openblas-pthread/: Debian links it into place with update-alternatives.
  export LD_LIBRARY_PATH=$multi:$multi/openblas-pthread:$root/usr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # Only the bundle's .pc files, with its root as sysroot: they say prefix=/usr.
  export PKG_CONFIG_LIBDIR=$multi/pkgconfig:$multi/openblas-pthread/pkgconfig:$root/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$root
  # The bundle's headers where a Debian machine has them in /usr/include, for any target whose
  # include path does not come from pkg-config.
  export CPATH=$root/usr/include:$root/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}
  # Not the bundle's python3 packages on PYTHONPATH: the GPU machine's python3 (with PyTorch and
  # pytest) is newer, and Debian's typing_extensions breaks its torch import.
  export TY_PG_BIN_DIR=$root/usr/lib/postgresql/15/bin
  cmake_prefix=(-DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_LIBRARY_PATH="$multi"
                -DCMAKE_INCLUDE_PATH="$root/usr/include")
  # The harness runs PostgreSQL as the postgres user when root, and the datasets live in /usr/share.
  if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
    useradd -r -M -d /nonexistent -s /usr/sbin/nologin postgres || echo "cannot add user postgres"
  fi
  if [[ ! -d /usr/share/datasets/fashion-mnist && -d $root/usr/share/datasets/fashion-mnist ]]; then
    mkdir -p /usr/share/datasets && ln -s "$root/usr/share/datasets/fashion-mnist" /usr/share/datasets/
  fi
  chmod -R a+rX "$root" 2>/dev/null
  # The postgres user must reach the bundle's binaries.
  d=$root; while [[ $d != / ]]; do chmod a+x "$d" 2>/dev/null; d=$(dirname "$d"); done
else
  echo "no .gpu-bundle: using the system's libraries"
  cmake_prefix=()
fi
py=$(command -v python3)
echo "python3: $py; $("$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1)"
nvidia-smi -q > "$out/nvidia-smi-q.txt" 2>&1 && nvidia-smi -L
command -v nvcc >/dev/null && nvcc --version | tail -2

# NCCL: the CUDA toolkit's, or else the one PyTorch's wheels bring (nvidia-nccl-*: nccl.h and
# libnccl.so.2, no unversioned link for find_library).
nccl_args=()
if [[ ! -f /usr/local/cuda/include/nccl.h ]]; then
  site=$("$py" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  hdr=$(find $site -path '*nccl*' -name nccl.h 2>/dev/null | head -1)
  lib=$(find $site -path '*nccl*' -name 'libnccl.so*' 2>/dev/null | head -1)
  if [[ -n $hdr && -n $lib ]]; then
    echo "NCCL from PyTorch's wheel: $hdr, $lib"
    nccl_args=(-DNCCL_INCLUDE_DIR="$(dirname "$hdr")" -DNCCL_LIBRARY="$lib")
  else
    echo "no NCCL found (not under /usr/local/cuda, no nvidia.nccl wheel)"
  fi
fi

jobs=$(nproc)
build=$src/build-gpu
step() { echo "== $* ($(date -u +%T))"; }
step configure
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTY_WEB=OFF -DTY_FUZZ=OFF -DTY_STYLE_CHECK=OFF \
  -DTY_GPU_PYTHON="$py" -DPYTHON3="$py" "${cmake_prefix[@]}" "${nccl_args[@]}" > "$out/configure.log" 2>&1
rc=$?
grep 'trainyard:' "$out/configure.log"
if ((rc != 0)); then tail -30 "$out/configure.log"; echo "configure failed"; exit 1; fi
step build
if ! cmake --build "$build" -j "$jobs" > "$out/build.log" 2>&1; then
  tail -40 "$out/build.log"; echo "build failed"; exit 1
fi
step "gpu tests"
ctest --test-dir "$build" -L gpu -j 3 --output-on-failure > "$out/ctest-gpu.log" 2>&1
gpu_rc=$?
grep -E 'Test +#|tests passed|Not Run|Skipped|SKIP|Failed' "$out/ctest-gpu.log" | tail -30
step "placement and agent tests"
ctest --test-dir "$build" -R 'gpu_placement|gpu_nvml|sched|agent_env|agent_gpus|coll|context_' -j "$jobs" \
  --output-on-failure > "$out/ctest-placement.log" 2>&1
tail -5 "$out/ctest-placement.log"

if ! "$py" "$src/tests/gpu/gpu_gate.py" true > /dev/null; then
  echo "no GPU here: the benchmark needs one; stopping (gpu tests rc $gpu_rc)"
  exit "$gpu_rc"
fi
step "benchmark: the same MLP, 3 epochs each: CUDA example, PyTorch on the GPU, both on the CPU"
cfg=$out/bench-config.json
echo '{"epochs": 3, "checkpoint_every": 0}' > "$cfg"
# GPU busy share: NVML's utilisation (nvidia-smi reads it), sampled every 100 ms per run.
sample() { nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 > "$1" 2>&1 & smi=$!; }
sample "$out/util-cuda.txt"
CUDA_VISIBLE_DEVICES=0 "$build/examples/fashion_mnist_cuda/fashion_mnist_cuda" --config "$cfg" \
  > "$out/bench-cuda.log" 2>&1
kill "$smi" 2>/dev/null
sample "$out/util-torch.txt"
CUDA_VISIBLE_DEVICES=0 "$py" examples/torch_fashion_mnist/train.py --epochs 3 --use-gpu yes \
  > "$out/bench-torch-gpu.log" 2>&1
kill "$smi" 2>/dev/null
CUDA_VISIBLE_DEVICES= "$build/examples/fashion_mnist/fashion_mnist" --config "$cfg" \
  > "$out/bench-c-cpu.log" 2>&1
CUDA_VISIBLE_DEVICES= "$py" examples/torch_fashion_mnist/train.py --epochs 3 --use-gpu no \
  > "$out/bench-torch-cpu.log" 2>&1
"$py" - "$out" <<'PYEOF'
import json, os, re, sys
out = sys.argv[1]
def read(name):
    p = os.path.join(out, name)
    return open(p).read() if os.path.exists(p) else ""
def c_epochs(name):  # "epoch 1/3: ... test_acc 0.8512 lr 0.05 1.23 s"
    t = read(name)
    return ([float(x) for x in re.findall(r"epoch \d+/\d+: .* ([0-9.]+) s", t)],
            re.findall(r"final test accuracy: ([0-9.]+)", t))
def torch_epochs(name):
    rows = [json.loads(l) for l in read(name).splitlines() if l.startswith("{")]
    return [r["epoch_time_s"] for r in rows], [rows[-1]["accuracy"]] if rows else []
def busy(name):
    v = [float(x) for x in read(name).split() if x.replace(".", "").isdigit()]
    return sum(v) / len(v) if v else None
res = {"cuda_example": c_epochs("bench-cuda.log"), "torch_gpu": torch_epochs("bench-torch-gpu.log"),
       "c_example_cpu": c_epochs("bench-c-cpu.log"), "torch_cpu": torch_epochs("bench-torch-cpu.log"),
       "gpu_busy_pct": {"cuda_example": busy("util-cuda.txt"), "torch_gpu": busy("util-torch.txt")},
       "load": os.getloadavg(), "note": "[epoch seconds], [final accuracy]; busy = mean NVML utilization"}
json.dump(res, open(os.path.join(out, "bench.json"), "w"), indent=1)
print(json.dumps(res))
PYEOF
step "NCCL allreduce through the SDK, device buffers, world size 1"
if [[ -x $build/bench/nccl_bench ]]; then
  CUDA_VISIBLE_DEVICES=0 timeout 120 "$build/bench/nccl_bench" --min 8 --max 1073741824 \
    --seconds 0.3 > "$out/nccl-bench.txt" 2>&1
  cat "$out/nccl-bench.txt"
else
  echo "nccl_bench not built (no NCCL backend)"
fi
echo "== done (gpu tests rc $gpu_rc); results in $out"
exit "$gpu_rc"
