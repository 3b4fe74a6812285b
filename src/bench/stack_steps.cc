#include "bench/stack_steps.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench/cancel.h"
#include "bench/subprocess.h"

namespace volstack::bench {

namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// /proc/self/mountinfo escapes space, tab, newline and backslash as \ooo.
std::string UnescapeMountPath(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool ok = true;
      for (int k = 1; k <= 3; ++k) {
        char c = s[i + k];
        if (c < '0' || c > '7') ok = false;
        v = v * 8 + (c - '0');
      }
      if (ok) {
        out += static_cast<char>(v);
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

// The last line of a command's output that starts with /dev/: what `losetup --show` prints.
Result<std::string> LoopDeviceFromOutput(const std::string& output, const std::string& what) {
  std::istringstream in(output);
  std::string found;
  for (std::string line; std::getline(in, line);) {
    line = Trim(line);
    if (line.rfind("/dev/", 0) == 0) found = line;
  }
  if (found.empty()) return Status::IoError(what + " printed no /dev/loopN: " + Trim(output));
  return found;
}

// Commands that create something (attach a loop, mount) or undo it run to completion even
// after a Ctrl-C, so their result is always known and always undone; a timeout still bounds
// a tool that hangs. Steps check the cancel flag before they start instead.
CommandOptions Uninterrupted() {
  CommandOptions o;
  o.stop_on_cancel = false;
  o.timeout_seconds = 120;
  return o;
}

Status Unmount(const std::string& dir) {
  if (!IsMountPoint(dir)) return Status::Ok();
  // A mount that is busy right after a run (a late close) usually frees within a second.
  for (int attempt = 0; attempt < 20; ++attempt) {
    auto r = RunCommand({"umount", dir}, Uninterrupted());
    if (r.ok() && r->exit_code == 0) return Status::Ok();
    if (!IsMountPoint(dir)) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  auto lazy = RunChecked({"umount", "-l", dir}, Uninterrupted());
  if (!lazy.ok()) return lazy.status();
  return Status::Busy(dir + " was busy; unmounted lazily");
}

template <typename T>
Status OkOrStatus(const Result<T>& r) {
  return r.ok() ? Status::Ok() : r.status();
}

Status DetachLoop(const std::vector<std::string>& losetup, const std::string& device) {
  std::vector<std::string> argv = losetup;
  argv.push_back("-d");
  argv.push_back(device);
  for (int attempt = 0;; ++attempt) {
    auto r = RunChecked(argv, Uninterrupted());
    if (r.ok() || attempt >= 10) return r.ok() ? Status::Ok() : r.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

Result<std::string> StackRun::Volstack(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {env->volstack, "--state-dir", state_dir};
  argv.insert(argv.end(), args.begin(), args.end());
  VS_RETURN_IF_ERROR(CheckCancelled());
  CommandOptions options = Uninterrupted();
  options.cwd = dir;
  options.timeout_seconds = 300;
  if (verbose > 0) std::fprintf(stderr, "volstack bench: %s\n", JoinCommand(argv).c_str());
  VS_ASSIGN_OR_RETURN(CommandResult r, RunCommand(argv, options));
  if (r.success()) return std::move(r.output);
  // Name the verb as a user would type it; the binary and the scratch state dir are noise.
  std::string what = "volstack " + JoinCommand(args);
  if (r.cancelled) return Status::FromErrno(ECANCELED, what + ": interrupted");
  std::string how = r.timed_out          ? "timed out"
                    : r.term_signal != 0 ? "killed by signal " + std::to_string(r.term_signal)
                                         : "exit " + std::to_string(r.exit_code);
  std::string tail = r.Tail(2);
  return Status::FromErrno(r.timed_out ? ETIMEDOUT : EIO,
                           what + ": " + how + (tail.empty() ? "" : ": " + tail));
}

Result<std::string> CreateSparseFile(StackRun& run, const std::string& name, uint64_t size) {
  VS_RETURN_IF_ERROR(CheckCancelled());
  std::string path = run.dir + "/" + name;
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("create " + path);
  run.teardown->Add("rm " + path, [path]() -> Status {
    if (unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("unlink " + path);
    return Status::Ok();
  });
  int rc = ftruncate(fd, static_cast<off_t>(size));
  int err = errno;
  close(fd);
  if (rc != 0) return ErrnoStatus("truncate " + path, err);
  return path;
}

Result<std::string> MakeRunDirectory(StackRun& run, const std::string& name) {
  std::string path = run.dir + "/" + name;
  if (mkdir(path.c_str(), 0700) != 0) return ErrnoStatus("mkdir " + path);
  run.teardown->Add("rmdir " + path, [path]() -> Status {
    if (rmdir(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("rmdir " + path);
    return Status::Ok();
  });
  return path;
}

Result<std::string> AttachLoop(StackRun& run, const std::string& file, uint32_t sector_size) {
  // Direct I/O, as issue 38's reference ("plain file -> loop (4 KiB sectors, direct I/O)") and
  // as `volstack losetup` binds: a buffered loop would serve reads from the host's page cache
  // and end writes there, which no other stack's loop does.
  std::vector<std::string> argv = {
      "losetup", "-f", "--show", "--direct-io=on", "-b", std::to_string(sector_size), file};
  VS_RETURN_IF_ERROR(CheckCancelled());
  VS_ASSIGN_OR_RETURN(std::string out, RunChecked(argv, Uninterrupted()));
  VS_ASSIGN_OR_RETURN(std::string loop, LoopDeviceFromOutput(out, "losetup"));
  run.teardown->Add("losetup -d " + loop, [loop] { return DetachLoop({"losetup"}, loop); });
  return loop;
}

Result<std::string> VolstackLosetup(StackRun& run, const std::string& devfs_dir,
                                    const std::string& name, uint32_t sector_size) {
  std::vector<std::string> args = {"losetup", "--devfs", devfs_dir, "-f", "--show"};
  if (sector_size != 0) {
    args.push_back("--sector-size");
    args.push_back(std::to_string(sector_size));
  }
  args.push_back(name);
  VS_ASSIGN_OR_RETURN(std::string out, run.Volstack(args));
  VS_ASSIGN_OR_RETURN(std::string loop, LoopDeviceFromOutput(out, "volstack losetup"));
  std::vector<std::string> detach = {run.env->volstack, "--state-dir", run.state_dir, "losetup"};
  run.teardown->Add("volstack losetup -d " + loop, [detach, loop] {
    Status s = DetachLoop(detach, loop);
    // If volstack's detach fails, util-linux's still frees the kernel device.
    if (!s.ok() && DetachLoop({"losetup"}, loop).ok()) return Status::Ok();
    return s;
  });
  return loop;
}

Result<std::string> StartDevfs(StackRun& run, const std::string& dir_name,
                               const std::vector<std::string>& names,
                               const std::vector<std::string>& options) {
  VS_RETURN_IF_ERROR(CheckCancelled());
  VS_ASSIGN_OR_RETURN(std::string dir, MakeRunDirectory(run, dir_name));
  std::vector<std::string> argv = {
      run.env->volstack, "--state-dir", run.state_dir, "devfs", "--foreground", "--devfs", dir};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), names.begin(), names.end());
  std::string log = run.dir + "/" + dir_name + ".log";
  VS_ASSIGN_OR_RETURN(pid_t pid, StartBackground(argv, log));
  run.serving_pids.push_back(pid);
  run.teardown->Add("stop devfs " + std::to_string(pid), [pid, dir, log]() -> Status {
    Status stopped = StopProcess(pid, 15);
    Status unmounted = Status::Ok();
    if (IsMountPoint(dir)) {
      auto r = RunChecked({"umount", "-l", dir}, Uninterrupted());
      unmounted = r.ok() ? Status::Ok() : r.status();
    }
    if (unlink(log.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("unlink " + log);
    return !stopped.ok() ? stopped : unmounted;
  });
  // Wait for the files: the server mounts, then (re)opens the devices.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    bool all = IsMountPoint(dir);
    for (const auto& name : names) {
      struct stat st;
      if (!all) break;
      all = stat((dir + "/" + name).c_str(), &st) == 0;
    }
    if (all) return dir;
    if (!ChildRunning(pid)) {
      std::ifstream in(log);
      std::stringstream ss;
      ss << in.rdbuf();
      CommandResult fake;
      fake.output = ss.str();
      return Status::IoError("volstack devfs exited before serving: " + fake.Tail());
    }
    VS_RETURN_IF_ERROR(CheckCancelled());
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::FromErrno(
          ETIMEDOUT, "volstack devfs: no " + names.front() + " under " + dir + " after 60 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status CreatePool(StackRun& run, const std::string& pool, uint64_t file_size) {
  VS_ASSIGN_OR_RETURN(std::string file, CreateSparseFile(run, pool + ".vdev", file_size));
  return OkOrStatus(run.Volstack({"zpool", "create", pool, file}));
}

Status CreateVolume(StackRun& run, const std::string& name, uint64_t size,
                    const std::vector<std::string>& options) {
  std::vector<std::string> args = {"zfs", "create", "-V", std::to_string(size)};
  args.insert(args.end(), options.begin(), options.end());
  args.push_back(name);
  return OkOrStatus(run.Volstack(args));
}

Status CreateLogicalVolume(StackRun& run, const std::string& pv, const std::string& vg,
                           const std::string& lv, uint64_t lv_size) {
  VS_RETURN_IF_ERROR(OkOrStatus(run.Volstack({"pvcreate", pv})));
  VS_RETURN_IF_ERROR(OkOrStatus(run.Volstack({"vgcreate", vg, pv})));
  // lvcreate's bare numbers are MiB; give bytes with a unit so nothing is guessed.
  return OkOrStatus(
      run.Volstack({"lvcreate", "-L", std::to_string(lv_size >> 20) + "m", "-n", lv, vg}));
}

Status MakeXfs(StackRun& run, const std::string& device) {
  CommandOptions options;
  options.cwd = run.dir;
  return OkOrStatus(RunChecked({"mkfs.xfs", "-f", "-q", device}, options));
}

Result<std::string> MountXfs(StackRun& run, const std::string& device, const std::string& name) {
  VS_ASSIGN_OR_RETURN(std::string dir, MakeRunDirectory(run, name));
  VS_RETURN_IF_ERROR(CheckCancelled());
  // Registered first: Unmount does nothing unless the directory is a mount point.
  run.teardown->Add("umount " + dir, [dir] { return Unmount(dir); });
  VS_RETURN_IF_ERROR(OkOrStatus(RunChecked({"mount", "-t", "xfs", device, dir}, Uninterrupted())));
  return dir;
}

bool IsMountPoint(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    // "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw": field 5.
    std::istringstream fields(line);
    std::string f[5];
    for (auto& x : f) fields >> x;
    if (UnescapeMountPath(f[4]) == path) return true;
  }
  return false;
}

uint32_t LogicalSectorSize(const std::string& device) {
  int fd = open(device.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  int size = 0;
  int rc = ioctl(fd, BLKSSZGET, &size);
  close(fd);
  return rc == 0 && size > 0 ? static_cast<uint32_t>(size) : 0;
}

}  // namespace volstack::bench
