#!/usr/bin/env bash
# One local cluster: builds Trainyard, starts the server (embedded PostgreSQL, REST API on
# :8080, agents' websocket on :8081) and one agent, then runs the example PyTorch
# job (Fashion-MNIST, 2 workers) and follows it to the end. The cluster stays up until Ctrl-C;
# with --once it stops after the example job (its exit code is the job's).
# --servers N (2 or more): N servers on the first one's embedded PostgreSQL, the first leading
# (docs/high-availability.md); server i serves REST on 8080+2(i-1) and agents on 8081+2(i-1), and
# the agent knows them all. Kill the leader (kill -9, its pid is printed) and another takes over.
# --slurm: no agent of its own; a throwaway Slurm (scripts/slurm-local.sh, two emulated nodes,
# state in ./.trainyard/slurm) places every job, each attempt in a Slurm allocation whose nodes
# run ephemeral agents (README.md, "Slurm"); it is stopped with the cluster.
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
nservers=1
slurm=0
usage() { echo "usage: scripts/up.sh [--once] [--servers N] [--slurm] | --wipe" >&2; exit 2; }
while (($# > 0)); do
case "$1" in
  --once) once=1 ;;
  --slurm) slurm=1 ;;
  --servers)
    [[ "${2:-}" =~ ^[1-9][0-9]?$ ]] || usage
    nservers=$2
    shift
    ;;
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
  *) usage ;;
esac
shift
done

scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" >/dev/null

mkdir -p "$state"
http_port=${TRAINYARD_HTTP_PORT:-8080}
ws_port=${TRAINYARD_WS_PORT:-8081}
server_url="http://127.0.0.1:$http_port"

pids=()
# Stopped in reverse order: the agent, the other servers, then the first (its PostgreSQL last).
cleanup() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
    wait "${pids[i]}" 2>/dev/null || true
  done
  ((slurm)) && scripts/slurm-local.sh stop "$state/slurm"
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

slurm_args=()
if ((slurm)); then
  scripts/slurm-local.sh start "$state/slurm" 2
  slurm_args=(--slurm "unix:$state/slurm/slurmrestd.sock")
fi
build/server/trainyard-server --data-dir "$state/server" --http-port "$http_port" \
  --ws-port "$ws_port" "${slurm_args[@]}" >>"$state/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do
  curl -fs "$server_url/api/v1/health" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fs "$server_url/api/v1/health" >/dev/null || { tail -20 "$state/server.log"; exit 1; }
export TRAINYARD_SERVER="$server_url"
TRAINYARD_TOKEN=$(cat "$state/server/admin.token")
export TRAINYARD_TOKEN

# The other servers share the first one's PostgreSQL (its unix socket), cluster token and
# artifact store.
agent_servers="ws://127.0.0.1:$ws_port"
pg_home="$state/server"
[[ -f "$state/server/postgres.location" ]] && pg_home=$(cat "$state/server/postgres.location")
for ((i = 2; i <= nservers; i++)); do
  port_i=$((http_port + 2 * (i - 1)))
  ws_i=$((ws_port + 2 * (i - 1)))
  TRAINYARD_CLUSTER_TOKEN=$(cat "$state/server/cluster.token") \
    build/server/trainyard-server --data-dir "$state/server$i" --http-port "$port_i" \
    --ws-port "$ws_i" --database-url "host='$pg_home/run' dbname=trainyard user=trainyard" \
    --artifact-dir "$state/server/artifacts" >>"$state/server$i.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 300); do
    curl -fs "http://127.0.0.1:$port_i/api/v1/health" >/dev/null 2>&1 && break
    sleep 0.2
  done
  curl -fs "http://127.0.0.1:$port_i/api/v1/health" >/dev/null ||
    { tail -20 "$state/server$i.log"; exit 1; }
  agent_servers+=",ws://127.0.0.1:$ws_i"
done

if ((!slurm)); then
  build/worker/agent/trainyard-agent --server "$agent_servers" \
    --token-file "$state/server/cluster.token" --data-dir "$agent_dir" \
    >>"$state/agent.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do
    [[ $(build/cli/trainyard nodes --output json | grep -c '"ALIVE"') -ge 1 ]] && break
    sleep 0.2
  done
fi

echo "Trainyard is up:"
echo "  dashboard  $server_url/   (sign in with the admin token)"
echo "  REST API   $server_url/api/v1   (admin token: $state/server/admin.token)"
echo "  logs       $state/server.log, $state/agent.log"
for ((i = 2; i <= nservers; i++)); do
  echo "  server $i   http://127.0.0.1:$((http_port + 2 * (i - 1)))/api/v1   (log $state/server$i.log)"
done
if ((nservers > 1)); then
  echo "  the leader is server 1 (pid ${pids[0]}); GET /api/v1/health says each server's role"
fi
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
if ((nservers == 1)); then
  build/cli/trainyard wait "$job" --timeout 1800 || status=$?
else
  # Follows the job on whichever server answers: a server lost for 5 s (exit 3) hands over to
  # the next one.
  i=0
  while true; do
    url="http://127.0.0.1:$((http_port + 2 * i))"
    status=0
    build/cli/trainyard --server "$url" --reconnect-timeout 5 wait "$job" --timeout 1800 ||
      status=$?
    ((status == 3)) || break
    i=$(((i + 1) % nservers))
    echo "following the job on http://127.0.0.1:$((http_port + 2 * i)) instead"
  done
  export TRAINYARD_SERVER="$url"
fi
build/cli/trainyard get "$job"
if ((once)); then
  exit "$status"
fi
echo
echo "The cluster keeps running; press Ctrl-C to stop it."
while true; do
  sleep 3600
done
