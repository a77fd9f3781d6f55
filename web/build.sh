#!/bin/sh
# The two steps web/CMakeLists.txt runs to build the dashboard (docs/dashboard.md):
#   web/build.sh ci NPM WEB_DIR             npm ci: the pinned packages of package-lock.json
#   web/build.sh build NODE WEB_DIR OUT VOCAB_JS
#                                           vite build into OUT, with VOCAB_JS (vocab-dump's
#                                           module, see common/vocab.h) as the module `vocab`
# An `npm ci` that fails (no network, a registry certificate this machine does not trust) is a
# warning, not an error: the build goes on without the dashboard (OUT is removed) and the
# browser.* tests report "Not Run". A failing `vite build` is an error.
set -u
step=$1
case "$step" in
ci)
    npm=$2 dir=$3
    cd "$dir" || exit 1
    "$npm" ci --no-audit --no-fund --prefer-offline --loglevel=error && exit 0
    rm -rf node_modules
    echo "warning: npm ci failed (the npm registry unreachable, or its certificate not trusted):" \
        "the web dashboard is not built and the browser.* tests will not run" >&2
    exit 0
    ;;
build)
    node=$2 dir=$3 out=$4 vocab=$5
    if [ ! -f "$dir/node_modules/vite/bin/vite.js" ]; then
        rm -rf "$out"
        echo "warning: the web dashboard is not built (npm ci failed)" >&2
        exit 0
    fi
    cd "$dir" || exit 1
    TY_WEB_OUT=$out TY_VOCAB_JS=$vocab exec "$node" node_modules/vite/bin/vite.js build --logLevel warn
    ;;
*)
    echo "usage: web/build.sh ci NPM WEB_DIR | build NODE WEB_DIR OUT VOCAB_JS" >&2
    exit 2
    ;;
esac
