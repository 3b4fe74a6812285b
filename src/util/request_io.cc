#include "util/request_io.h"

#include <unistd.h>

namespace volstack {

namespace {

thread_local const RequestIo* t_io = nullptr;

// The process's own streams; its terminal facts are asked for when a thread first looks.
const RequestIo& ProcessIo() {
  static const RequestIo io = [] {
    RequestIo r;
    r.stdin_tty = ::isatty(0) == 1;
    r.stdout_tty = ::isatty(1) == 1;
    r.stderr_tty = ::isatty(2) == 1;
    return r;
  }();
  return io;
}

}  // namespace

const RequestIo& CurrentIo() { return t_io != nullptr ? *t_io : ProcessIo(); }

ScopedRequestIo::ScopedRequestIo(const RequestIo* io) : previous_(t_io) { t_io = io; }

ScopedRequestIo::~ScopedRequestIo() { t_io = previous_; }

}  // namespace volstack
