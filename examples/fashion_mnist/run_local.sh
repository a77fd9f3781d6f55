#!/usr/bin/env bash
# run_local.sh: start N workers of a Trainyard program on this machine, by hand, with the
# environment the agent would give them (DESIGN.md §3) minus the report socket: each worker then
# prints its reports to stderr as JSON lines instead of sending them to an agent.
#
#   usage: run_local.sh N PROGRAM [CONFIG_JSON_FILE]
#
# Rank 0's stdout and stderr pass through; other ranks' stdout is dropped and their report lines
# filtered out of stderr (errors still show). Exits 0 when every worker exited 0, else with the
# first non-zero status.
set -u
if [ $# -lt 2 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 N PROGRAM [CONFIG_JSON_FILE]" >&2
    exit 2
fi
n=$1
prog=$2
config='{}'
if [ $# -ge 3 ]; then
    config=$(cat "$3") || exit 2
fi
# A free port: bind to port 0 and read back what the kernel chose.
port=${MASTER_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)))}

pids=()
for ((r = 0; r < n; r++)); do
    envs=(RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n NODE_RANK=0
          MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TRAINYARD_BACKEND=native
          TRAINYARD_CONFIG="$config")
    if [ "$r" -eq 0 ]; then
        env "${envs[@]}" "$prog" &
    else
        env "${envs[@]}" "$prog" > /dev/null 2> >(grep -v '^{"type":"report"' >&2) &
    fi
    pids+=($!)
done
status=0
for p in "${pids[@]}"; do
    wait "$p"
    rc=$?
    if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then
        status=$rc
    fi
done
exit $status
