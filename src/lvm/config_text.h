// A parser for lvm2's metadata text: the libdm config grammar (libdm/libdm-config.c).
//
//   file    := item*
//   item    := key '{' item* '}' | key '=' value
//   value   := scalar | '[' (scalar (',' scalar)* ','?)? ']'
//   scalar  := integer | float | "string" | 'string' | bare-word
//
// `#` starts a comment to the end of the line. The text is untrusted (read from disk or a
// backup file): the parser bounds the nesting depth, the number of nodes and the length of
// the input, rejects integers that overflow int64 and never reads past the end. Errors are
// Corruption with the line number.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace volstack::lvm {

struct ConfigValue {
  enum class Type { kInt, kFloat, kString };
  Type type = Type::kString;
  int64_t integer = 0;
  std::string text;  // strings; the source text of floats

  bool operator==(const ConfigValue&) const = default;
};

struct ConfigNode {
  std::string key;
  bool is_section = false;
  bool is_array = false;             // a '[...]' value
  std::vector<ConfigValue> values;   // one for a scalar
  std::vector<ConfigNode> children;  // sections only
  // Layout as read, so that a section kept verbatim (a segment type volstack does not serve)
  // is written back as lvm2 wrote it: a blank line before this item, and for an array
  // written over several lines, how many values each line holds (empty: on one line).
  bool blank_before = false;
  std::vector<uint32_t> rows;
  // "key=value" without spaces, arrays without a space after ','. libdm's own config writer
  // (which lvm2 uses for a segment type it does not know) writes items this way.
  bool compact = false;

  bool operator==(const ConfigNode&) const = default;

  // The last child named `key` (later duplicates override earlier ones), or nullptr.
  const ConfigNode* Find(std::string_view key) const;
  const ConfigNode* FindSection(std::string_view key) const;

  // Typed accessors for a key=value child. NotFound when absent, Corruption on a type
  // mismatch; the messages name the key.
  Result<int64_t> GetInt(std::string_view key) const;
  Result<uint64_t> GetUint(std::string_view key, uint64_t max) const;
  Result<std::string> GetString(std::string_view key) const;
  Result<std::vector<std::string>> GetStringList(std::string_view key) const;
};

inline constexpr size_t kMaxConfigTextSize = 64 << 20;
inline constexpr int kMaxConfigDepth = 32;

// Returns a root section (empty key) holding the top-level items.
Result<ConfigNode> ParseConfig(std::string_view text);

// Writes `node` (an item of a section) as lvm2's config writer does, with the layout it was
// read with, appending lines to `out`; `indent` tabs before each line (lvm2's backup form),
// or none (its on-disk form).
void WriteConfigItem(const ConfigNode& node, int indent, bool tabs, std::string* out);

// Quotes `s` as libdm writes strings: double quotes, '"' and '\' escaped.
std::string QuoteConfigString(std::string_view s);

}  // namespace volstack::lvm
