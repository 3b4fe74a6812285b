// The pvmove copy loop: one segment's bytes from the source PV to the destination PV, region
// by region, with reading and writing overlapped (a double-buffered copy).
//
// A reader thread holds region N+1 in the MirrorGate and reads it from the source while the
// calling thread writes region N to the destination, so the source and the destination are
// busy at the same time, as a plain `dd` is not. Each region is held exclusively in the gate
// from before its read until after its write, exactly as the one-region-at-a-time copy did:
// a mirrored LV write racing the copy of that region either ended before the read or starts
// after the write (and reaches both legs), so the copy can never put older data over it. At
// most `depth` regions are held at once, so writes to the LV wait only when they hit one of
// those few regions, for at most the time of their copy.
//
// Holes: when the source answers the allocation query, unallocated runs are not read; the
// destination is zeroed there only where it holds data.
//
// Threads: CopySegment runs on its caller's thread, one reader thread and (with write-behind)
// one flusher thread of its own, joined before it returns; every region it held is released by
// then, on success or error.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "bdev/block_device.h"
#include "lvm/mirror_gate.h"

namespace volstack::lvm {

struct SegmentCopy {
  bdev::BlockDevicePtr src;
  uint64_t src_offset = 0;
  bdev::BlockDevicePtr dst;
  uint64_t dst_offset = 0;
  uint64_t length = 0;
  std::string gate_pv;         // the MirrorGate key: the destination PV's UUID
  MirrorGate* gate = nullptr;  // the LV's (Activations::gate()); null: MirrorGate::Global()

  uint64_t region_bytes = 1 << 20;  // held in the gate and copied as one piece
  int depth = 2;                    // regions in flight (2: double buffering; 1: serial)
  // Write-behind: after this many bytes written since the last one, a flush of the
  // destination starts on a thread of its own (one at a time), so the device writes the copy
  // back while the copy goes on instead of all at the checkpoint's flush. 0: never.
  uint64_t flush_behind_bytes = 16 << 20;

  // True when the copy should stop (checked after each region): ECANCELED.
  std::function<bool()> stopped;
  // After region [offset, offset + n) of the segment reached the destination, on the
  // calling thread.
  std::function<void(uint64_t offset, uint64_t n)> region_done;
  // Before each region after the first is taken, on the reader thread, while the region
  // before may still be being written (a test hook: writes through the LV from here race
  // the copy for real).
  std::function<void()> between_regions;
};

Status CopySegment(const SegmentCopy& c);

}  // namespace volstack::lvm
