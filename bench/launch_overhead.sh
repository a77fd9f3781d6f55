#!/bin/sh
# Trainyard's overhead on a real PyTorch DDP run (examples/torch_fashion_mnist/train.py, 2 workers):
# by hand with torch's env:// variables vs through Trainyard (server + agent), alternating.
# Prints the wall times and the ratio. Not a test. Figures: docs/bench-launch.md.
#
#   bench/launch_overhead.sh [BUILD_DIR] [-- extra args for bench/launch_overhead.py]
#   e.g. bench/launch_overhead.sh build-bench3 --reps 5 --config '{"epochs":1,"limit_train":20000}'
#
# Needs /usr/bin/python3 with torch and numpy, the Fashion-MNIST files under
# /usr/share/datasets/fashion-mnist, PostgreSQL server binaries, and a built tree
# (cmake -S . -B build-bench3 -DCMAKE_BUILD_TYPE=Release && cmake --build build-bench3 -j2).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=${1:-$root/build-bench3}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
python=/usr/bin/python3
if ! "$python" -c 'import torch, numpy' 2>/dev/null; then
    echo "launch_overhead.sh: $python cannot import torch and numpy" >&2
    exit 2
fi
for b in server/trainyard-server worker/agent/trainyard-agent; do
    if [ ! -x "$build/$b" ]; then
        echo "launch_overhead.sh: $build/$b is missing; build first" >&2
        exit 2
    fi
done
exec "$python" "$here/launch_overhead.py" --build "$build" "$@"
