#include "export/devfs_tree.h"

#include <fcntl.h>

#include <algorithm>
#include <ctime>

#include "bdev/device_registry.h"
#include "bdev/file_device.h"
#include "util/check.h"

namespace volstack::exportfs {

namespace {
std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

struct timespec Now() {
  struct timespec ts {};
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts;
}
}  // namespace

DevfsFile::DevfsFile(bdev::BlockDevicePtr device)
    : io(device), flusher([device] { return device->Flush(); }) {
  if (const auto* file = dynamic_cast<const bdev::FileDevice*>(device.get())) {
    const int flags = ::fcntl(file->fd(), F_GETFL);
    if (flags >= 0 && !(flags & O_DIRECT)) page_cache_fd = file->fd();
  }
}

DevfsTree::DevfsTree() {
  Node root;
  root.ino = kRootIno;
  root.parent = kRootIno;
  root.is_dir = true;
  root.nlookup = 1;  // the kernel holds the root implicitly; never freed
  root.mtime = Now();
  nodes_.emplace(kRootIno, std::move(root));
}

Result<std::optional<DevfsTree::Entry>> DevfsTree::Add(const std::string& path,
                                                       bdev::BlockDevicePtr device) {
  if (!bdev::DeviceRegistry::IsValidName(path)) {
    return Status::InvalidArgument("devfs: invalid device name '" + path + "'");
  }
  const std::vector<std::string> parts = SplitPath(path);
  std::lock_guard lock(mu_);
  // Check first, change after: a collision leaves the tree untouched.
  uint64_t dir = kRootIno;
  size_t depth = 0;
  for (; depth < parts.size(); depth++) {
    const Node& node = nodes_.at(dir);
    auto it = node.children.find(parts[depth]);
    if (it == node.children.end()) break;
    const Node& child = nodes_.at(it->second);
    const bool last = depth + 1 == parts.size();
    if (last || !child.is_dir) {
      return Status::Exists("devfs: '" + path + "' collides with an existing entry");
    }
    dir = child.ino;
  }
  std::optional<Entry> top;
  const struct timespec now = Now();
  for (; depth < parts.size(); depth++) {
    Node child;
    child.ino = next_ino_++;
    child.parent = dir;
    child.name = parts[depth];
    child.is_dir = depth + 1 < parts.size();
    child.mtime = now;
    if (!child.is_dir) {
      child.file = std::make_shared<DevfsFile>(device);
      child.seen_size = device->size();
    }
    Node& parent = nodes_.at(dir);
    parent.children.emplace(child.name, child.ino);
    parent.mtime = now;
    if (!top) top = Entry{dir, child.name, child.ino};
    dir = child.ino;
    nodes_.emplace(child.ino, std::move(child));
  }
  return top;
}

Result<std::vector<DevfsTree::Entry>> DevfsTree::Remove(const std::string& path) {
  const std::vector<std::string> parts = SplitPath(path);
  std::lock_guard lock(mu_);
  uint64_t ino = kRootIno;
  for (const auto& part : parts) {
    const Node& node = nodes_.at(ino);
    auto it = node.children.find(part);
    if (!node.is_dir || it == node.children.end()) {
      return Status::NotFound("devfs: no device '" + path + "'");
    }
    ino = it->second;
  }
  if (nodes_.at(ino).is_dir) return Status::NotFound("devfs: '" + path + "' is a directory");
  std::vector<Entry> removed;
  const struct timespec now = Now();
  // Unlink the file, then each directory left empty, walking up.
  while (ino != kRootIno) {
    Node& node = nodes_.at(ino);
    if (node.is_dir && !node.children.empty()) break;
    Node& parent = nodes_.at(node.parent);
    parent.children.erase(node.name);
    parent.mtime = now;
    node.linked = false;
    // The kernel may keep the inode (and so this node) long after the unlink; the device
    // must not stay open with it, or a removed volume could never be destroyed. Open file
    // handles hold their own reference.
    node.file.reset();
    removed.push_back(Entry{node.parent, node.name, node.ino});
    const uint64_t up = node.parent;
    MaybeFreeLocked(ino);
    ino = up;
  }
  return removed;
}

std::optional<struct stat> DevfsTree::Lookup(uint64_t parent, const std::string& name) {
  std::lock_guard lock(mu_);
  auto pit = nodes_.find(parent);
  if (pit == nodes_.end() || !pit->second.is_dir) return std::nullopt;
  auto it = pit->second.children.find(name);
  if (it == pit->second.children.end()) return std::nullopt;
  Node& child = nodes_.at(it->second);
  child.nlookup++;
  return StatLocked(child);
}

void DevfsTree::Forget(uint64_t ino, uint64_t nlookup) {
  if (ino == kRootIno) return;
  std::lock_guard lock(mu_);
  auto it = nodes_.find(ino);
  if (it == nodes_.end()) return;
  it->second.nlookup -= std::min(nlookup, it->second.nlookup);
  MaybeFreeLocked(ino);
}

void DevfsTree::MaybeFreeLocked(uint64_t ino) {
  auto it = nodes_.find(ino);
  if (it != nodes_.end() && !it->second.linked && it->second.nlookup == 0) nodes_.erase(it);
}

std::optional<struct stat> DevfsTree::GetAttr(uint64_t ino) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(ino);
  if (it == nodes_.end()) return std::nullopt;
  return StatLocked(it->second);
}

std::optional<std::vector<DevfsTree::DirEntry>> DevfsTree::ReadDir(uint64_t ino) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(ino);
  if (it == nodes_.end() || !it->second.is_dir || !it->second.linked) return std::nullopt;
  std::vector<DirEntry> entries;
  entries.push_back({".", ino, true});
  entries.push_back({"..", it->second.parent, true});
  for (const auto& [name, child] : it->second.children) {
    entries.push_back({name, child, nodes_.at(child).is_dir});
  }
  return entries;
}

std::shared_ptr<DevfsFile> DevfsTree::Open(uint64_t ino) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(ino);
  return it == nodes_.end() ? nullptr : it->second.file;
}

std::vector<uint64_t> DevfsTree::TakeResized() {
  std::vector<uint64_t> resized;
  std::lock_guard lock(mu_);
  for (auto& [ino, node] : nodes_) {
    if (!node.file) continue;
    const uint64_t size = node.file->io.size();
    if (size == node.seen_size) continue;
    node.seen_size = size;
    resized.push_back(ino);
  }
  return resized;
}

size_t DevfsTree::node_count() const {
  std::lock_guard lock(mu_);
  return nodes_.size();
}

struct stat DevfsTree::StatLocked(const Node& node) const {
  struct stat st {};
  st.st_ino = node.ino;
  st.st_uid = 0;
  st.st_gid = 0;
  st.st_atim = st.st_mtim = st.st_ctim = node.mtime;
  if (node.is_dir) {
    st.st_mode = S_IFDIR | 0755;
    st.st_nlink = 2;
    for (const auto& [name, child] : node.children) {
      if (nodes_.at(child).is_dir) st.st_nlink++;
    }
    st.st_blksize = 4096;
    return st;
  }
  if (!node.file) {  // unlinked: the device is gone
    st.st_mode = S_IFREG | 0600;
    st.st_blksize = 4096;
    return st;
  }
  const bdev::Geometry g = node.file->io.device()->geometry();
  st.st_mode = S_IFREG | (g.read_only ? 0400 : 0600);
  st.st_nlink = node.linked ? 1 : 0;
  st.st_size = static_cast<off_t>(g.size_bytes);
  st.st_blocks = static_cast<blkcnt_t>(g.size_bytes / 512);
  // The physical block size: what `volstack losetup` picks as the loop's sector size and
  // what I/O-size-aware tools align to.
  st.st_blksize = static_cast<blksize_t>(g.physical_block_size);
  return st;
}

}  // namespace volstack::exportfs
