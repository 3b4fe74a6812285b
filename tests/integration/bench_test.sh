#!/usr/bin/env bash
# volstack bench, end to end with real programs (losetup, mkfs.xfs, mount, dbench, FUSE):
#   1. bad arguments exit 2 and create nothing;
#   2. a short bench (3 s per stack, 512 MiB stores, every stack) writes a report.json that
#      parses, in which every requested stack ran (at least one run with a parsed dbench
#      table); a stack that fails or is unavailable is a test failure. Speed is never asserted;
#   3. --block runs the in-process workload and reports all four phases; --fio runs fio's
#      four phases on the file and zvol stacks' loop devices and reports the zvol's CPU;
#   4. Ctrl-C (SIGINT) in the middle of a run stops dbench, tears the stack down (no loop
#      device, mount or process left behind) and still writes a report marked interrupted.
# Set VOLSTACK_LONG=1 for a longer run (10 s per stack, 2 repeats).
source "$(dirname "$0")/lib.sh"
need_root
need_cmd dbench mkfs.xfs losetup python3
[ -e /dev/loop-control ] || skip "no loop devices"
[ -e /dev/fuse ] || skip "needs /dev/fuse"

json() {  # json FILE PYTHON-EXPR: prints the expression evaluated on the parsed report as r
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"
}

# Nothing of ours may be left: no loop device backed by a file under $T, no mount under $T.
no_leftovers() {
  if losetup -a | grep -F "$T/" >/dev/null; then
    losetup -a >&2
    fail "loop devices left behind"
  fi
  if grep -F " $T/" /proc/self/mountinfo >/dev/null; then
    grep -F " $T/" /proc/self/mountinfo >&2
    fail "mounts left behind"
  fi
  if ls -d "$T"/volstack-bench.* >/dev/null 2>&1; then
    fail "scratch directory left behind: $(ls -d "$T"/volstack-bench.*)"
  fi
}

secs=3 repeat=1
if [ "${VOLSTACK_LONG:-0}" = 1 ]; then secs=10 repeat=2; fi

echo "== 1. bad arguments"
mkdir "$T/bad"
for args in "--stacks nope" "--size 1M" "--repeat 0" "--time 0" "--clients 40" \
  "--dir $T/missing" "--bogus"; do
  dir_arg=(--dir "$T/bad")
  case "$args" in --dir*) dir_arg=() ;; esac
  set +e
  # shellcheck disable=SC2086
  vs bench $args "${dir_arg[@]}" >"$T/bad.out" 2>"$T/bad.err"
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "bench $args: exit $rc, want 2"
  [ "$(wc -l <"$T/bad.err")" = 1 ] || fail "bench $args: want one line on stderr, got: $(cat "$T/bad.err")"
done
[ -z "$(ls -A "$T/bad")" ] || fail "a bad argument created $(ls -A "$T/bad")"

echo "== 2. a short bench of every stack"
stacks=file,zvol,lvm-on-zvol,lvm-on-loop-on-zvol,lvm-on-file,zvol-512
set +e
vs bench --time "$secs" --clients 2 --size 512M --repeat "$repeat" --stacks "$stacks" \
  --dir "$T" --output "$T/out" >"$T/bench.out" 2>"$T/bench.err"
rc=$?
set -e
cat "$T/bench.out"
cat "$T/bench.err" >&2
for f in report.json report.md report.svg; do
  [ -s "$T/out/$f" ] || fail "no $f"
done
[ "$(json "$T/out/report.json" "r['config']['mode']")" = dbench ] || fail "not a dbench run"
[ "$(json "$T/out/report.json" "len(r['stacks'])")" = 6 ] || fail "not every stack reported"
for s in ${stacks//,/ }; do
  status=$(json "$T/out/report.json" "[x for x in r['stacks'] if x['name']=='$s'][0]['status']")
  reason=$(json "$T/out/report.json" "[x for x in r['stacks'] if x['name']=='$s'][0]['reason']")
  case "$status" in
    ok)
      ok_runs=$(json "$T/out/report.json" \
        "sum(1 for x in r['stacks'] if x['name']=='$s' for run in x['runs'] if run['ok'] and run['throughput_mb_s'] > 0 and any(o['name']=='Flush' for o in run['operations']))")
      [ "$ok_runs" -ge 1 ] || fail "$s: no run with a dbench table"
      grep -q "^ $s " "$T/bench.out" || fail "$s: not in the comparison table"
      ;;
    *) fail "$s: $status: $reason" ;;
  esac
done
[ "$rc" = 0 ] || fail "bench exited $rc"
grep -q "Throughput .* MB/sec  2 clients  2 procs" "$T/bench.out" || fail "no dbench table printed"
grep -q "</svg>" "$T/out/report.svg" || fail "report.svg is cut short"
no_leftovers

echo "== 3. --block"
vs bench --block --time 4 --clients 2 --size 64M --stacks file,zvol --repeat 1 \
  --dir "$T" --output "$T/block" >"$T/block.out"
[ "$(json "$T/block/report.json" "r['config']['mode']")" = block ] || fail "--block: wrong mode"
phases=$(json "$T/block/report.json" \
  "','.join(w['name'] for w in r['stacks'][0]['runs'][0]['workloads'])")
[ "$phases" = "seqwrite-1m,randwrite-4k,seqread-1m,randread-4k" ] || fail "--block phases: $phases"
no_leftovers

echo "== 3b. --fio on the kernel stacks"
if command -v fio >/dev/null; then
  vs bench --fio --time 4 --size 64M --stacks file,zvol --repeat 1 \
    --dir "$T" --output "$T/fio" >"$T/fio.out"
  [ "$(json "$T/fio/report.json" "r['config']['mode']")" = fio ] || fail "--fio: wrong mode"
  for s in file zvol; do
    phases=$(json "$T/fio/report.json" \
      "','.join(w['name'] for x in r['stacks'] if x['name']=='$s' for w in x['runs'][0]['workloads'] if w['iops'] > 0)")
    [ "$phases" = "randwrite-4k,randread-4k,seqwrite-1m,seqread-1m,randread-4k-under-seqwrite" ] || fail "--fio $s phases: $phases"
  done
  # The zvol's FUSE server is volstack's: its CPU per GiB is reported (not for the mixed phase,
  # whose CPU is the writer's too); the file's has none.
  cpu=$(json "$T/fio/report.json" \
    "[c['volstack_cpu_s_per_gib'] is not None for c in r['comparison'] if c['stack']=='zvol']")
  [ "$cpu" = "[True, True, True, True, False]" ] || fail "--fio: zvol CPU per GiB: $cpu"
  grep -q "CPU s/GiB" "$T/fio.out" || fail "--fio: no CPU column printed"
  no_leftovers
  expect_fail vs bench --fio --block --dir "$T/bad"
else
  echo "  (fio missing: --fio not tried)"
fi

echo "== 4. Ctrl-C tears everything down"
"$VOLSTACK" bench --time 60 --clients 2 --size 512M --stacks file --dir "$T" --output "$T/int" \
  >"$T/int.out" 2>"$T/int.err" &
pid=$!
on_exit_kill "$pid"
for _ in $(seq 300); do
  grep -q " $T/volstack-bench.*/mnt " /proc/self/mountinfo && break
  sleep 0.1
done
grep -q " $T/volstack-bench.*/mnt " /proc/self/mountinfo || fail "the file stack never mounted"
sleep 2  # dbench is running now
kill -INT "$pid"
set +e
wait "$pid"
rc=$?
set -e
[ "$rc" = 130 ] || fail "interrupted bench exited $rc, want 130: $(cat "$T/int.err")"
[ "$(json "$T/int/report.json" "r['interrupted']")" = True ] || fail "report not marked interrupted"
no_leftovers
echo "PASS"
