#!/usr/bin/env bash
# One local cluster: builds Trainyard, starts the server (embedded PostgreSQL, REST API on
# :8080, agents' websocket on :8081) and one agent, then runs the example PyTorch
# job (Fashion-MNIST, 2 workers) and follows it to the end. The cluster stays up until Ctrl-C;
# with --once it stops after the example job (its exit code is the job's).
# State lives in ./.trainyard; `scripts/up.sh --wipe` deletes it (and the embedded database,
# wherever it lives) to start afresh. Works from any directory, as root or as a user with sudo.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
state="$root/.trainyard"
# As root the agent runs each job's workers under a uid of their own, which cannot enter a clone
# under /root (mode 0700): then the agent's data directory (its report socket) and the example's
# files go under /var/lib/trainyard, where workers can reach them.
private=0
agent_dir="$state/agent"
workdir=$root
if [[ $(id -u) -eq 0 ]] && ! setpriv --reuid=65534 --regid=65534 --clear-groups \
    test -r "$root/examples/torch_fashion_mnist/train.py" 2>/dev/null; then
  private=1
  agent_dir=/var/lib/trainyard/agent
  workdir=/var/lib/trainyard/example
fi
once=0
case "${1:-}" in
  --once) once=1 ;;
  --wipe)
    if [[ -f "$state/server/postgres/postmaster.pid" ]] ||
       { [[ -f "$state/server/postgres.location" ]] &&
         [[ -f "$(cat "$state/server/postgres.location")/postgres/postmaster.pid" ]]; }; then
      echo "the local cluster is still running: stop it (Ctrl-C in its terminal) first" >&2
      exit 1
    fi
    sudo_cmd=()
    [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
    if [[ -f "$state/server/postgres.location" ]]; then
      "${sudo_cmd[@]}" rm -rf -- "$(cat "$state/server/postgres.location")"
    fi
    "${sudo_cmd[@]}" rm -rf -- "$state"
    ((private)) && rm -rf -- "$agent_dir" "$workdir"
    echo "removed $state"
    exit 0
    ;;
  "") ;;
  *) echo "usage: scripts/up.sh [--once | --wipe]" >&2; exit 2 ;;
esac

scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" >/dev/null

mkdir -p "$state"
http_port=${TRAINYARD_HTTP_PORT:-8080}
ws_port=${TRAINYARD_WS_PORT:-8081}
server_url="http://127.0.0.1:$http_port"

pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

build/server/trainyard-server --data-dir "$state/server" --http-port "$http_port" \
  --ws-port "$ws_port" >>"$state/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do
  curl -fs "$server_url/api/v1/health" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fs "$server_url/api/v1/health" >/dev/null || { tail -20 "$state/server.log"; exit 1; }
export TRAINYARD_SERVER="$server_url"
TRAINYARD_TOKEN=$(cat "$state/server/admin.token")
export TRAINYARD_TOKEN

build/worker/agent/trainyard-agent --server "ws://127.0.0.1:$ws_port" \
  --token-file "$state/server/cluster.token" --data-dir "$agent_dir" \
  >>"$state/agent.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  [[ $(build/cli/trainyard nodes --output json | grep -c '"ALIVE"') -ge 1 ]] && break
  sleep 0.2
done

echo "Trainyard is up:"
echo "  dashboard  $server_url/   (sign in with the admin token)"
echo "  REST API   $server_url/api/v1   (admin token: $state/server/admin.token)"
echo "  logs       $state/server.log, $state/agent.log"
echo
if ((private)); then
  rm -rf "$workdir"
  mkdir -p "$workdir/examples"
  cp -r examples/torch_fashion_mnist "$workdir/examples/"
  chmod -R go+rX "$workdir"
  echo "the example's files are copied to $workdir (workers cannot read $root)"
fi
spec=$(python3 -c 'import json, sys
spec = json.load(open("examples/torch_fashion_mnist/job.json"))
spec["working_dir"] = sys.argv[1]
print(json.dumps(spec))' "$workdir")
job=$(printf '%s' "$spec" | build/cli/trainyard submit -)
echo "example job $job submitted: PyTorch DDP, 2 workers, Fashion-MNIST"
status=0
build/cli/trainyard wait "$job" --timeout 1800 || status=$?
build/cli/trainyard get "$job"
if ((once)); then
  exit "$status"
fi
echo
echo "The cluster keeps running; press Ctrl-C to stop it."
while true; do
  sleep 3600
done
