// The pool checker (a small zdb -b): walks every volume and snapshot tree, the MOS and the
// space map of an open pool and proves the space accounting: every allocated extent is
// referenced by one pointer (shared by a snapshot's tree and later ones, once per tree),
// each snapshot's `used` is exactly what no other tree names, nothing referenced is free, the
// on-disk space map replays to the same live set, and live + meta + deferred + free + the intent
// logs' reserve and blocks covers each vdev's allocatable space exactly (no leak, no double
// allocation, log blocks included). Optionally reads every data block to verify its checksum.
//
// Syncs first and holds the pool's commit lock while it runs; callers should not write.
#pragma once

#include <string>
#include <vector>

#include "pool/spa.h"

namespace volstack::pool {

struct CheckReport {
  uint64_t data_blocks = 0;
  uint64_t indirect_blocks = 0;
  uint64_t log_blocks = 0;  // intent-log blocks held by the volumes' chains
  uint64_t volumes = 0;
  uint64_t snapshots = 0;
  uint64_t referenced_bytes = 0;
  std::vector<std::string> errors;  // empty = consistent
  bool ok() const { return errors.empty(); }
  std::string Summary() const;
};

Result<CheckReport> CheckPool(Pool& pool, bool verify_data);

}  // namespace volstack::pool
