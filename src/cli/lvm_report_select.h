// lvm2's report selection (-S/--select) and sort keys (-O/--sort) for pvs/vgs/lvs, after
// libdm-report.c and lvmreport(7), for the common cases:
//
//   selection := or
//   or        := and (('||' | '#') and)*
//   and       := unary (('&&' | ',') unary)*
//   unary     := '!' '(' or ')' | '(' or ')' | field op value
//   op        := '=~' | '!~' | '=' | '!=' | '>=' | '>' | '<=' | '<'
//   value     := "quoted" | 'quoted' | bare word (up to blank, ')', '&&', '||', ',', '#')
//
// Strings take = != =~ !~ (regular expressions match anywhere, POSIX extended); numbers,
// sizes and percents take = != < <= > >=. A size without a unit is in MiB whatever --units
// says (lvm2's rule); lower-case units are powers of 1024, upper-case of 1000, b/B bytes and
// s/S sectors. String lists and time values are not supported.
//
// Sort keys are "field" or "+field" (ascending) and "-field" (descending), comma separated
// and repeatable; strings compare bytewise, the others by value.
//
// Pure functions over a caller's field table; no I/O.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace volstack::cli::lvmcli {

enum class FieldType { kString, kNumber, kSize, kPercent };

struct FieldRef {
  int index = -1;  // in the caller's field table
  FieldType type = FieldType::kString;
};

// A field name -> its reference, or nullopt when the report has no such field.
using FieldResolver = std::function<std::optional<FieldRef>(const std::string& name)>;
// One row's value of field `index`: strings as reported; numbers, sizes (in bytes) and
// percents as plain decimal text; "" when the field has no value for the row.
using FieldValue = std::function<std::string(int index)>;

class Selection {
 public:
  // InvalidArgument with lvm2's message lines (separated by '\n') on a syntax error, an
  // unknown field, an operator the field's type does not take or a value that does not parse.
  static Result<Selection> Parse(std::string_view text, const FieldResolver& resolve);

  bool Matches(const FieldValue& value) const;
  // Every field the selection reads.
  const std::vector<int>& fields() const { return fields_; }

  struct Node;

 private:
  std::shared_ptr<const Node> root_;
  std::vector<int> fields_;
};

struct SortKey {
  FieldRef field;
  bool descending = false;
};

// Parses -O arguments. InvalidArgument naming an unknown field.
Result<std::vector<SortKey>> ParseSortKeys(const std::vector<std::string>& args,
                                           const FieldResolver& resolve);
// <0, 0, >0 as row `a` sorts before, with, or after row `b`.
int CompareRows(const std::vector<SortKey>& keys, const FieldValue& a, const FieldValue& b);

}  // namespace volstack::cli::lvmcli
