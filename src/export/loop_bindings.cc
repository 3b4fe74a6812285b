#include "export/loop_bindings.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace volstack::exportfs {

std::string LoopBindingsPath(const std::string& state_dir) { return state_dir + "/loops.json"; }

Result<std::vector<LoopBinding>> LoadLoopBindings(const std::string& state_dir) {
  const std::string path = LoopBindingsPath(state_dir);
  std::ifstream in(path);
  std::vector<LoopBinding> loops;
  if (!in) {
    if (errno == ENOENT) return loops;
    return ErrnoStatus("open " + path);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const auto doc = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("loops") ||
      !doc["loops"].is_array()) {
    return Status::Corruption(path + ": not a loop bindings file");
  }
  for (const auto& j : doc["loops"]) {
    if (!j.is_object() || !j.contains("device") || !j["device"].is_string() ||
        !j.contains("file") || !j["file"].is_string()) {
      return Status::Corruption(path + ": a binding lacks its device or file");
    }
    LoopBinding b;
    b.device = j["device"].get<std::string>();
    b.file = j["file"].get<std::string>();
    b.name = j.value("name", std::string());
    b.sector_size = j.value("sector_size", 512u);
    b.direct_io = j.value("direct_io", false);
    b.read_only = j.value("read_only", false);
    loops.push_back(std::move(b));
  }
  return loops;
}

Status SaveLoopBindings(const std::string& state_dir, const std::vector<LoopBinding>& loops) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& b : loops) {
    arr.push_back({{"device", b.device},
                   {"name", b.name},
                   {"file", b.file},
                   {"sector_size", b.sector_size},
                   {"direct_io", b.direct_io},
                   {"read_only", b.read_only}});
  }
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  return WriteFileAtomically(LoopBindingsPath(state_dir),
                             nlohmann::json{{"loops", arr}}.dump(2) + "\n");
}

Status WriteFileAtomically(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("create " + tmp);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s = ErrnoStatus("write " + tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    Status s = ErrnoStatus("fsync " + tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = ErrnoStatus("rename " + tmp);
    ::unlink(tmp.c_str());
    return s;
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

}  // namespace volstack::exportfs
