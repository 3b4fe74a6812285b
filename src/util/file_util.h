// Small, careful file helpers for state files (zpool.cache, the LVM devices list, loop
// bindings): what is written is either the old file or the whole new one, never a mix.
#pragma once

#include <string>

#include "util/result.h"

namespace volstack {

// Writes `contents` to `path` atomically: a temp file beside it with a unique name, created
// O_EXCL|O_NOFOLLOW, fsync, rename, fsync of the directory. Creates missing parent
// directories (mode 0700). State-dir files go through UpdateStateFile (state_file.h),
// which adds the lock that makes a read-modify-write safe.
Status WriteFileAtomically(const std::string& path, const std::string& contents);

// The whole file; ENOENT when it does not exist.
Result<std::string> ReadWholeFile(const std::string& path);

// mkdir -p with `mode` for the directories it creates.
Status MakeDirectories(const std::string& path, unsigned mode = 0700);

}  // namespace volstack
