#include "bench/environment.h"

#include <unistd.h>

#include "bench/subprocess.h"

namespace volstack::bench {

Environment Environment::Probe(const std::string& volstack) {
  Environment env;
  env.volstack = volstack;
  env.root = geteuid() == 0;
  env.loop_devices = access("/dev/loop-control", R_OK | W_OK) == 0;
  env.fuse = access("/dev/fuse", R_OK | W_OK) == 0;
  env.dbench = ProgramExists("dbench");
  env.mkfs_xfs = ProgramExists("mkfs.xfs");
  env.losetup = ProgramExists("losetup");
  env.fio = ProgramExists("fio");
  if (access(kDefaultLoadfile, R_OK) == 0) env.loadfile = kDefaultLoadfile;
  if (env.dbench) {
    CommandOptions quick;
    quick.timeout_seconds = 10;
    // `dbench --help` prints "dbench version 4.00 - Copyright ..." first.
    auto r = RunCommand({"dbench", "--help"}, quick);
    if (r.ok()) {
      std::string first = r->output.substr(0, r->output.find('\n'));
      env.dbench_version = first.substr(0, first.find(" - "));
    }
  }
  return env;
}

Status Environment::DbenchUsable() const {
  if (!root) return Status::NotSupported("not running as root (loop devices and mount need it)");
  if (!loop_devices) return Status::NotSupported("no loop devices (/dev/loop-control)");
  if (!losetup) return Status::NotSupported("no losetup (apt-get install util-linux)");
  if (!mkfs_xfs) return Status::NotSupported("no mkfs.xfs (apt-get install xfsprogs)");
  if (!dbench) return Status::NotSupported("no dbench (apt-get install dbench)");
  if (loadfile.empty()) {
    return Status::NotSupported(std::string("no dbench loadfile ") + kDefaultLoadfile);
  }
  return Status::Ok();
}

Status Environment::FioUsable() const {
  if (!root) return Status::NotSupported("not running as root (loop devices need it)");
  if (!loop_devices) return Status::NotSupported("no loop devices (/dev/loop-control)");
  if (!losetup) return Status::NotSupported("no losetup (apt-get install util-linux)");
  if (!fio) return Status::NotSupported("no fio (apt-get install fio)");
  return Status::Ok();
}

}  // namespace volstack::bench
