#!/usr/bin/env bash
# REST API benchmark (issue: foundation), side by side with nginx in one run:
#  1. GET /api/v1/jobs/{id} (auth on, durable embedded PostgreSQL) vs nginx serving a static file
#     of the same size on this machine: requests/s of both and the ratio (goal >= 0.5).
#  2. Durable submissions: POST /api/v1/jobs with 32 connections, every 201 a committed row
#     (goal >= 2,000/s); the run counts the 201s and checks the rows in PostgreSQL, and prints
#     the server's and its PostgreSQL's CPU per submission (less load-sensitive than the rate).
#  3. PostgreSQL's own durable single-row INSERT rate on the same embedded cluster (pgbench, 32
#     clients, a one-column table) and the ratio of submissions to it.
# Usage: bench/http_bench.sh [seconds per run, default 10]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
scripts/install-deps.sh --bench >/dev/null
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-bench -j "$(nproc)" --target trainyard-server >/dev/null

work=$(mktemp -d /tmp/ty-bench-XXXXXX)
chmod 755 "$work"
port=18480
nginx_port=18481
cleanup() {
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -s stop 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

build-bench/server/trainyard-server --data-dir "$work/data" --http-port "$port" \
  --ws-port $((port + 2)) --http-threads 32 >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 300); do
  curl -fs "http://127.0.0.1:$port/api/v1/health" >/dev/null 2>&1 && break
  sleep 0.2
done
export TRAINYARD_TOKEN=$(cat "$work/data/admin.token")
url="http://127.0.0.1:$port/api/v1/jobs"
job=$(curl -fs -H "Authorization: Bearer $TRAINYARD_TOKEN" -H 'Content-Type: application/json' \
  -d @examples/torch_fashion_mnist/job.json "$url" | sed 's/.*"id": \([0-9]*\).*/\1/')
mkdir -p "$work/nginx/html"
curl -fs -H "Authorization: Bearer $TRAINYARD_TOKEN" "$url/$job" >"$work/nginx/html/job.json"
size=$(stat -c %s "$work/nginx/html/job.json")
cat >"$work/nginx/nginx.conf" <<CONF
worker_processes auto;
error_log $work/nginx/error.log;
pid $work/nginx/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  types { application/json json; }
  server { listen 127.0.0.1:$nginx_port; root $work/nginx/html; }
}
CONF
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf"

rps() { sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p'; }
echo "machine: $(nproc) cores; $secs s per run; wrk -t2 -c32; body $size bytes"
ty_get=$(wrk -t2 -c32 -d"${secs}s" -s bench/auth.lua "$url/$job" | rps)
ng_get=$(wrk -t2 -c32 -d"${secs}s" "http://127.0.0.1:$nginx_port/job.json" | rps)
printf "GET job     trainyard %10.0f req/s   nginx %10.0f req/s   ratio %.2f (goal >= 0.5)\n" \
  "$ty_get" "$ng_get" "$(echo "$ty_get / $ng_get" | bc -l)"

# CPU seconds of the server and everything under it (its PostgreSQL's postmaster and backends):
# user + system of each live process plus what its exited children used. Per submission it
# depends far less on the machine's load than the rate does.
tree_cpu() {
  local pids
  pids=$(ps -e -o pid=,ppid= | awk -v root="$server_pid" '
    { parent[$1] = $2 } END {
      n = 1; tree[root] = 1
      while (n) { n = 0; for (p in parent) if (!(p in tree) && (parent[p] in tree)) { tree[p] = 1; n = 1 } }
      for (p in tree) print p }')
  for p in $pids; do cat "/proc/$p/stat" 2>/dev/null; done |
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); t += $12 + $13 + $14 + $15 } END { printf "%.2f", t / hz }'
}
before=$(psql -h "$work/data/run" -U trainyard -d trainyard -XAtc "SELECT count(*) FROM jobs")
cpu_before=$(tree_cpu)
out=$(wrk -t2 -c32 -d"${secs}s" -s bench/submit.lua -H "Authorization: Bearer $TRAINYARD_TOKEN" "$url")
cpu_after=$(tree_cpu)
created=$(echo "$out" | sed -n 's/^created=\([0-9]*\).*/\1/p')
post=$(echo "$out" | rps)
after=$(psql -h "$work/data/run" -U trainyard -d trainyard -XAtc "SELECT count(*) FROM jobs")
# wrk stops counting replies at the deadline while the last requests are still in flight, so
# the table may hold a few more rows than wrk saw 201s; fewer rows would mean a lost job.
printf "POST job    %10.0f submissions/s (goal >= 2000); 201s seen: %s, rows added: %s: %s\n" \
  "$post" "$created" "$((after - before))" \
  "$( ((after - before >= created)) && echo 'every 201 committed' || echo 'LOST SUBMISSIONS')"
printf "POST job    %10.2f ms of server + PostgreSQL CPU per submission (%s s over %s rows; load %s)\n" \
  "$(echo "($cpu_after - $cpu_before) * 1000 / ($after - $before)" | bc -l)" \
  "$(echo "$cpu_after - $cpu_before" | bc -l)" "$((after - before))" "$(cut -d' ' -f1-3 /proc/loadavg)"

# PostgreSQL's own rate: the same cluster, durable, 32 clients each committing one-row INSERTs.
pg() { psql -h "$work/data/run" -U trainyard -d trainyard -XAtqc "$1"; }
pg "CREATE TABLE bench_insert (v text)"
echo "INSERT INTO bench_insert (v) VALUES ('x');" >"$work/insert.sql"
pg_tps=$(pgbench -h "$work/data/run" -U trainyard -n -c 32 -j 2 -T "$secs" -f "$work/insert.sql" \
  trainyard 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1)
pg "DROP TABLE bench_insert"
printf "PostgreSQL  %10.0f single-row INSERTs/s (pgbench -c 32, same cluster)   ratio %.2f\n" \
  "$pg_tps" "$(echo "$post / $pg_tps" | bc -l)"
