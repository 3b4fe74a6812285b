// volstack devfs [--foreground] [--devfs DIR] [NAME | NAME=PATH]...
//
// Serves the named devices as files under the devfs mount point until SIGINT/SIGTERM, then
// unmounts and flushes them. The daemon embeds the same Devfs; this verb is for use without
// it and for tests.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include "bdev/device_registry.h"
#include "bdev/file_device.h"
#include "cli/device_names.h"
#include "cli/export_common.h"
#include "export/devfs.h"
#include "util/request_io.h"

namespace volstack::cli {

namespace {

struct DevfsArgs {
  bool foreground = false;
  std::string devfs;
  std::vector<std::string> names;
  bool read_only = false;
  // Tuning, for the export benchmark.
  unsigned threads = 16;
  unsigned max_background = 256;
  bool page_cache = false;
  std::string fuse_transport = "auto";
  unsigned uring_threads = 0;
  bool uring_pin = false;
  bool no_clone_fd = false;
  unsigned max_write_kib = 1024;
  double attr_timeout = 1.0;
  // Files named by path are opened with O_DIRECT (as a loop device with direct I/O does),
  // so an fsync does not have to write back what the page cache absorbed.
  bool backing_direct_io = false;
  // Keep the host's readahead on files named by path. Off by default: the kernel already
  // reads ahead above devfs (in the page cache of the loop device or the file system on
  // it), and a random 4 KiB read that misses the host page cache would otherwise read 16 KiB
  // or more from the disk.
  bool backing_readahead = false;
  // Scheduling priority of the serving threads (and of the process's autogroup, which is
  // what competes with other sessions' processes): every FUSE request waits for one of
  // these threads to get a CPU, while a plain loop device's I/O runs in kernel threads. On a
  // loaded machine -10 doubled 4 KiB QD32 IOPS on the loop (docs/exports.md); idle, it
  // changes nothing.
  int nice = -10;
  // Comparison switches for the benchmark (both on by default; docs/exports.md).
  bool fsync_each = false;
  bool write_behind = false;
  bool write_behind_inline = false;
};

// Applies --nice to this thread (the FUSE threads it starts inherit it) and, when devfs leads
// a session of its own (it daemonized), to the session's autogroup. Best effort.
void ApplyNice(int nice) {
  if (nice == 0) return;
  if (::setpriority(PRIO_PROCESS, 0, nice) != 0) {
    std::fprintf(Err(), "volstack: devfs: cannot set nice %d: %s\n", nice, std::strerror(errno));
  }
  if (::getsid(0) != ::getpid()) return;  // --foreground: the session is the caller's
  std::ofstream autogroup("/proc/self/autogroup");
  if (autogroup) autogroup << nice << std::flush;  // absent without CONFIG_SCHED_AUTOGROUP
}

// A device named by path, opened with O_DIRECT (--backing-direct-io) and without host
// readahead (unless --backing-readahead); others as usual.
Result<bdev::BlockDevicePtr> OpenExport(Context& ctx, const std::string& open_name,
                                        const DevfsArgs& args) {
  const bool is_path = !open_name.empty() && (open_name[0] == '/' || open_name[0] == '.');
  bdev::BlockDevicePtr device;
  if (args.backing_direct_io && is_path) {
    bdev::FileDeviceOptions options;
    options.read_only = args.read_only;
    options.exclusive_lock = !args.read_only;
    options.direct_io = true;
    VS_ASSIGN_OR_RETURN(device, bdev::FileDevice::Open(open_name, options));
  } else {
    VS_ASSIGN_OR_RETURN(device, OpenDeviceByName(ctx, open_name, args.read_only));
  }
  auto* file = dynamic_cast<bdev::FileDevice*>(device.get());
  if (is_path && file != nullptr && !args.backing_readahead && !file->is_block_device()) {
    ::posix_fadvise(file->fd(), 0, 0, POSIX_FADV_RANDOM);  // advice: failure is harmless
  }
  return device;
}

int RunDevfs(Context& ctx, const DevfsArgs& args) {
  std::vector<std::pair<std::string, std::string>> exports;
  for (const auto& arg : args.names) {
    auto [name, open_name] = SplitExportArg(arg);
    if (!bdev::DeviceRegistry::IsValidName(name)) {
      return ReportUsage("devfs: '" + name + "' is not a valid devfs name (use NAME=PATH)");
    }
    exports.emplace_back(name, open_name);
  }
  const std::string dir = DevfsDir(ctx, args.devfs);
  auto registry = std::make_shared<bdev::DeviceRegistry>();
  std::unique_ptr<exportfs::Devfs> devfs;

  auto start = [&]() -> Status {
    for (const auto& [name, open_name] : exports) {
      VS_ASSIGN_OR_RETURN(auto device, OpenExport(ctx, open_name, args));
      VS_RETURN_IF_ERROR(registry->Add(name, std::move(device)));
    }
    ApplyNice(args.nice);
    exportfs::DevfsOptions options;
    options.max_threads = args.threads;
    VS_ASSIGN_OR_RETURN(options.transport, exportfs::ParseFuseTransport(args.fuse_transport));
    options.uring_threads_per_queue = args.uring_threads;
    options.uring_pin_threads = args.uring_pin;
    options.max_background = args.max_background;
    options.congestion_threshold = args.max_background * 3 / 4;
    options.direct_io = !args.page_cache;
    options.clone_fd = !args.no_clone_fd;
    options.max_write = args.max_write_kib * 1024;
    options.attr_timeout = args.attr_timeout;
    options.coalesce_fsync = !args.fsync_each;
    options.write_behind = args.write_behind || args.write_behind_inline;
    options.write_behind_inline = args.write_behind_inline;
    VS_ASSIGN_OR_RETURN(devfs, exportfs::Devfs::Mount(dir, *registry, options));
    const std::string& why = devfs->transport_reason();
    std::fprintf(Err(), "volstack: devfs %s: FUSE transport %s%s%s\n", dir.c_str(),
                 exportfs::FuseTransportName(devfs->transport()), why.empty() ? "" : ": ",
                 why.c_str());
    return Status::Ok();
  };
  auto stop = [&]() {
    if (devfs != nullptr) {
      // A bound loop device keeps the mount busy: give a detach in progress a moment, then
      // force (the loop device then sees I/O errors).
      Status s;
      for (int attempt = 0; attempt < 20; attempt++) {
        s = devfs->Unmount();
        if (s.code() != EBUSY) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (!s.ok()) std::fprintf(Err(), "volstack: %s; forcing\n", s.ToString().c_str());
      devfs.reset();
    }
    for (const auto& [name, device] : registry->List()) {
      Status s = device->Flush();
      if (!s.ok())
        std::fprintf(Err(), "volstack: flush %s: %s\n", name.c_str(), s.ToString().c_str());
    }
  };
  return RunServer(ctx, "devfs", args.foreground, start, stop);
}

}  // namespace

void RegisterDevfsVerb(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<DevfsArgs>();
  CLI::App* verb = AddVerb(app, ctx, "devfs", "Serve devices as files in a FUSE tree",
                           [&ctx, args] { return RunDevfs(ctx, *args); });
  verb->add_flag("-f,--foreground", args->foreground, "Stay in the foreground");
  verb->add_option("--devfs", args->devfs,
                   "Mount point (default /run/volstack/dev, or <state-dir>/dev)");
  verb->add_flag("-r,--read-only", args->read_only, "Open every device read-only");
  verb->add_option("--threads", args->threads, "FUSE worker threads")->check(CLI::Range(1, 256));
  verb->add_option("--max-background", args->max_background, "Asynchronous FUSE requests in flight")
      ->check(CLI::Range(1, 65535));
  verb->add_flag("--page-cache", args->page_cache,
                 "Let the kernel page cache sit in front of the devices");
  verb->add_option("--fuse-transport", args->fuse_transport,
                   "auto (io_uring when the kernel offers it), uring or classic; default from "
                   "VOLSTACK_FUSE_TRANSPORT, else auto")
      ->check(CLI::IsMember({"auto", "uring", "classic"}));
  verb->add_option("--uring-threads", args->uring_threads,
                   "FUSE over io_uring: threads (ring entries) per CPU queue (0: --threads "
                   "spread over the queues)")
      ->check(CLI::Range(0, 64));
  verb->add_flag("--uring-pin", args->uring_pin,
                 "FUSE over io_uring: pin each queue's threads to its CPU");
  verb->add_flag("--no-clone-fd", args->no_clone_fd, "One /dev/fuse fd for all threads");
  verb->add_option("--max-write", args->max_write_kib, "Largest FUSE READ/WRITE in KiB")
      ->check(CLI::Range(4, 1024));
  verb->add_option("--attr-timeout", args->attr_timeout,
                   "Seconds the kernel may cache names and attributes")
      ->check(CLI::Range(0.0, 86400.0));
  verb->add_option("--nice", args->nice,
                   "Nice value of the serving threads (default -10; 0 leaves it)")
      ->check(CLI::Range(-20, 19));
  verb->add_flag("--backing-direct-io", args->backing_direct_io,
                 "Open devices named by path with O_DIRECT");
  verb->add_flag("--backing-readahead", args->backing_readahead,
                 "Keep host readahead on devices named by path");
  verb->add_flag("--fsync-each", args->fsync_each,
                 "One device flush per FSYNC (no group commit, no clean skip)");
  verb->add_flag("--write-behind", args->write_behind,
                 "Start writing back page-cache-backed files after writes (helps when loaded)");
  verb->add_flag("--write-behind-inline", args->write_behind_inline,
                 "Start each write's write-back on the FUSE thread (comparison)");
  verb->add_option("NAME", args->names, "Devices: NAME, PATH or NAME=PATH");
}

}  // namespace volstack::cli
