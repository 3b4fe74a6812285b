#include "lvm/device_io.h"

#include <algorithm>
#include <cstring>

namespace volstack::lvm {

Result<std::vector<uint8_t>> ReadBytes(bdev::BlockDevice& dev, uint64_t offset, uint64_t length) {
  const uint64_t lbs = dev.logical_block_size();
  const uint64_t begin = offset / lbs * lbs;
  const uint64_t end = (offset + length + lbs - 1) / lbs * lbs;
  if (offset + length < offset || end > dev.size()) {
    return Status::Corruption(dev.name() + ": metadata at " + std::to_string(offset) + " length " +
                              std::to_string(length) + " lies beyond the end of the device");
  }
  std::vector<uint8_t> buf(end - begin);
  VS_RETURN_IF_ERROR(dev.Read(begin, buf));
  if (begin != offset || buf.size() != length) {
    std::memmove(buf.data(), buf.data() + (offset - begin), length);
    buf.resize(length);
  }
  return buf;
}

Status WriteBytes(bdev::BlockDevice& dev, uint64_t offset, std::span<const uint8_t> data) {
  const uint64_t lbs = dev.logical_block_size();
  if (offset % lbs == 0 && data.size() % lbs == 0) return dev.Write(offset, data);
  const uint64_t begin = offset / lbs * lbs;
  const uint64_t end = (offset + data.size() + lbs - 1) / lbs * lbs;
  VS_ASSIGN_OR_RETURN(auto buf, ReadBytes(dev, begin, end - begin));
  std::memcpy(buf.data() + (offset - begin), data.data(), data.size());
  return dev.Write(begin, buf);
}

}  // namespace volstack::lvm
