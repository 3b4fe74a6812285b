#!/usr/bin/env bash
# One-step set-up for a fresh Debian 12 machine: installs what volstack needs with apt-get
# (only what is missing), configures and builds, then runs what was asked:
#
#   bash scripts/setup.sh demo    volstack bench's quick demo on file-backed stores
#   bash scripts/setup.sh test    every test (unit, integration with real programs)
#   bash scripts/setup.sh build   just install and build
#   bash scripts/setup.sh install build, then install volstack and its systemd unit
#
# Idempotent and quiet when there is nothing to do. Needs root for apt-get and for the tests
# that use loop devices, FUSE and mount.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=${VOLSTACK_BUILD_DIR:-$here/build}
mode=${1:-build}

packages=(
  # build
  cmake g++ make pkg-config clang-format python3
  libfuse3-dev liburing-dev libxxhash-dev liblz4-dev libzstd-dev libssl-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libgnutls28-dev libnbd-dev librbd-dev librados-dev
  # real programs the integration tests and the bench drive
  fuse3 lvm2 util-linux xfsprogs dbench nbdkit libnbd-bin qemu-utils fio gnutls-bin
  thin-provisioning-tools  # thin_restore, thin_check, thin_dump: lvm_thin_test.sh
  lz4 zstd  # bench/compress_space.sh compares the pool with the command-line codecs
  # a throwaway Ceph cluster for the RBD tests (scripts/ceph-test-cluster.sh)
  ceph-mon ceph-osd ceph-common uuid-runtime
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j "$(nproc)" -- --no-print-directory >"$build/build.log" 2>&1 || {
  tail -n 60 "$build/build.log" >&2
  echo "setup: build failed (full log: $build/build.log)" >&2
  exit 1
}

case "$mode" in
  build) ;;
  demo)
    exec "$build/tools/volstack" bench --quick
    ;;
  test)
    cd "$build"
    exec ctest --output-on-failure --timeout 900 -j "$(nproc)"
    ;;
  install)
    cmake --install "$build" >/dev/null
    ;;
  *)
    echo "usage: $0 demo|test|build|install" >&2
    exit 2
    ;;
esac
