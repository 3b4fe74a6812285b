// volstack losetup: kernel loop devices bound to devfs files, with util-linux's interface.
//
//   volstack losetup [-f|/dev/loopN] [--show] [-r] [-b|--sector-size N] [--direct-io[=on|off]]
//                    DEVICE-NAME       bind (sector size defaults to the file's st_blksize,
//                                      the device's physical block size, at most 4096)
//   volstack losetup -d /dev/loopN... detach the given loop devices
//   volstack losetup -D               detach every loop bound to a file of this devfs
//   volstack losetup -a               list all bound loop devices (util-linux's -a format)
//   volstack losetup -l [-n] [-O COLS] [/dev/loopN]  list as a table
//
// Bindings made or removed here are recorded in <state_dir>/loops.json for `volstack up`.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string_view>

#include "cli/export_common.h"
#include "export/loop_bindings.h"
#include "export/loop_device.h"
#include "util/request_io.h"

namespace volstack::cli {

namespace {

struct LosetupArgs {
  bool find = false;
  bool show = false;
  bool read_only = false;
  uint32_t sector_size = 0;
  std::string direct_io;  // "", "on", "off"
  bool detach = false;
  bool detach_all = false;
  bool all = false;
  bool list = false;
  bool noheadings = false;
  std::string output;
  std::string devfs;
  std::vector<std::string> args;
  CLI::Option* direct_io_opt = nullptr;
};

const std::vector<std::string> kDefaultColumns = {"NAME", "SIZELIMIT", "OFFSET", "AUTOCLEAR",
                                                  "RO",   "BACK-FILE", "DIO",    "LOG-SEC"};

std::string Column(const exportfs::LoopInfo& l, const std::string& col) {
  if (col == "NAME") return l.device;
  if (col == "SIZELIMIT") return std::to_string(l.sizelimit);
  if (col == "OFFSET") return std::to_string(l.offset);
  if (col == "AUTOCLEAR") return l.autoclear ? "1" : "0";
  if (col == "RO") return l.read_only ? "1" : "0";
  if (col == "BACK-FILE") return l.backing_file;
  if (col == "DIO") return l.direct_io ? "1" : "0";
  if (col == "LOG-SEC") return std::to_string(l.sector_size);
  if (col == "MAJ:MIN") return "7:" + std::to_string(l.number);
  if (col == "BACK-INO") return std::to_string(l.backing_ino);
  return "";
}

bool LeftAligned(const std::string& col) { return col == "NAME" || col == "BACK-FILE"; }

int List(const LosetupArgs& a) {
  std::vector<std::string> cols = kDefaultColumns;
  if (!a.output.empty()) {
    cols.clear();
    std::stringstream ss(a.output);
    std::string c;
    const std::vector<std::string> known = {"NAME",    "SIZELIMIT", "OFFSET", "AUTOCLEAR",
                                            "RO",      "BACK-FILE", "DIO",    "LOG-SEC",
                                            "MAJ:MIN", "BACK-INO"};
    while (std::getline(ss, c, ',')) {
      std::transform(c.begin(), c.end(), c.begin(), ::toupper);
      if (std::find(known.begin(), known.end(), c) == known.end()) {
        return ReportUsage("losetup: unknown column: " + c);
      }
      cols.push_back(c);
    }
  }
  std::vector<exportfs::LoopInfo> loops;
  if (a.args.empty()) {
    loops = exportfs::ListLoops();
  } else {
    for (const auto& dev : a.args) {
      auto info = exportfs::GetLoopInfo(dev);
      if (!info.ok()) return ReportFailure(info.status());
      loops.push_back(*info);
    }
  }
  std::vector<std::vector<std::string>> rows;
  if (!a.noheadings) rows.push_back(cols);
  for (const auto& l : loops) {
    std::vector<std::string> row;
    for (const auto& c : cols) row.push_back(Column(l, c));
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(cols.size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); i++) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); i++) {
      if (i > 0) line += ' ';
      const std::string pad(width[i] - row[i].size(), ' ');
      const bool last = i + 1 == row.size();
      line += LeftAligned(cols[i]) ? row[i] + (last ? "" : pad) : pad + row[i];
    }
    std::fprintf(Out(), "%s\n", line.c_str());
  }
  return kExitOk;
}

int ListAll() {
  for (const auto& l : exportfs::ListLoops()) {
    char dev[32];
    std::snprintf(dev, sizeof(dev), "%04llu", static_cast<unsigned long long>(l.backing_dev));
    std::string line =
        l.device + ": [" + dev + "]:" + std::to_string(l.backing_ino) + " (" + l.backing_file + ")";
    if (l.offset != 0) line += ", offset " + std::to_string(l.offset);
    if (l.sizelimit != 0) line += ", sizelimit " + std::to_string(l.sizelimit);
    std::fprintf(Out(), "%s\n", line.c_str());
  }
  return kExitOk;
}

Status Record(const Context& ctx, const std::string& device, const exportfs::LoopBinding* binding) {
  return exportfs::UpdateLoopBindings(
      ctx.global.state_dir, [&](std::vector<exportfs::LoopBinding>& loops) {
        std::erase_if(loops, [&](const exportfs::LoopBinding& b) { return b.device == device; });
        if (binding != nullptr) loops.push_back(*binding);
        return Status::Ok();
      });
}

int Detach(const Context& ctx, const std::vector<std::string>& devices) {
  int rc = kExitOk;
  for (const auto& dev : devices) {
    Status s = exportfs::DetachLoop(dev);
    if (!s.ok() && s.code() != ENXIO) {
      rc = ReportFailure(s);
      continue;
    }
    if (!s.ok()) rc = ReportFailure(s);
    Status r = Record(ctx, dev, nullptr);
    if (!r.ok()) rc = ReportFailure(r);
  }
  return rc;
}

int DetachAll(const Context& ctx, const std::string& devfs_dir) {
  std::vector<std::string> devices;
  const std::string prefix = devfs_dir + "/";
  for (const auto& l : exportfs::ListLoops()) {
    if (l.backing_file.rfind(prefix, 0) == 0) devices.push_back(l.device);
  }
  return Detach(ctx, devices);
}

// True when `path`, with every symlink and `..` resolved, lies below `dir`: a name such as
// `../../etc/x` must never bind (and record) a file outside devfs.
bool InsideDirectory(const std::string& path, const std::string& dir) {
  char* real_path = ::realpath(path.c_str(), nullptr);
  char* real_dir = ::realpath(dir.c_str(), nullptr);
  bool inside = real_path != nullptr && real_dir != nullptr &&
                std::string_view(real_path).starts_with(std::string(real_dir) + "/");
  std::free(real_path);
  std::free(real_dir);
  return inside;
}

int Attach(const Context& ctx, const LosetupArgs& a, const std::string& loop_dev,
           const std::string& name, const std::string& devfs_dir) {
  // A devfs path works too; a bare name is looked up in devfs.
  std::string file = name;
  std::string dev_name = name;
  if (name.rfind(devfs_dir + "/", 0) == 0) {
    dev_name = name.substr(devfs_dir.size() + 1);
  } else {
    file = devfs_dir + "/" + name;
  }
  struct stat st;
  if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || !InsideDirectory(file, devfs_dir)) {
    return ReportFailure(Status::NotFound("losetup: no device '" + dev_name + "' in devfs " +
                                          devfs_dir + " (is `volstack devfs` serving it?)"));
  }
  exportfs::LoopConfig config;
  // A read-only device (a snapshot) is a 0400 file: bound read-only, as util-linux's
  // losetup falls back for a write-protected file.
  config.read_only = a.read_only || (st.st_mode & 0222) == 0;
  // Direct I/O unless refused: a buffered loop serves its requests one at a time from one
  // worker, so a queue of 32 reached devfs as one request in service (docs/performance.md);
  // with direct I/O the loop submits them all at once, and devfs keeps no page cache anyway.
  config.direct_io = a.direct_io != "off";
  if (a.sector_size != 0) {
    config.sector_size = a.sector_size;
  } else {
    // The device's physical block size, within what a loop device accepts.
    uint32_t bs = static_cast<uint32_t>(st.st_blksize);
    if (bs < 512 || (bs & (bs - 1)) != 0) bs = 512;
    config.sector_size = std::min<uint32_t>(bs, 4096);
  }
  auto info = exportfs::AttachLoop(loop_dev, file, config);
  if (!info.ok()) return ReportFailure(info.status());
  exportfs::LoopBinding binding{info->device,       dev_name,         file,
                                config.sector_size, config.direct_io, config.read_only};
  Status r = Record(ctx, info->device, &binding);
  if (!r.ok()) std::fprintf(Err(), "volstack: warning: %s\n", r.ToString().c_str());
  if (a.show) std::fprintf(Out(), "%s\n", info->device.c_str());
  return kExitOk;
}

int RunLosetup(Context& ctx, LosetupArgs& a) {
  const std::string devfs_dir = DevfsDir(ctx, a.devfs);
  if (a.direct_io_opt != nullptr && a.direct_io_opt->count() > 0 && a.direct_io.empty()) {
    a.direct_io = "on";
  }
  if (!a.direct_io.empty() && a.direct_io != "on" && a.direct_io != "off") {
    return ReportUsage("losetup: --direct-io takes on or off, not '" + a.direct_io + "'");
  }
  if (a.sector_size != 0 &&
      (a.sector_size < 512 || a.sector_size > 4096 || (a.sector_size & (a.sector_size - 1)))) {
    return ReportUsage("losetup: invalid sector size " + std::to_string(a.sector_size) +
                       " (512, 1024, 2048 or 4096)");
  }
  const int modes = a.detach + a.detach_all + a.all + a.list;
  if (modes > 1) return ReportUsage("losetup: -d, -D, -a and -l are mutually exclusive");
  if (a.detach) {
    if (a.args.empty()) return ReportUsage("losetup: -d needs a loop device");
    for (const auto& d : a.args) {
      if (exportfs::LoopNumber(d) < 0) return ReportUsage("losetup: " + d + ": not a loop device");
    }
    return Detach(ctx, a.args);
  }
  if (a.detach_all) return DetachAll(ctx, devfs_dir);
  if (a.all) return ListAll();
  if (a.list) return List(a);
  // Bind: [LOOPDEV] NAME.
  if (a.args.empty()) {
    if (a.find) {  // `losetup -f`: print the first free device
      auto loops = exportfs::ListLoops();
      int n = 0;
      for (const auto& l : loops) {
        if (l.number == n) n++;
      }
      std::fprintf(Out(), "/dev/loop%d\n", n);
      return kExitOk;
    }
    return List(a);
  }
  if (a.args.size() > 2) return ReportUsage("losetup: too many arguments");
  std::string loop_dev;
  std::string name = a.args.back();
  if (a.args.size() == 2) {
    if (a.find) return ReportUsage("losetup: -f and a loop device are mutually exclusive");
    loop_dev = a.args.front();
    if (exportfs::LoopNumber(loop_dev) < 0) {
      return ReportUsage("losetup: " + loop_dev + ": not a loop device");
    }
  } else if (exportfs::LoopNumber(name) >= 0 && !a.find) {
    // `losetup /dev/loopN`: its status.
    auto info = exportfs::GetLoopInfo(name);
    if (!info.ok()) return ReportFailure(info.status());
    std::fprintf(Out(), "%s: [%04llu]:%llu (%s)\n", info->device.c_str(),
                 static_cast<unsigned long long>(info->backing_dev),
                 static_cast<unsigned long long>(info->backing_ino), info->backing_file.c_str());
    return kExitOk;
  }
  return Attach(ctx, a, loop_dev, name, devfs_dir);
}

}  // namespace

void RegisterLosetupVerb(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<LosetupArgs>();
  CLI::App* verb = AddVerb(app, ctx, "losetup", "Bind kernel loop devices to volstack devices",
                           [&ctx, a] { return RunLosetup(ctx, *a); });
  verb->add_flag("-f,--find", a->find, "Use the first free loop device");
  verb->add_flag("--show", a->show, "Print the loop device's name");
  verb->add_flag("-r,--read-only", a->read_only, "Read-only loop device");
  verb->add_option("-b,--sector-size", a->sector_size,
                   "Logical sector size (default: the device's physical block size)");
  a->direct_io_opt =
      verb->add_option("--direct-io", a->direct_io, "Direct I/O: on (the default) or off")
          ->expected(0, 1);
  verb->add_flag("-d,--detach", a->detach, "Detach the given loop devices");
  verb->add_flag("-D,--detach-all", a->detach_all, "Detach every loop bound to this devfs");
  verb->add_flag("-a,--all", a->all, "List all bound loop devices");
  verb->add_flag("-l,--list", a->list, "List as a table");
  verb->add_flag("-n,--noheadings", a->noheadings, "No header line in -l");
  verb->add_option("-O,--output", a->output, "Columns for -l");
  verb->add_option("--devfs", a->devfs, "The devfs mount point");
  verb->add_option("ARGS", a->args, "[LOOPDEV] DEVICE-NAME, or loop devices");
}

}  // namespace volstack::cli
