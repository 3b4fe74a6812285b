// zfs send and receive of volume snapshots (send.cc, receive.cc have the theory; the stream
// format is send_stream.h and docs/format/send.md).
//
// Threads: any thread; a send holds its snapshot open (it cannot be destroyed meanwhile), a
// receive takes the pool's snapshot lock only for its final commit.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "pool/send_stream.h"
#include "pool/spa.h"

namespace volstack::pool {

struct SendOptions {
  std::string snapshot = "";   // "pool/vol@b"
  std::string from = "";       // "" (full), "@a" or "pool/vol@a": incremental from a
  bool intermediates = false;  // -I: one substream per snapshot between from and snapshot
  bool dry_run = false;        // -n: walk the metadata, read no data, write nothing
  // -c: compressed blocks travel as stored (their psize bytes and algorithm); without it
  // they are decoded. A resumed send (-t) takes it from the token.
  bool compressed = false;
  // send -t: a resumed stream from this volume offset; the snapshots must still have the
  // guids the token names (nonzero).
  bool resume = false;
  uint64_t resume_offset = 0;
  uint64_t toguid = 0, fromguid = 0;
};
// SendOptions for `zfs send -t token` (the snapshots are checked by Send).
Result<SendOptions> SendOptionsFromToken(const std::string& token);

// What a send did (or, dry, would do): `stream_bytes` is exact, not an estimate.
struct SendStats {
  struct Part {
    std::string from, to;  // "" for a full stream
    uint64_t stream_bytes = 0;
  };
  std::vector<Part> parts;
  uint64_t stream_bytes = 0;
  uint64_t data_bytes = 0;  // WRITE payloads
  uint64_t bytes_read = 0;  // blocks read from the pool (indirect and data)
  uint64_t write_records = 0;
  uint64_t free_records = 0;
  uint32_t comp_mask = 0;  // bit c: a block sent is stored with Compression c
};

// What `progress` is told after each record: the snapshot whose substream it is, the
// bytes of that substream so far, and of the whole stream; the data blocks (WRITE records)
// of that substream so far (zfs's BLOCKS column of `send -v -v`).
struct SendProgress {
  const std::string& snapshot;
  uint64_t part_bytes, stream_bytes;
  uint64_t part_blocks = 0;
};
// Writes the stream to `sink`. `progress` (if set) is called after each record. The snapshot (and
// the origin) must exist; the origin must be an earlier snapshot of the same volume. Incremental
// sends read only the blocks born after the origin (a walk by birth txg).
Result<SendStats> Send(Pool& pool, const SendOptions& options, const StreamWriter::Sink& sink,
                       const std::function<void(const SendProgress&)>& progress = {});

struct ReceiveOptions {
  std::string target = "";  // "pool/vol" (the snapshot keeps the stream's name) or "pool/vol@s"
  bool force = false;       // -F: roll the target back to the stream's origin first
  std::map<std::string, std::string> props = {};  // -o prop=value
  bool resumable = false;  // -s: a stream that breaks leaves its partial state to resume
};

struct ReceiveStats {
  std::vector<std::string> snapshots;  // received, in order
  uint64_t stream_bytes = 0;
  uint64_t data_bytes = 0;
};

// Applies every substream `reader` yields. Each substream is written into a hidden dataset
// ("pool/vol%recv") and becomes visible, the volume and its new snapshot, in one txg once
// its END checks; on any error the hidden dataset is destroyed and the target is as it was
// (substreams received before the failing one stay received). `on_snapshot` (if set) is
// called as each BEGIN is read, with it, before any of its data.
Result<ReceiveStats> Receive(Pool& pool, const ReceiveOptions& options, StreamReader& reader,
                             const std::function<void(const StreamBegin&)>& on_snapshot = {});

// The token of the partial `receive -s` into `volume` (the target's name), or NotFound.
Result<std::string> ReceiveResumeToken(Pool& pool, const std::string& volume);
// zfs receive -A: discards the partial state of a `receive -s` into `volume`.
Status AbortReceive(Pool& pool, const std::string& volume);
// The partial `receive -s` states of full streams into names no volume has (a new
// target), each as the dataset zfs shows for one: the target's name, type volume, its
// volsize, space so far and receive_resume_token. ListDatasets does not list them.
std::vector<DatasetInfo> ListPartialReceives(Pool& pool);
// The one of those named `name`, or NotFound.
Result<DatasetInfo> GetPartialReceive(Pool& pool, const std::string& name);

}  // namespace volstack::pool
