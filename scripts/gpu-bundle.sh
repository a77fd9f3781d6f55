#!/usr/bin/env bash
# Run HERE (a Debian machine with a package registry) before a GPU run: downloads the Debian
# packages Trainyard needs to build and test that a GPU machine lacks (it has CUDA, nvcc,
# PyTorch, NCCL and CMake but no -dev libraries and no registry), with their library
# dependencies, and unpacks them with `dpkg -x` into .gpu-bundle/root (ignored by git).
# scripts/gpu-run.sh, run on the GPU machine, uses that tree (the `run`
# tool's carry limit is 64 MiB for all carried paths; the size is printed at the end).
# The tree is also packed into .gpu-bundle/root.tar.xz, the one file to carry: gpu-run.sh
# unpacks it when .gpu-bundle/root is absent.
# Usage: scripts/gpu-bundle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=.gpu-bundle
top=(
  libmicrohttpd-dev libwebsockets-dev libjansson-dev libpq-dev libcurl4-openssl-dev libssl-dev
  zlib1g-dev libarchive-dev libcmocka-dev pkgconf postgresql-15 postgresql-client-15 python3-pytest
  libopenblas-dev libopenblas-pthread-dev dataset-fashion-mnist
)
# Never bundled: the C runtime and compilers (the GPU machine has its own, and a second glibc
# on LD_LIBRARY_PATH breaks every program), perl and PostgreSQL's JIT (libllvm: jit stays off).
skip='^(libc6|libc-bin|libc6-dev|libgcc-s1|libstdc\+\+6|gcc-.*|cpp.*|libllvm.*|perl.*|libperl.*|debconf.*|cdebconf|dpkg|locales-all|libc-l10n|libz3-.*|usrmerge|usr-is-merged|libwebsockets-evlib-.*|libglib2\.0-0|lib.*-perl|install-info|mailcap|sensible-utils|libnewt.*|libslang2|libtextwrap1|libdebian-installer4|libsemanage.*|libsepol2|libopenblas.*-(openmp|serial).*|libomp.*|tar|bash|coreutils|sed|grep|lsb-base|sysvinit-utils|init-system-helpers|adduser|passwd|login|util-linux|mount|procps|ssl-cert|tzdata|locales|logrotate|cron|python3|python3\.[0-9]+|python3-minimal|libpython3.*|python3\.[0-9]+-minimal|media-types|mime-support|readline-common|ucf|postgresql-common|netbase|libsystemd0|libselinux1|libaudit.*|libpam.*|libcap-ng0|libcrypt1|libcrypt-dev|linux-libc-dev|libnsl.*|rpcsvc-proto|libtirpc.*)$'
mapfile -t closure < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances "${top[@]}" | grep -v '^ ' | grep -v '^<' | sort -u)
want=()
for p in "${closure[@]}"; do
  [[ $p =~ $skip ]] && continue
  prio=$(apt-cache show --no-all-versions "$p" 2>/dev/null | sed -n 's/^Priority: //p' | head -1)
  [[ $prio == required ]] && continue
  want+=("$p")
done
rm -rf "$bundle"
mkdir -p "$bundle/debs" "$bundle/root"
echo "downloading ${#want[@]} packages: ${want[*]}"
(cd "$bundle/debs" && apt-get download -q "${want[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
for d in "$bundle"/debs/*.deb; do
  dpkg -x "$d" "$bundle/root"
done
# PostgreSQL's binaries find their share and lib directories relative to themselves; the bundle
# keeps Debian's layout, so nothing is rewritten. What is not needed at all goes.
r=$bundle/root
rm -rf "$r/usr/share/doc" "$r/usr/share/man" "$r/usr/share/locale" "$r/usr/share/lintian" \
  "$r/usr/share/postgresql/15/man" \
  "$r/usr/lib/postgresql/15/lib/bitcode" "$r/usr/share/info"
find "$r" -name '*.a' -delete # static libraries: the build links shared ones
find "$r/usr/share/postgresql/15/extension" -type f ! -name 'plpgsql*' -delete
# The harness needs initdb, pg_ctl, postgres (and psql for a look); not the other clients.
find "$r/usr/lib/postgresql/15/bin" -type f ! -name initdb ! -name pg_ctl ! -name postgres \
  ! -name psql -delete
find "$r/usr/lib/postgresql/15/lib" -name '*.so' ! -name plpgsql.so ! -name dict_snowball.so \
  ! -name 'libpq*' -delete
# One compressed file to carry: the unpacked tree is larger than the carry limit (64 MiB).
tar -C "$bundle" -cf - root | xz -T2 -9 > "$bundle/root.tar.xz"
rm -rf "$bundle/debs"
echo "bundle: $(du -sh "$r" | cut -f1) unpacked in $r; carry $bundle/root.tar.xz:" \
  "$(du -m "$bundle/root.tar.xz" | cut -f1) MiB (limit 64 MiB)"
