#include "cli/pool_common.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "cli/device_names.h"
#include "pool/pool_impl.h"
#include "util/file_util.h"
#include "util/size.h"
#include "util/state_file.h"

namespace volstack::cli::poolcli {

std::string CachePath(const Context& ctx) { return ctx.global.state_dir + "/zpool.cache"; }

namespace {

Result<std::vector<CachedPool>> ParseCache(const std::string& path, const std::string& text) {
  std::vector<CachedPool> out;
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&] { return Status::Corruption(path + ": not a valid pool cache"); };
  if (!j.is_object() || !j.contains("pools") || !j["pools"].is_array()) return bad();
  try {
    for (const auto& p : j["pools"]) {
      CachedPool c;
      c.name = p.at("name").get<std::string>();
      c.guid = std::stoull(p.at("guid").get<std::string>());
      c.vdevs = p.at("vdevs").get<std::vector<std::string>>();
      out.push_back(std::move(c));
    }
  } catch (const std::exception&) {
    return bad();
  }
  return out;
}

std::string FormatCache(const std::vector<CachedPool>& pools) {
  nlohmann::json j;
  j["version"] = 1;
  j["pools"] = nlohmann::json::array();
  for (const auto& p : pools) {
    j["pools"].push_back({{"name", p.name}, {"guid", std::to_string(p.guid)}, {"vdevs", p.vdevs}});
  }
  return j.dump(2) + "\n";
}

}  // namespace

Result<std::vector<CachedPool>> ReadCache(const Context& ctx) {
  auto text = ReadWholeFile(CachePath(ctx));
  if (!text.ok()) {
    if (text.status().IsNotFound()) return std::vector<CachedPool>{};
    return text.status();
  }
  return ParseCache(CachePath(ctx), *text);
}

Status UpdateCache(const Context& ctx,
                   const std::function<Status(std::vector<CachedPool>& pools)>& modify) {
  const std::string path = CachePath(ctx);
  return UpdateStateFile(
      ctx.global.state_dir, path,
      [&](const std::optional<std::string>& old) -> Result<std::optional<std::string>> {
        std::vector<CachedPool> pools;
        if (old) {
          VS_ASSIGN_OR_RETURN(pools, ParseCache(path, *old));
        }
        VS_RETURN_IF_ERROR(modify(pools));
        return std::optional<std::string>(FormatCache(pools));
      });
}

Status AddToCache(const Context& ctx, const CachedPool& entry) {
  return UpdateCache(ctx, [&](std::vector<CachedPool>& pools) {
    pools.erase(std::remove_if(pools.begin(), pools.end(),
                               [&](const CachedPool& p) { return p.name == entry.name; }),
                pools.end());
    pools.push_back(entry);
    return Status::Ok();
  });
}

Status RemoveFromCache(const Context& ctx, const std::string& name) {
  return UpdateCache(ctx, [&](std::vector<CachedPool>& pools) {
    pools.erase(std::remove_if(pools.begin(), pools.end(),
                               [&](const CachedPool& p) { return p.name == name; }),
                pools.end());
    return Status::Ok();
  });
}

Result<std::optional<CachedPool>> FindCached(const Context& ctx, const std::string& name) {
  VS_ASSIGN_OR_RETURN(auto pools, ReadCache(ctx));
  for (auto& p : pools) {
    if (p.name == name) return std::optional<CachedPool>(p);
  }
  return std::optional<CachedPool>();
}

namespace {

Result<std::shared_ptr<pool::Pool>> ImportCachedPool(const Context& ctx, const std::string& name,
                                                     bool read_only) {
  VS_ASSIGN_OR_RETURN(auto entry, FindCached(ctx, name));
  if (!entry) return Status::NotFound("cannot open '" + name + "': no such pool");
  std::vector<bdev::BlockDevicePtr> devs;
  for (const auto& v : entry->vdevs) {
    auto d = OpenDeviceByName(ctx, v, read_only);
    if (!d.ok()) {
      return d.status().WithContext("cannot open pool '" + name + "': vdev " + v);
    }
    devs.push_back(*d);
  }
  pool::PoolImportOptions io;
  io.expected_guid = entry->guid;  // checked before anything is written to the vdevs
  io.read_only = read_only;        // no label update, no log replay
  // A read-only instance lists or scans (zpool list, lvm2's device scan) and is closed by
  // the same command: a data cache, whose tables are sized by the pool's cachemax, would
  // cost it more than all it reads.
  io.tuning.cache_data = !read_only;
  VS_ASSIGN_OR_RETURN(auto p, pool::Pool::Import(devs, io));
  if (p->guid() != entry->guid) {
    return Status::NotFound("cannot open '" + name + "': the vdevs now hold another pool");
  }
  return p;
}

// The pools this process has open. Importing a pool twice in one process would make two
// writers of one set of vdevs (the vdev files themselves are shared, see device_names.cc),
// so a second open returns the first Pool. In the daemon the live stack keeps its pools
// here, which is how commands it runs use the pools it serves.
struct OpenPools {
  std::recursive_mutex mu;  // a pool whose vdev is another pool's volume opens both
  struct Entry {
    std::weak_ptr<pool::Pool> pool;
    bool read_only = false;
  };
  std::map<std::string, Entry> by_name;  // GUARDED_BY(mu)
};

OpenPools& TheOpenPools() {
  static OpenPools* pools = new OpenPools;  // never destroyed: pools may outlive main()
  return *pools;
}

}  // namespace

Result<std::shared_ptr<pool::Pool>> OpenPool(const Context& ctx, const std::string& name,
                                             bool read_only) {
  OpenPools& open = TheOpenPools();
  std::lock_guard lock(open.mu);
  if (auto it = open.by_name.find(name); it != open.by_name.end()) {
    auto p = it->second.pool.lock();
    // A read-only instance never writes, so a writer may be imported beside it.
    if (p && !p->impl()->closed && (read_only || !it->second.read_only)) return p;
    open.by_name.erase(it);
  }
  VS_ASSIGN_OR_RETURN(auto p, ImportCachedPool(ctx, name, read_only));
  open.by_name[name] = {p, read_only};
  return p;
}

std::string NormalizeVdevName(const std::string& name) {
  if (name.empty() || (name[0] != '/' && name[0] != '.' && name.find('/') != std::string::npos &&
                       !std::filesystem::exists(name))) {
    return name;  // a volstack device name (trunk/funk, vg/lv)
  }
  std::error_code ec;
  auto abs = std::filesystem::absolute(name, ec);
  return ec ? name : abs.lexically_normal().string();
}

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
      std::printf("%s\n", line.c_str());
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
    std::printf("%s\n", line.c_str());
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
    std::transform(p.begin(), p.end(), p.begin(), ::tolower);
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
