#!/usr/bin/env bash
# Starts a one-machine Trainyard cluster for a CI job (examples/ci/train.yml): builds Trainyard
# from the checkout in $1 (default: the directory above examples/), starts trainyard-server
# (embedded PostgreSQL) and one trainyard-agent in the background, waits until the node is
# ALIVE, and writes TRAINYARD_SERVER, TRAINYARD_TOKEN and PATH (for `trainyard`) to
# $GITHUB_ENV when set (else prints them as export lines). The processes end with the runner.
set -euo pipefail
src=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
state=${TRAINYARD_CI_STATE:-${RUNNER_TEMP:-/tmp}/trainyard-ci}
http_port=${TRAINYARD_HTTP_PORT:-8080}
ws_port=${TRAINYARD_WS_PORT:-8081}

"$src/scripts/install-deps.sh"
cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$src/build" -j "$(nproc)" >/dev/null

mkdir -p "$state"
nohup "$src/build/server/trainyard-server" --data-dir "$state/server" --http-port "$http_port" \
  --ws-port "$ws_port" >>"$state/server.log" 2>&1 &
server="http://127.0.0.1:$http_port"
for _ in $(seq 1 300); do
  curl -fs "$server/api/v1/health" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fs "$server/api/v1/health" >/dev/null || { tail -20 "$state/server.log"; exit 1; }
nohup "$src/build/worker/agent/trainyard-agent" --server "ws://127.0.0.1:$ws_port" \
  --token-file "$state/server/cluster.token" --data-dir "$state/agent" \
  >>"$state/agent.log" 2>&1 &
export TRAINYARD_SERVER="$server"
TRAINYARD_TOKEN=$(cat "$state/server/admin.token")
export TRAINYARD_TOKEN
for _ in $(seq 1 100); do
  [[ $("$src/build/cli/trainyard" nodes --output json | grep -c '"ALIVE"') -ge 1 ]] && break
  sleep 0.2
done
if [[ -n "${GITHUB_ENV:-}" ]]; then
  {
    echo "TRAINYARD_SERVER=$TRAINYARD_SERVER"
    echo "TRAINYARD_TOKEN=$TRAINYARD_TOKEN"
    echo "PATH=$src/build/cli:$PATH"
  } >>"$GITHUB_ENV"
else
  echo "export TRAINYARD_SERVER=$TRAINYARD_SERVER TRAINYARD_TOKEN=$TRAINYARD_TOKEN"
  echo "export PATH=$src/build/cli:\$PATH"
fi
