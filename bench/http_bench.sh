#!/usr/bin/env bash
# REST API benchmark (issue: foundation), side by side with nginx in one run:
#  1. GET /api/v1/jobs/{id} (auth on, durable embedded PostgreSQL) vs nginx serving a static file
#     of the same size on this machine: requests/s of both and the ratio (goal >= 0.5).
#  2. Durable submissions: POST /api/v1/jobs with 32 connections, every 201 a committed row
#     (goal >= 2,000/s); the run counts the 201s and checks the rows in PostgreSQL, and prints
#     the server's and its PostgreSQL's CPU per submission (less load-sensitive than the rate).
#  3. PostgreSQL's own durable single-row INSERT rate on the same embedded cluster (pgbench, 32
#     clients, a one-column table) and the ratio of submissions to it.
# With --base BINARY: an A/B of the submissions instead. The POST phase alone (a fresh server and
# data directory, 1 s of warm-up, then the run) alternately with BINARY (another build of
# trainyard-server, e.g. of an older commit) and with this checkout's, --rounds times (default
# 4); prints each run's rate and CPU per submission, then both medians and their ratios.
# Usage: bench/http_bench.sh [--base BINARY [--rounds N]] [seconds per run, default 10]
# (TY_BENCH_PORT: the server's HTTP port, default 18480; nginx's is the next one.)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=10
base=""
rounds=4
while (($#)); do
  case $1 in
    --base) base=$(realpath "$2"); shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) secs=$1; shift ;;
  esac
done
[[ -z "$base" || -x "$base" ]] || { echo "--base $base: not an executable" >&2; exit 2; }
scripts/install-deps.sh --bench >/dev/null
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-bench -j "$(nproc)" --target trainyard-server >/dev/null

work=$(mktemp -d /tmp/ty-bench-XXXXXX)
chmod 755 "$work"
port=${TY_BENCH_PORT:-18480}
nginx_port=$((port + 1))
server_pid=""
stop_server() {
  [[ -n "$server_pid" ]] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
cleanup() {
  stop_server
  nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -s stop 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Starts server binary $1 on a fresh data directory $work/data; sets server_pid, TRAINYARD_TOKEN.
start_server() {
  rm -rf "$work/data"
  "$1" --data-dir "$work/data" --http-port "$port" --ws-port $((port + 2)) --http-threads 32 \
    >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 300); do
    curl -fs "http://127.0.0.1:$port/api/v1/health" >/dev/null 2>&1 && break
    sleep 0.2
  done
  export TRAINYARD_TOKEN=$(cat "$work/data/admin.token")
}
url="http://127.0.0.1:$port/api/v1/jobs"
rps() { sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p'; }
jobs_count() { psql -h "$work/data/run" -U trainyard -d trainyard -XAtc "SELECT count(*) FROM jobs"; }

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

# $1 seconds of submissions against the running server: sets post (submissions/s), created (201s
# seen), rows (rows added), cpu_s (server + PostgreSQL CPU seconds) and cpu_ms (per row).
post_phase() {
  local before after cpu_before cpu_after out
  before=$(jobs_count)
  cpu_before=$(tree_cpu)
  out=$(wrk -t2 -c32 -d"${1}s" -s bench/submit.lua -H "Authorization: Bearer $TRAINYARD_TOKEN" "$url")
  cpu_after=$(tree_cpu)
  created=$(echo "$out" | sed -n 's/^created=\([0-9]*\).*/\1/p')
  post=$(echo "$out" | rps)
  after=$(jobs_count)
  rows=$((after - before))
  cpu_s=$(echo "$cpu_after - $cpu_before" | bc -l)
  cpu_ms=$(echo "$cpu_s * 1000 / $rows" | bc -l)
}
# wrk stops counting replies at the deadline while the last requests are still in flight, so
# the table may hold a few more rows than wrk saw 201s; fewer rows would mean a lost job.
committed() { ((rows >= created)) && echo 'every 201 committed' || echo 'LOST SUBMISSIONS'; }
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

if [[ -n "$base" ]]; then
  echo "machine: $(nproc) cores; A/B of POST /api/v1/jobs, $rounds rounds of $secs s per binary;" \
    "wrk -t2 -c32; base $base"
  declare -A rates cpus
  for r in $(seq 1 "$rounds"); do
    for which in base new; do
      bin=$base
      [[ $which == new ]] && bin=build-bench/server/trainyard-server
      start_server "$bin"
      post_phase 1 # warm-up: the pool's connections, their plans
      post_phase "$secs"
      stop_server
      rates[$which]+="$post "
      cpus[$which]+="$cpu_ms "
      printf "round %d %-4s %8.0f submissions/s  %5.2f ms CPU/submission  %s 201s, %s rows: %s (load %s)\n" \
        "$r" "$which" "$post" "$cpu_ms" "$created" "$rows" "$(committed)" "$(cut -d' ' -f1 /proc/loadavg)"
    done
  done
  for which in base new; do
    printf "%-4s median %8.0f submissions/s  %5.2f ms CPU/submission\n" "$which" \
      "$(echo ${rates[$which]} | tr ' ' '\n' | median)" "$(echo ${cpus[$which]} | tr ' ' '\n' | median)"
  done
  nr=$(echo ${rates[new]} | tr ' ' '\n' | median)
  br=$(echo ${rates[base]} | tr ' ' '\n' | median)
  nc=$(echo ${cpus[new]} | tr ' ' '\n' | median)
  bcpu=$(echo ${cpus[base]} | tr ' ' '\n' | median)
  printf "new / base: rate %.2f, CPU per submission %.2f\n" "$(echo "$nr / $br" | bc -l)" \
    "$(echo "$nc / $bcpu" | bc -l)"
  exit 0
fi

start_server build-bench/server/trainyard-server
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

echo "machine: $(nproc) cores; $secs s per run; wrk -t2 -c32; body $size bytes"
ty_get=$(wrk -t2 -c32 -d"${secs}s" -s bench/auth.lua "$url/$job" | rps)
ng_get=$(wrk -t2 -c32 -d"${secs}s" "http://127.0.0.1:$nginx_port/job.json" | rps)
printf "GET job     trainyard %10.0f req/s   nginx %10.0f req/s   ratio %.2f (goal >= 0.5)\n" \
  "$ty_get" "$ng_get" "$(echo "$ty_get / $ng_get" | bc -l)"

post_phase "$secs"
printf "POST job    %10.0f submissions/s (goal >= 2000); 201s seen: %s, rows added: %s: %s\n" \
  "$post" "$created" "$rows" "$(committed)"
printf "POST job    %10.2f ms of server + PostgreSQL CPU per submission (%s s over %s rows; load %s)\n" \
  "$cpu_ms" "$cpu_s" "$rows" "$(cut -d' ' -f1-3 /proc/loadavg)"

# PostgreSQL's own rate: the same cluster, durable, 32 clients each committing one-row INSERTs.
pg() { psql -h "$work/data/run" -U trainyard -d trainyard -XAtqc "$1"; }
pg "CREATE TABLE bench_insert (v text)"
echo "INSERT INTO bench_insert (v) VALUES ('x');" >"$work/insert.sql"
pg_tps=$(pgbench -h "$work/data/run" -U trainyard -n -c 32 -j 2 -T "$secs" -f "$work/insert.sql" \
  trainyard 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1)
pg "DROP TABLE bench_insert"
printf "PostgreSQL  %10.0f single-row INSERTs/s (pgbench -c 32, same cluster)   ratio %.2f\n" \
  "$pg_tps" "$(echo "$post / $pg_tps" | bc -l)"
