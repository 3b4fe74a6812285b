// volstack devfs [--foreground] [--devfs DIR] [NAME | NAME=PATH]...
//
// Serves the named devices as files under the devfs mount point until SIGINT/SIGTERM, then
// unmounts and flushes them. The daemon embeds the same Devfs; this verb is for use without
// it and for tests.
#include <cstdio>
#include <memory>
#include <thread>

#include "bdev/device_registry.h"
#include "cli/device_names.h"
#include "cli/export_common.h"
#include "export/devfs.h"

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
  bool splice = false;
  bool no_clone_fd = false;
};

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
      VS_ASSIGN_OR_RETURN(auto device, OpenDeviceByName(ctx, open_name, args.read_only));
      VS_RETURN_IF_ERROR(registry->Add(name, std::move(device)));
    }
    exportfs::DevfsOptions options;
    options.max_threads = args.threads;
    options.max_background = args.max_background;
    options.congestion_threshold = args.max_background * 3 / 4;
    options.direct_io = !args.page_cache;
    options.splice = args.splice;
    options.clone_fd = !args.no_clone_fd;
    VS_ASSIGN_OR_RETURN(devfs, exportfs::Devfs::Mount(dir, *registry, options));
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
      if (!s.ok()) std::fprintf(stderr, "volstack: %s; forcing\n", s.ToString().c_str());
      devfs.reset();
    }
    for (const auto& [name, device] : registry->List()) {
      Status s = device->Flush();
      if (!s.ok())
        std::fprintf(stderr, "volstack: flush %s: %s\n", name.c_str(), s.ToString().c_str());
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
  verb->add_flag("--splice", args->splice, "Use splice for FUSE requests and replies");
  verb->add_flag("--no-clone-fd", args->no_clone_fd, "One /dev/fuse fd for all threads");
  verb->add_option("NAME", args->names, "Devices: NAME, PATH or NAME=PATH");
}

}  // namespace volstack::cli
