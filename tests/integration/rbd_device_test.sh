#!/usr/bin/env bash
# RbdDevice against a real cluster: the unit tests in src/remote/rbd_device_test.cc that need
# one (the BlockDevice conformance suite on fresh images, 32 threads of requests in flight,
# open errors naming the device, one connection shared per process) run against a throwaway
# cluster started here.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ceph_lib.sh"
unit=$(dirname "$VOLSTACK")/../src/remote/volstack_remote_test
[ -x "$unit" ] || fail "no unit test binary at $unit"
start_ceph_cluster
VOLSTACK_TEST_CEPH_CONF=$CEPH_CONF timeout -k 5 120 "$unit" --gtest_filter='Rbd*' \
  --gtest_brief=1 >"$T/unit.out" 2>&1 || fail "rbd unit tests: $(tail -n 40 "$T/unit.out")"
grep -q "SKIPPED.*Rbd/BlockDeviceConformance\|SKIPPED.*RbdClusterTest" "$T/unit.out" &&
  fail "cluster tests skipped although a cluster runs: $(cat "$T/unit.out")"
grep -q "PASSED" "$T/unit.out" || fail "no PASSED line: $(cat "$T/unit.out")"
echo PASS
