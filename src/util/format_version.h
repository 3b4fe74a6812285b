// The format version every state-dir record carries (stack/state_dir.h): a file written by a
// newer volstack is refused by name and left as it is, never rewritten in an older format; a
// file from before versions were written reads as version 1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "util/status.h"

namespace volstack {

// `version` is the file's (nullopt: none written). Ok for 1..supported.
inline Status CheckFormatVersion(const std::string& path, std::optional<uint64_t> version,
                                 uint64_t supported) {
  if (!version) return Status::Ok();
  if (*version == 0) return Status::Corruption(path + ": field 'version' is 0");
  if (*version > supported) {
    return Status::NotSupported(path + ": format version " + std::to_string(*version) +
                                " is newer than this volstack reads (" + std::to_string(supported) +
                                "); the file is left as it is");
  }
  return Status::Ok();
}

}  // namespace volstack
