// zfs/zpool output helpers (pool_common.h): tables, sizes, property lists.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "cli/pool_common.h"
#include "util/request_io.h"

namespace volstack::cli::poolcli {

Table::Table(std::vector<std::string> headers, std::vector<bool> right_aligned)
    : headers_(std::move(headers)), right_(std::move(right_aligned)) {
  right_.resize(headers_.size(), false);
}

void Table::AddRow(std::vector<std::string> row) {
  row.resize(headers_.size());
  rows_.push_back(std::move(row));
}

void Table::Print(bool scripted) const {
  if (scripted) {
    for (const auto& r : rows_) {
      std::string line;
      for (size_t i = 0; i < r.size(); i++) line += (i ? "\t" : "") + r[i];
      std::fprintf(Out(), "%s\n", line.c_str());
    }
    return;
  }
  std::vector<size_t> w(headers_.size());
  for (size_t i = 0; i < headers_.size(); i++) w[i] = headers_[i].size();
  for (const auto& r : rows_) {
    for (size_t i = 0; i < r.size(); i++) w[i] = std::max(w[i], r[i].size());
  }
  auto print = [&](const std::vector<std::string>& r) {
    std::string line;
    for (size_t i = 0; i < r.size(); i++) {
      const std::string pad(w[i] - r[i].size(), ' ');
      if (i) line += "  ";
      const bool last = i + 1 == r.size();
      line += right_[i] ? pad + r[i] : (last ? r[i] : r[i] + pad);
    }
    std::fprintf(Out(), "%s\n", line.c_str());
  };
  print(headers_);
  for (const auto& r : rows_) print(r);
}

std::string Bytes(uint64_t v, bool parsable) {
  // zfs_nicenum: exact multiples print as integers ("64M"), others with the most decimals
  // that fit in five characters ("1.03G", "10.5G", "104G").
  if (parsable) return std::to_string(v);
  static const char kSuffix[] = "BKMGTPE";
  int index = 0;
  for (uint64_t n = v; n >= 1024 && index < 6; n /= 1024) index++;
  const char u = kSuffix[index];
  const uint64_t unit = uint64_t{1} << (10 * index);
  char buf[32];
  if (index == 0 || v % unit == 0) {
    std::snprintf(buf, sizeof buf, "%llu%c", static_cast<unsigned long long>(v / unit), u);
    return buf;
  }
  const double d = static_cast<double>(v) / static_cast<double>(unit);
  for (int prec = 2; prec >= 0; prec--) {
    std::snprintf(buf, sizeof buf, "%.*f%c", prec, d, u);
    if (std::strlen(buf) <= 5) break;
  }
  return buf;
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t c = s.find(',', start);
    const std::string part =
        s.substr(start, c == std::string::npos ? std::string::npos : c - start);
    if (!part.empty()) out.push_back(part);
    if (c == std::string::npos) break;
    start = c + 1;
  }
  return out;
}

Result<std::vector<std::string>> PropList(const std::string& list,
                                          const std::function<bool(const std::string&)>& known) {
  std::vector<std::string> out = SplitComma(list);
  for (auto& p : out) {
    if (p.find(':') != std::string::npos) continue;
    // written@snap: the snapshot's name keeps its case.
    std::transform(p.begin(), p.begin() + std::min(p.find('@'), p.size()), p.begin(), ::tolower);
    if (!known(p))
      return Status::InvalidArgument("bad property list: invalid property '" + p + "'");
  }
  return out;
}

Result<std::pair<std::string, std::string>> SplitProp(const std::string& s) {
  const size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Status::InvalidArgument("bad property '" + s + "': expected property=value");
  }
  return std::make_pair(s.substr(0, eq), s.substr(eq + 1));
}

}  // namespace volstack::cli::poolcli
