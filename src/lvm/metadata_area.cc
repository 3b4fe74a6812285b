#include "lvm/metadata_area.h"

#include <vector>

#include "lvm/crc.h"
#include "lvm/device_io.h"

namespace volstack::lvm {

namespace {
uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

Status MetadataArea::Load() {
  VS_ASSIGN_OR_RETURN(auto sector, ReadBytes(*dev_, start_, kMdaHeaderSize));
  auto h = DecodeMdaHeader(sector, start_);
  if (!h.ok()) return h.status().WithContext(dev_->name());
  if (h->size != size_) {
    return Status::Corruption(dev_->name() + ": metadata area at " + std::to_string(start_) +
                              " has size " + std::to_string(h->size) + ", label says " +
                              std::to_string(size_));
  }
  header_ = *h;
  return Status::Ok();
}

Status MetadataArea::WriteHeader(const MdaHeader& header) {
  std::vector<uint8_t> sector(kMdaHeaderSize);
  EncodeMdaHeader(header, sector);
  VS_RETURN_IF_ERROR(WriteBytes(*dev_, start_, sector));
  header_ = header;
  return Status::Ok();
}

Status MetadataArea::Initialize(uint64_t wipe) {
  std::vector<uint8_t> zero(std::min(wipe, size_), 0);
  VS_RETURN_IF_ERROR(WriteBytes(*dev_, start_, zero));
  MdaHeader h;
  h.start = start_;
  h.size = size_;
  return WriteHeader(h);
}

Result<std::string> MetadataArea::ReadText(const RawLocn& locn) const {
  if (locn.empty()) return Status::NotFound(dev_->name() + ": metadata area holds no metadata");
  const std::string where = dev_->name() + ": metadata at " + std::to_string(start_ + locn.offset);
  if (locn.size == 0 || locn.offset < kMdaHeaderSize || locn.offset >= size_ ||
      locn.size > size_ - kMdaHeaderSize) {
    return Status::Corruption(where + ": location outside the metadata area");
  }
  const uint64_t first = std::min(locn.size, size_ - locn.offset);
  const uint64_t wrap = locn.size - first;
  VS_ASSIGN_OR_RETURN(auto part1, ReadBytes(*dev_, start_ + locn.offset, first));
  uint32_t crc = LvmCrc(part1);
  std::string text(part1.begin(), part1.end());
  if (wrap > 0) {
    VS_ASSIGN_OR_RETURN(auto part2, ReadBytes(*dev_, start_ + kMdaHeaderSize, wrap));
    crc = LvmCrc(part2, crc);
    text.append(part2.begin(), part2.end());
  }
  if (crc != locn.checksum) return Status::Corruption(where + ": metadata checksum mismatch");
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

Result<RawLocn> MetadataArea::Place(const MdaHeader& header, uint64_t text_size) {
  const uint64_t size = header.size;
  const uint64_t max_text = (size - kMdaHeaderSize) / 2 - kMdaHeaderSize;
  if (text_size > max_text || size < 4 * kMdaHeaderSize) {
    return Status::NoSpace("metadata text of " + std::to_string(text_size) +
                           " bytes does not fit a metadata area of " + std::to_string(size) +
                           " bytes (at most " + std::to_string(max_text) + ")");
  }
  RawLocn locn;
  locn.size = text_size;
  const RawLocn& old = header.committed;
  if (old.empty()) {
    locn.offset = kMdaHeaderSize;
  } else {
    uint64_t old_end = old.offset + old.size;  // one past the last byte, unwrapped
    if (old_end > size) old_end = old_end - size + kMdaHeaderSize;
    const uint64_t old_last = old_end - 1;
    uint64_t next = RoundUp(old_last + 1, kSectorSize);
    if (next > size - kMdaHeaderSize || size - old_last < kMdaHeaderSize) next = kMdaHeaderSize;
    locn.offset = next;
    // Refuse to overwrite the committed copy (two copies always fit given max_text).
    auto covers = [&](uint64_t off, uint64_t len, uint64_t point) {
      uint64_t first = std::min(len, size - off);
      if (point >= off && point < off + first) return true;
      uint64_t wrap = len - first;
      return wrap > 0 && point >= kMdaHeaderSize && point < kMdaHeaderSize + wrap;
    };
    if (covers(locn.offset, RoundUp(text_size, kSectorSize), old.offset) ||
        covers(old.offset, old.size, locn.offset)) {
      return Status::NoSpace("metadata area: new copy would overlap the committed one");
    }
  }
  return locn;
}

Result<RawLocn> MetadataArea::WriteText(std::string_view text) {
  VS_ASSIGN_OR_RETURN(RawLocn locn, Place(header_, text.size()));
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const uint64_t first = std::min<uint64_t>(text.size(), size_ - locn.offset);
  const uint64_t wrap = text.size() - first;
  auto write_padded = [&](uint64_t off, const uint8_t* p, uint64_t len) {
    std::vector<uint8_t> buf(p, p + len);
    uint64_t padded = std::min(RoundUp(len, kSectorSize), size_ - off);
    buf.resize(padded, 0);
    return WriteBytes(*dev_, start_ + off, buf);
  };
  VS_RETURN_IF_ERROR(write_padded(locn.offset, bytes, first));
  if (wrap > 0) VS_RETURN_IF_ERROR(write_padded(kMdaHeaderSize, bytes + first, wrap));
  uint32_t crc = LvmCrc(std::span<const uint8_t>(bytes, first));
  if (wrap > 0) crc = LvmCrc(std::span<const uint8_t>(bytes + first, wrap), crc);
  locn.checksum = crc;
  return locn;
}

Status MetadataArea::Precommit(const RawLocn& locn) {
  MdaHeader h = header_;
  h.precommitted = locn;
  return WriteHeader(h);
}

Status MetadataArea::Commit(const RawLocn& locn) {
  MdaHeader h = header_;
  h.committed = locn;
  h.precommitted = RawLocn{};
  return WriteHeader(h);
}

}  // namespace volstack::lvm
