#include "export/loop_device.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

namespace volstack::exportfs {

namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string ReadSysfs(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

uint64_t ReadSysfsNumber(const std::string& path, uint64_t fallback) {
  const std::string s = ReadSysfs(path);
  if (s.empty()) return fallback;
  return std::strtoull(s.c_str(), nullptr, 10);
}

Result<int> GetFreeLoop() {
  Fd ctl(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (ctl.get() < 0) return ErrnoStatus("open /dev/loop-control");
  const int n = ::ioctl(ctl.get(), LOOP_CTL_GET_FREE);
  if (n < 0) return ErrnoStatus("LOOP_CTL_GET_FREE");
  return n;
}

// One LOOP_CONFIGURE attempt on /dev/loopN.
Status Configure(const std::string& device, int file_fd, const std::string& file,
                 const LoopConfig& config) {
  Fd dev(::open(device.c_str(), (config.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC));
  if (dev.get() < 0) return ErrnoStatus("open " + device);
  loop_config lc;
  std::memset(&lc, 0, sizeof(lc));
  lc.fd = static_cast<uint32_t>(file_fd);
  lc.block_size = config.sector_size;
  if (config.read_only) lc.info.lo_flags |= LO_FLAGS_READ_ONLY;
  if (config.direct_io) lc.info.lo_flags |= LO_FLAGS_DIRECT_IO;
  if (config.autoclear) lc.info.lo_flags |= LO_FLAGS_AUTOCLEAR;
  std::strncpy(reinterpret_cast<char*>(lc.info.lo_file_name), file.c_str(), LO_NAME_SIZE - 1);
  for (int attempt = 0;; attempt++) {
    if (::ioctl(dev.get(), LOOP_CONFIGURE, &lc) == 0) return Status::Ok();
    if (errno == EAGAIN && attempt < 50) {  // the device is settling (util-linux retries)
      ::usleep(20000);
      continue;
    }
    return ErrnoStatus("LOOP_CONFIGURE " + device + " -> " + file);
  }
}

}  // namespace

int LoopNumber(const std::string& device) {
  const std::string prefix = "/dev/loop";
  if (device.rfind(prefix, 0) != 0 || device.size() == prefix.size()) return -1;
  int n = 0;
  for (size_t i = prefix.size(); i < device.size(); i++) {
    if (device[i] < '0' || device[i] > '9' || n > 1000000) return -1;
    n = n * 10 + (device[i] - '0');
  }
  return n;
}

Result<LoopInfo> AttachLoop(const std::string& device, const std::string& file,
                            const LoopConfig& config) {
  int flags = (config.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
  if (config.direct_io) flags |= O_DIRECT;
  int raw_fd = ::open(file.c_str(), flags);
  if (raw_fd < 0 && config.direct_io && errno == EINVAL) {
    // No O_DIRECT here: attach buffered, as the kernel would do silently anyway.
    raw_fd = ::open(file.c_str(), flags & ~O_DIRECT);
  }
  Fd file_fd(raw_fd);
  if (file_fd.get() < 0) return ErrnoStatus("open " + file);
  if (!device.empty()) {
    if (LoopNumber(device) < 0) return Status::InvalidArgument(device + ": not a loop device");
    VS_RETURN_IF_ERROR(Configure(device, file_fd.get(), file, config));
    return GetLoopInfo(device);
  }
  // A free device may be taken by a concurrent losetup between GET_FREE and CONFIGURE.
  for (int attempt = 0; attempt < 16; attempt++) {
    VS_ASSIGN_OR_RETURN(int n, GetFreeLoop());
    const std::string dev = "/dev/loop" + std::to_string(n);
    Status s = Configure(dev, file_fd.get(), file, config);
    if (s.ok()) return GetLoopInfo(dev);
    if (s.code() != EBUSY) return s;
  }
  return Status::Busy("no free loop device (lost the race 16 times)");
}

Status DetachLoop(const std::string& device) {
  Fd dev(::open(device.c_str(), O_RDONLY | O_CLOEXEC));
  if (dev.get() < 0) return ErrnoStatus("open " + device);
  for (int attempt = 0;; attempt++) {
    if (::ioctl(dev.get(), LOOP_CLR_FD, 0) == 0) return Status::Ok();
    if (errno == EAGAIN && attempt < 50) {
      ::usleep(20000);
      continue;
    }
    return ErrnoStatus("detach " + device);
  }
}

Result<LoopInfo> GetLoopInfo(const std::string& device) {
  const int n = LoopNumber(device);
  if (n < 0) return Status::InvalidArgument(device + ": not a loop device");
  Fd dev(::open(device.c_str(), O_RDONLY | O_CLOEXEC));
  if (dev.get() < 0) return ErrnoStatus("open " + device);
  loop_info64 li;
  std::memset(&li, 0, sizeof(li));
  if (::ioctl(dev.get(), LOOP_GET_STATUS64, &li) != 0) {
    return ErrnoStatus(device);  // ENXIO: not bound
  }
  LoopInfo info;
  info.device = device;
  info.number = n;
  info.offset = li.lo_offset;
  info.sizelimit = li.lo_sizelimit;
  info.autoclear = li.lo_flags & LO_FLAGS_AUTOCLEAR;
  info.read_only = li.lo_flags & LO_FLAGS_READ_ONLY;
  info.direct_io = li.lo_flags & LO_FLAGS_DIRECT_IO;
  info.backing_dev = li.lo_device;
  info.backing_ino = li.lo_inode;
  const std::string sys = "/sys/block/loop" + std::to_string(n);
  info.backing_file = ReadSysfs(sys + "/loop/backing_file");
  if (info.backing_file.empty()) {
    info.backing_file = reinterpret_cast<const char*>(li.lo_file_name);
  }
  info.direct_io = ReadSysfsNumber(sys + "/loop/dio", info.direct_io ? 1 : 0) != 0;
  info.sector_size = static_cast<uint32_t>(ReadSysfsNumber(sys + "/queue/logical_block_size", 512));
  return info;
}

std::vector<LoopInfo> ListLoops() {
  std::vector<LoopInfo> loops;
  DIR* dir = ::opendir("/sys/block");
  if (dir == nullptr) return loops;
  while (dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind("loop", 0) != 0) continue;
    // Only bound devices have a loop/backing_file.
    if (ReadSysfs("/sys/block/" + name + "/loop/backing_file").empty()) continue;
    auto info = GetLoopInfo("/dev/" + name);
    if (info.ok()) loops.push_back(std::move(*info));
  }
  ::closedir(dir);
  std::sort(loops.begin(), loops.end(),
            [](const LoopInfo& a, const LoopInfo& b) { return a.number < b.number; });
  return loops;
}

}  // namespace volstack::exportfs
