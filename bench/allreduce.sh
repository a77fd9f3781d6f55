#!/usr/bin/env bash
# Allreduce bus bandwidth: libtrainyard (its default transport on one host, shared memory, and
# its TCP ring) vs torch gloo vs Open MPI, side by side.
#
#   bench/allreduce.sh [BUILD_DIR]          (default BUILD_DIR: ./build)
#   env: RANKS="2 4" MIN=4K MAX=256M FACTOR=4 SECONDS_PER=0.3 REPEAT=1 PLOT=path.png
#
# All ranks run on this host over 127.0.0.1. libtrainyard runs twice: its default (shared memory
# between ranks on one host) and forced onto its TCP ring (TRAINYARD_TRANSPORT=tcp). Open MPI
# runs twice too: its default transports (shared memory between local ranks) and forced onto
# TCP (--mca btl tcp,self). gloo always uses TCP. busbw = algbw * 2(n-1)/n (nccl-tests).
# REPEAT=k runs the whole round k times, the implementations interleaved, and reports each cell's
# median: on a shared, noisy host one run of a cell can be off by several times.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
RANKS=${RANKS:-"2 4"}
REPEAT=${REPEAT:-1}
ARGS=(--min "${MIN:-4K}" --max "${MAX:-256M}" --factor "${FACTOR:-4}" --seconds "${SECONDS_PER:-0.3}")
PY=/usr/bin/python3
OUT=$(mktemp -d /tmp/ty-allreduce.XXXXXX)

cmake --build "$BUILD" --target allreduce_bench >/dev/null
have_mpi=0
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
  mpicc -O2 -o "$OUT/allreduce_mpi" "$ROOT/bench/allreduce_mpi.c" && have_mpi=1
else
  echo "note: mpicc/mpirun missing (apt-get install libopenmpi-dev openmpi-bin); skipping MPI" >&2
fi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none)

echo "host: $(nproc) cores; $(uname -r); results in $OUT; $(uptime)" >&2
for rep in $(seq "$REPEAT"); do
  for n in $RANKS; do
    echo "== round $rep, $n ranks: trainyard" >&2
    "$BUILD/bench/allreduce_bench" --ranks "$n" "${ARGS[@]}" >"$OUT/trainyard.$n.$rep"
    echo "== round $rep, $n ranks: trainyard (TCP ring)" >&2
    TRAINYARD_TRANSPORT=tcp "$BUILD/bench/allreduce_bench" --ranks "$n" "${ARGS[@]}" \
      >"$OUT/tytcp.$n.$rep"
    echo "== round $rep, $n ranks: gloo" >&2
    "$PY" "$ROOT/bench/allreduce_gloo.py" --ranks "$n" "${ARGS[@]}" >"$OUT/gloo.$n.$rep"
    if [ "$have_mpi" = 1 ]; then
      echo "== round $rep, $n ranks: Open MPI (default, shared memory)" >&2
      "${MPIRUN[@]}" -np "$n" "$OUT/allreduce_mpi" "${ARGS[@]}" >"$OUT/mpi.$n.$rep" 2>/dev/null
      echo "== round $rep, $n ranks: Open MPI (TCP)" >&2
      "${MPIRUN[@]}" --mca btl tcp,self -np "$n" "$OUT/allreduce_mpi" "${ARGS[@]}" \
        >"$OUT/mpitcp.$n.$rep" 2>/dev/null
    fi
  done
done
echo "done: $(uptime)" >&2

"$PY" - "$OUT" "${PLOT:-}" "$REPEAT" $RANKS <<'PYEOF'
import glob, os, statistics, sys
out, plot, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
ranks = [int(x) for x in sys.argv[4:]]
impls = [("trainyard", "trainyard"), ("tytcp", "ty tcp"), ("gloo", "gloo"), ("mpi", "MPI shm"),
         ("mpitcp", "MPI tcp")]

def load(name, n):
    """busbw by size: the median over the rounds that have the cell."""
    runs = {}
    for fn in glob.glob(os.path.join(out, f"{name}.{n}.*")):
        for line in open(fn):
            if line.startswith("#") or not line.strip():
                continue
            f = line.split()
            runs.setdefault(int(f[0]), []).append(float(f[4]))
    return {size: statistics.median(v) for size, v in runs.items()}

def human(b):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k:
            return f"{b // k} {unit}"
    return f"{b} B"

data = {}
for n in ranks:
    data[n] = {k: load(k, n) for k, _ in impls}
    print(f"\n{n} ranks — bus bandwidth GB/s (algbw x 2(n-1)/n), float32 sum"
          + (f", medians of {rounds} rounds" if rounds > 1 else ""))
    print(f"| size | " + " | ".join(t for _, t in impls)
          + " | ty/gloo | ty/MPI shm | ty/MPI tcp | ty tcp/gloo |")
    print("|" + "---:|" * (len(impls) + 5))
    for size in sorted(data[n]["trainyard"]):
        vals = [data[n][k].get(size) for k, _ in impls]
        cells = [f"{v:.3f}" if v is not None else "-" for v in vals]
        ty, tcp = vals[0], vals[1]
        ratios = [f"{a / b:.2f}x" if a and b else "-"
                  for a, b in ((ty, vals[2]), (ty, vals[3]), (ty, vals[4]), (tcp, vals[2]))]
        print(f"| {human(size)} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")

if plot:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        sys.exit(0)
    fig, axes = plt.subplots(1, len(ranks), figsize=(6 * len(ranks), 4.5), squeeze=False)
    for ax, n in zip(axes[0], ranks):
        for k, title in impls:
            rows = data[n][k]
            if rows:
                xs = sorted(rows)
                ax.plot(xs, [rows[x] for x in xs], marker="o", label=title)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.set_title(f"allreduce, {n} ranks on one host (loopback)")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(plot, dpi=110)
    print(f"\nplot: {plot}")
PYEOF
