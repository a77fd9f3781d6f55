#!/usr/bin/env bash
# Installs the Debian packages Trainyard needs to build, run and test, when they are missing.
# Usage: scripts/install-deps.sh [--bench]   (--bench adds the benchmark peers: wrk, nginx, Open MPI)
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libmicrohttpd-dev libwebsockets-dev libjansson-dev libpq-dev libcurl4-openssl-dev libssl-dev
  zlib1g-dev libarchive-dev libopenblas-dev libcmocka-dev clang-format
  postgresql postgresql-client
  slurm-wlm slurmrestd slurm-wlm-jwt-plugin munge  # scripts/slurm-local.sh, --slurm (README "Slurm")
  python3 python3-pytest python3-prometheus-client python3-torch dataset-fashion-mnist
  python3-pandas            # Result.metrics_dataframe (docs/python-api.md)
  python3-cloudpickle       # functions that travel by value: notebooks, python3 - (docs/python-api.md)
  python3-optuna            # tune.OptunaSearch (docs/python-api.md)
  python3-nbclient python3-ipykernel python3-nbformat  # the notebook test (test_ray_notebook.py)
  iproute2 procps curl ca-certificates sudo openssl
  valgrind                  # the CLI's leak check (tests/integration/test_cli.py)
  clang libclang-rt-14-dev  # libFuzzer targets and their runtime (docs/fuzzing.md)
  chromium                  # the dashboard's browser tests (tests/browser, docs/dashboard.md)
)
# The dashboard's build (web/, docs/dashboard.md) needs node >= 18 and npm: Debian's, unless the
# machine already has them (an existing node is never replaced).
command -v node >/dev/null 2>&1 || command -v nodejs >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(wrk nginx-light bc libopenmpi-dev openmpi-bin python3-matplotlib)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "installing: ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  sudo_cmd=(sudo)
fi
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
