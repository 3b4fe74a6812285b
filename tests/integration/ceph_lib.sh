# Helpers for the RBD tests (source after lib.sh): one throwaway Ceph cluster per test script
# (scripts/ceph-test-cluster.sh) under $T/ceph, stopped at exit by the PIDs it started.

# Starts the cluster and sets CEPH_CONF. Skips (exit 77, saying why) when this volstack was
# built without librbd, when Ceph's packages are not installed, or when the cluster does not
# come up (its last log lines are printed).
start_ceph_cluster() {
  need_cmd ceph-mon ceph-osd ceph rbd uuidgen python3
  [[ "$(ldd "$VOLSTACK" 2>/dev/null)" == *librbd* ]] || skip "volstack was built without librbd (librbd-dev)"
  local script=${VOLSTACK_SOURCE_DIR:-$(dirname "$0")/../..}/scripts/ceph-test-cluster.sh
  CEPH_SCRIPT=$script
  on_exit "$script stop $T/ceph"
  CEPH_CONF=$(timeout -k 5 120 "$script" start "$T/ceph" 2>"$T/ceph-start.err") ||
    skip "the Ceph test cluster did not start: $(tail -n 5 "$T/ceph-start.err")"
}
# rbd_create IMAGE SIZE: a new image in pool rbd.
rbd_create() { timeout -k 5 30 rbd -c "$CEPH_CONF" create --size "$2" "rbd/$1"; }
# rbd_name IMAGE: the volstack device name of an image of the test cluster.
rbd_name() { echo "rbd:rbd/$1:conf=$CEPH_CONF"; }
