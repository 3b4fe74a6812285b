#!/usr/bin/env bash
# An RBD image, named `rbd:POOL/IMAGE:conf=...`, exported the ways any device is: through
# `volstack nbd serve` on the daemon's Unix socket (listed by nbdinfo, read by nbdcopy and
# compared by qemu-img against what `rbd import` put there), and through devfs and a kernel
# loop device (`volstack losetup`): read back, written through the loop, and the write seen
# by Ceph's own `rbd export`. An rbd: name's options hold '=', so `nbd serve` and `devfs`
# must not read it as NAME=PATH (which served the ceph.conf file instead).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ceph_lib.sh"
need_root
need_cmd nbdinfo nbdcopy qemu-img losetup cmp
[ -e /dev/fuse ] || skip "needs /dev/fuse"
start_ceph_cluster

head -c 16M /dev/urandom >"$T/data"
timeout -k 5 60 rbd -c "$CEPH_CONF" import --no-progress "$T/data" rbd/img || fail "rbd import"
R=$(rbd_name img)

on_exit_stop_daemon
timeout -k 5 60 "$VOLSTACK" up || fail "up"
on_exit "umount -l $VS_STATE/dev"

# 1. NBD: served by the daemon, read by libnbd's and qemu's clients.
sock=$VS_STATE/nbd.sock
addr=$(timeout -k 5 60 "$VOLSTACK" nbd serve "$R") || fail "nbd serve $R"
[ "$addr" = "unix:$sock" ] || fail "nbd serve printed '$addr'"
timeout -k 5 30 nbdinfo --list "nbd+unix:///?socket=$sock" >"$T/list" || fail "nbdinfo --list"
name=$(sed -n 's/^export="\(.*\)":$/\1/p' "$T/list" | head -n 1)
[ -n "$name" ] || fail "no export listed: $(cat "$T/list")"
uri="nbd+unix:///$name?socket=$sock"
timeout -k 5 60 nbdcopy "$uri" "$T/back" || fail "nbdcopy from $uri"
cmp "$T/data" "$T/back" || fail "the NBD export differs from the image ($(cat "$T/list"))"
timeout -k 5 60 qemu-img compare -f raw -F raw "$T/data" "$uri" >/dev/null ||
  fail "qemu-img compare: the NBD export differs"
timeout -k 5 30 "$VOLSTACK" nbd stop "$R" >/dev/null 2>&1 || true

timeout -k 5 60 "$VOLSTACK" down || fail "down"

# 2. devfs (the verb, exporting the image as rbd/img) + loop: read, then a write through the
# loop device that Ceph sees.
[ -e /dev/loop-control ] || skip "needs loop devices (the NBD part passed)"
timeout -k 5 60 "$VOLSTACK" devfs "$R" 2>"$T/devfs.err" || fail "devfs $R: $(cat "$T/devfs.err")"
on_exit_kill "$(cat "$VS_STATE/devfs.pid")"
[ -f "$VS_STATE/dev/rbd/img" ] || fail "no rbd/img in devfs: $(ls -R "$VS_STATE/dev")"
loop=$(timeout -k 5 60 "$VOLSTACK" losetup -f --show rbd/img) || fail "losetup rbd/img"
on_exit_detach_loop "$loop"
timeout -k 5 60 dd if="$loop" of="$T/back" bs=1M count=16 iflag=direct status=none ||
  fail "read through $loop"
cmp "$T/data" "$T/back" || fail "the loop device differs from the image"
head -c 4M /dev/urandom >"$T/new"
timeout -k 5 60 dd if="$T/new" of="$loop" bs=1M seek=4 oflag=direct conv=fsync,notrunc \
  status=none || fail "write through $loop"
timeout -k 5 60 rbd -c "$CEPH_CONF" export --no-progress rbd/img "$T/exported" >/dev/null ||
  fail "rbd export"
dd if="$T/new" of="$T/data" bs=1M seek=4 conv=notrunc status=none
cmp "$T/data" "$T/exported" || fail "Ceph does not see what was written through the loop device"
timeout -k 5 30 "$VOLSTACK" losetup -d "$loop" || fail "losetup -d"
echo PASS
