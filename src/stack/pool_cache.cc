#include "stack/pool_cache.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "util/file_util.h"
#include "util/format_version.h"
#include "util/state_file.h"

namespace volstack::stack {

std::string PoolCachePath(const std::string& state_dir) { return state_dir + "/zpool.cache"; }

namespace {

constexpr uint64_t kPoolCacheVersion = 1;

Result<std::vector<CachedPool>> ParseCache(const std::string& path, const std::string& text) {
  std::vector<CachedPool> out;
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&] { return Status::Corruption(path + ": not a valid pool cache"); };
  if (!j.is_object()) return bad();
  std::optional<uint64_t> version;
  if (j.contains("version")) {
    if (!j["version"].is_number_unsigned()) {
      return Status::Corruption(path + ": field 'version' is not a number");
    }
    version = j["version"].get<uint64_t>();
  }
  VS_RETURN_IF_ERROR(CheckFormatVersion(path, version, kPoolCacheVersion));
  if (!j.contains("pools") || !j["pools"].is_array()) {
    return Status::Corruption(path + ": field 'pools' is missing or not a list");
  }
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
  j["version"] = kPoolCacheVersion;
  j["pools"] = nlohmann::json::array();
  for (const auto& p : pools) {
    j["pools"].push_back({{"name", p.name}, {"guid", std::to_string(p.guid)}, {"vdevs", p.vdevs}});
  }
  return j.dump(2) + "\n";
}

}  // namespace

Result<std::vector<CachedPool>> ReadPoolCache(const std::string& state_dir) {
  auto text = ReadWholeFile(PoolCachePath(state_dir));
  if (!text.ok()) {
    if (text.status().IsNotFound()) return std::vector<CachedPool>{};
    return text.status();
  }
  return ParseCache(PoolCachePath(state_dir), *text);
}

Status UpdatePoolCache(const std::string& state_dir,
                       const std::function<Status(std::vector<CachedPool>& pools)>& modify) {
  const std::string path = PoolCachePath(state_dir);
  return UpdateStateFile(
      state_dir, path,
      [&](const std::optional<std::string>& old) -> Result<std::optional<std::string>> {
        std::vector<CachedPool> pools;
        if (old) {
          VS_ASSIGN_OR_RETURN(pools, ParseCache(path, *old));
        }
        VS_RETURN_IF_ERROR(modify(pools));
        return std::optional<std::string>(FormatCache(pools));
      });
}

Status AddToPoolCache(const std::string& state_dir, const CachedPool& entry) {
  return UpdatePoolCache(state_dir, [&](std::vector<CachedPool>& pools) {
    pools.erase(std::remove_if(pools.begin(), pools.end(),
                               [&](const CachedPool& p) { return p.name == entry.name; }),
                pools.end());
    pools.push_back(entry);
    return Status::Ok();
  });
}

Status RemoveFromPoolCache(const std::string& state_dir, const std::string& name) {
  return UpdatePoolCache(state_dir, [&](std::vector<CachedPool>& pools) {
    pools.erase(std::remove_if(pools.begin(), pools.end(),
                               [&](const CachedPool& p) { return p.name == name; }),
                pools.end());
    return Status::Ok();
  });
}

Result<std::optional<CachedPool>> FindCachedPool(const std::string& state_dir,
                                                 const std::string& name) {
  VS_ASSIGN_OR_RETURN(auto pools, ReadPoolCache(state_dir));
  for (auto& p : pools) {
    if (p.name == name) return std::optional<CachedPool>(p);
  }
  return std::optional<CachedPool>();
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

Result<std::shared_ptr<pool::Pool>> OpenPools::Open(const std::string& name, bool read_only,
                                                    const Importer& import) {
  std::lock_guard lock(mu_);
  if (auto it = by_name_.find(name); it != by_name_.end()) {
    auto p = it->second.pool.lock();
    // A read-only instance never writes, so a writer may be imported beside it.
    if (p && !p->closed() && (read_only || !it->second.read_only)) return p;
    by_name_.erase(it);
  }
  VS_ASSIGN_OR_RETURN(auto p, import(read_only));
  by_name_[name] = {p, read_only};
  return p;
}

}  // namespace volstack::stack
