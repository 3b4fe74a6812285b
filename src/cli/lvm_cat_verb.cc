// `volstack lvm-cat NAME [--offset N] [--length N]`: copies a device's bytes to stdout. A
// hidden helper for tests (reading an LV through volstack's own mapping, with no kernel in
// between); not an lvm2 command.
#include <unistd.h>

#include <vector>

#include "cli/device_names.h"
#include "cli/lvm_common.h"
#include "util/request_io.h"

namespace volstack::cli::lvmcli {

namespace {
struct CatArgs {
  std::string name;
  uint64_t offset = 0;
  uint64_t length = UINT64_MAX;
};

int Cat(const Context& ctx, const CatArgs& a) {
  auto dev = OpenDeviceByName(ctx, a.name, true);
  if (!dev.ok()) return Fail(dev.status());
  const uint64_t size = (*dev)->size();
  if (a.offset > size) return Fail("offset beyond the end", kLvmInvalid);
  uint64_t left = std::min(a.length, size - a.offset);
  uint64_t pos = a.offset;
  std::vector<uint8_t> buf(1 << 20);
  while (left > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
    Status s = (*dev)->Read(pos, std::span<uint8_t>(buf.data(), n));
    if (!s.ok()) return Fail(s);
    for (size_t done = 0; done < n;) {
      ssize_t w = ::write(CurrentIo().out_fd, buf.data() + done, n - done);
      if (w <= 0) return Fail(ErrnoStatus("write stdout"));
      done += static_cast<size_t>(w);
    }
    pos += n;
    left -= n;
  }
  return kLvmOk;
}
}  // namespace

void RegisterCatVerb(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<CatArgs>();
  CLI::App* cat = AddVerb(app, ctx, "lvm-cat", "Copy a device's bytes to stdout (test helper)",
                          [&ctx, a] { return Cat(ctx, *a); });
  cat->group("");
  cat->add_option("name", a->name, "Device (vg/lv, pool volume or path)")->required();
  cat->add_option("--offset", a->offset, "Byte offset (a multiple of the logical block size)");
  cat->add_option("--length", a->length, "Bytes (a multiple of the logical block size)");
}

}  // namespace volstack::cli::lvmcli
