#include "pool/vdev.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "bdev/forwarding_device.h"
#include "pool/vdev_fanout.h"
#include "util/check.h"

namespace volstack::pool {

namespace {

// Counts the failures of the operations it forwards.
class ErrorCountingDevice final : public bdev::ForwardingDevice {
 public:
  ErrorCountingDevice(bdev::BlockDevicePtr target, std::shared_ptr<VdevErrors> errors)
      : ForwardingDevice(std::move(target)), errors_(std::move(errors)) {}

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override {
    return Count(errors_->read, ForwardingDevice::DoRead(offset, buf));
  }
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions o) override {
    return Count(errors_->write, ForwardingDevice::DoWrite(offset, buf, o));
  }
  Status DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                  bdev::WriteOptions o) override {
    return Count(errors_->write, ForwardingDevice::DoWriteV(offset, pieces, o));
  }
  Status DoFlush() override { return Count(errors_->write, ForwardingDevice::DoFlush()); }
  Status DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions o) override {
    return Count(errors_->write, ForwardingDevice::DoWriteZeroes(offset, length, o));
  }

 private:
  static Status Count(std::atomic<uint64_t>& counter, Status st) {
    if (!st.ok()) counter++;
    return st;
  }
  std::shared_ptr<VdevErrors> errors_;
};

LeafPtr MakeLeaf(bdev::BlockDevicePtr device, uint64_t guid, std::string path) {
  auto leaf = std::make_shared<Leaf>();
  leaf->guid = guid;
  if (path.empty() && device) {
    path = device->name();
    if (path.rfind("file:", 0) == 0) path = path.substr(5);  // as the user named it
  }
  leaf->path = std::move(path);
  if (device) {
    leaf->device = std::make_shared<ErrorCountingDevice>(std::move(device), leaf->errors);
  } else {
    leaf->state = LeafState::kUnavail;
  }
  return leaf;
}

}  // namespace

const char* LeafStateName(LeafState s) {
  switch (s) {
    case LeafState::kOnline:
      return "ONLINE";
    case LeafState::kOffline:
      return "OFFLINE";
    case LeafState::kFaulted:
      return "FAULTED";
    default:
      return "UNAVAIL";
  }
}

// The top-level vdev's data device: writes, write-zeroes and flushes go to every usable
// child in parallel and succeed when one child's did (a mirror; a failing child is marked
// FAULTED and left out from then on: its copy is stale); reads go to one readable child,
// rotating, the next one on an error. A plain vdev (one leaf) forwards, its errors
// returned as they are.
class Vdev::MirrorDevice final : public bdev::BlockDevice {
 public:
  MirrorDevice(Vdev* vdev, std::string name, const bdev::Geometry& g)
      : BlockDevice(std::move(name), g), vdev_(vdev) {}

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override {
    std::shared_lock l(vdev_->children_mu_);
    auto kids = vdev_->ReadableChildrenLocked(false);
    if (kids.empty()) return NoChild();
    Status first;
    for (auto& k : kids) {
      Status st = k->device->Read(offset, buf);
      if (st.ok()) return st;
      if (first.ok()) first = st;
    }
    return first;
  }
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions o) override {
    return Each([&](Leaf& k) { return k.device->Write(offset, buf, o); });
  }
  Status DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                  bdev::WriteOptions o) override {
    return Each([&](Leaf& k) { return k.device->WriteV(offset, pieces, o); });
  }
  Status DoFlush() override {
    return Each([&](Leaf& k) { return k.device->Flush(); });
  }
  void DoStartWriteback(uint64_t offset, uint64_t length) override {
    std::shared_lock l(vdev_->children_mu_);
    for (auto& k : vdev_->children_) {
      if (k->usable()) k->device->StartWriteback(offset, length);
    }
  }

 private:
  Status NoChild() const {
    return Status::IoError(name() + ": no usable child (vdev " + std::to_string(vdev_->id_) + " " +
                           vdev_->StateName() + ")");
  }
  Status Each(const std::function<Status(Leaf&)>& op) {
    std::shared_lock l(vdev_->children_mu_);
    std::vector<LeafPtr> kids;
    for (auto& k : vdev_->children_) {
      if (k->usable()) kids.push_back(k);
    }
    if (kids.empty()) return NoChild();
    std::vector<Status> st(kids.size());
    vdev_->fanout_->Run(kids.size(), [&](size_t i) { st[i] = op(*kids[i]); });
    if (!vdev_->mirror_) return st[0];
    size_t ok = 0;
    Status first;
    for (size_t i = 0; i < kids.size(); i++) {
      if (st[i].ok() && !kids[i]->resilvering) ok++;
      if (!st[i].ok() && first.ok()) first = st[i];
    }
    // One good copy on a readable child keeps the data; without one the write failed.
    if (ok == 0) return first.ok() ? NoChild() : first;
    for (size_t i = 0; i < kids.size(); i++) {
      if (!st[i].ok()) kids[i]->state = LeafState::kFaulted;
    }
    return Status::Ok();
  }

  Vdev* const vdev_;
};

namespace {
bdev::Geometry DataGeometry(const std::vector<LeafPtr>& kids, uint64_t alloc_end) {
  bdev::Geometry g;
  g.size_bytes = alloc_end;
  g.logical_block_size = 512;
  for (auto& k : kids) {
    if (k->device)
      g.logical_block_size = std::max(g.logical_block_size, k->device->logical_block_size());
  }
  return g;
}
}  // namespace

Vdev::Vdev(bdev::BlockDevicePtr device, uint32_t id, uint64_t guid, std::string path)
    : mirror_(false),
      fanout_(std::make_unique<Fanout>()),
      id_(id),
      guid_(guid),
      alloc_end_(AllocEnd(device->size())) {
  const std::string name = device->name();
  children_.push_back(MakeLeaf(std::move(device), guid, std::move(path)));
  device_ = std::make_shared<MirrorDevice>(this, name, DataGeometry(children_, alloc_end_));
}

Vdev::Vdev(std::vector<ChildSpec> children, uint32_t id, uint64_t guid, uint64_t alloc_end)
    : mirror_(true),
      fanout_(std::make_unique<Fanout>()),
      id_(id),
      guid_(guid),
      alloc_end_(alloc_end) {
  for (auto& c : children) {
    children_.push_back(MakeLeaf(std::move(c.device), c.guid, c.path));
    if (c.offline && children_.back()->device) children_.back()->state = LeafState::kOffline;
  }
  device_ = std::make_shared<MirrorDevice>(this, "mirror-" + std::to_string(id),
                                           DataGeometry(children_, alloc_end_));
}

Vdev::Vdev(std::vector<ChildSpec> children, uint32_t id, uint64_t guid, uint64_t alloc_end,
           const RaidzGeometry& geometry)
    : mirror_(false),
      raidz_(geometry),
      fanout_(std::make_unique<Fanout>()),
      id_(id),
      guid_(guid),
      alloc_end_(alloc_end) {
  VS_CHECK_OP(geometry.children, ==, children.size());
  for (auto& c : children) {
    children_.push_back(MakeLeaf(std::move(c.device), c.guid, c.path));
    if (c.offline && children_.back()->device) children_.back()->state = LeafState::kOffline;
  }
  device_ = MakeRaidzDevice();
}

Vdev::~Vdev() = default;

std::string Vdev::TypeName() const {
  if (is_raidz()) return "raidz" + std::to_string(raidz_.parity);
  return mirror_ ? "mirror" : "disk";
}

bool Vdev::CanLose(const Leaf& leaf) const {
  std::shared_lock l(children_mu_);
  size_t others = 0;
  for (auto& k : children_) others += &*k != &leaf && k->readable();
  return is_raidz() ? others >= raidz_.data_cols() : others > 0;
}

std::vector<LeafPtr> Vdev::children() const {
  std::shared_lock l(children_mu_);
  return children_;
}

std::vector<LeafPtr> Vdev::ReadableChildrenLocked(bool include_resilvering) const {
  std::vector<LeafPtr> out;
  for (auto& k : children_) {
    if (include_resilvering ? k->usable() : k->readable()) out.push_back(k);
  }
  if (out.size() > 1) {
    // Rotate so reads spread over the copies.
    const size_t start = const_cast<std::atomic<uint32_t>&>(rotor_)++ % out.size();
    std::rotate(out.begin(), out.begin() + static_cast<ptrdiff_t>(start), out.end());
  }
  return out;
}

bool Vdev::healthy() const {
  if (is_raidz()) return StateName() == "ONLINE";
  std::shared_lock l(children_mu_);
  return std::all_of(children_.begin(), children_.end(),
                     [](const LeafPtr& k) { return k->readable(); });
}

std::string Vdev::StateName() const {
  std::shared_lock l(children_mu_);
  size_t readable = 0;
  for (auto& k : children_) readable += k->readable();
  if (is_raidz()) {
    if (readable == children_.size()) return "ONLINE";
    return readable >= raidz_.data_cols() ? "DEGRADED" : "UNAVAIL";
  }
  if (readable == 0) {
    return children_.size() == 1 ? LeafStateName(children_[0]->state.load()) : "UNAVAIL";
  }
  return readable == children_.size() ? "ONLINE" : "DEGRADED";
}

uint64_t Vdev::ReadErrors() const {
  uint64_t n = 0;
  for (auto& k : children()) n += k->errors->read.load();
  return n;
}
uint64_t Vdev::WriteErrors() const {
  uint64_t n = 0;
  for (auto& k : children()) n += k->errors->write.load();
  return n;
}
uint64_t Vdev::ChecksumErrors() const {
  uint64_t n = 0;
  for (auto& k : children()) n += k->errors->checksum.load();
  return n;
}

Status Vdev::ReadVerified(uint64_t offset, std::span<uint8_t> buf, const BlockVerifier& ok,
                          HealCounts* heal, bool count) {
  if (is_raidz()) return RaidzReadVerified(offset, buf, ok, heal, count);
  std::vector<LeafPtr> kids;
  {
    std::shared_lock l(children_mu_);
    kids = ReadableChildrenLocked(false);
  }
  if (kids.empty()) {
    return Status::IoError("vdev " + std::to_string(id_) + " (" + device_->name() +
                           ") has no readable child");
  }
  std::vector<LeafPtr> bad;
  Status io_error;
  bool mismatch = false;
  for (auto& k : kids) {
    Status st = k->device->Read(offset, buf);
    if (!st.ok()) {
      if (io_error.ok()) io_error = st;
      bad.push_back(k);
      continue;
    }
    if (!ok(buf)) {
      if (count) k->errors->checksum++;
      mismatch = true;
      bad.push_back(k);
      continue;
    }
    // Self-heal: the copies that were bad get the good bytes (as zio's mirror repair).
    // A repair that fails is left for the scrub; the caller has its data.
    for (auto& b : bad) {
      if (heal) heal->bad_copies++;
      if (repair_ && b->device->Write(offset, buf).ok() && heal) {
        heal->repaired_bytes += buf.size();
      }
    }
    return Status::Ok();
  }
  if (heal) heal->bad_copies += bad.size();
  if (mismatch || io_error.ok()) {
    return Status::Corruption("checksum mismatch on every copy at vdev " + std::to_string(id_) +
                              " offset " + std::to_string(offset));
  }
  return io_error;
}

Status Vdev::ScrubBlock(uint64_t offset, uint64_t length, const BlockVerifier& ok, HealCounts* heal,
                        std::vector<uint8_t>* good_out) {
  std::vector<ScrubPiece> one{{0, length, ok, false}};
  std::vector<uint8_t> good;
  ScrubRunImpl(offset, length, one, heal, good_out ? &good : nullptr);
  if (one[0].bad) {
    return Status::Corruption("no good copy at vdev " + std::to_string(id_) + " offset " +
                              std::to_string(offset));
  }
  if (good_out) *good_out = std::move(good);
  return Status::Ok();
}

void Vdev::ScrubRun(uint64_t offset, uint64_t length, std::vector<ScrubPiece>& pieces,
                    HealCounts* heal) {
  ScrubRunImpl(offset, length, pieces, heal, nullptr);
}

void Vdev::ScrubRunImpl(uint64_t offset, uint64_t length, std::vector<ScrubPiece>& pieces,
                        HealCounts* heal, std::vector<uint8_t>* first_good) {
  if (is_raidz()) return RaidzScrubRun(offset, length, pieces, heal, first_good);
  std::vector<LeafPtr> kids;
  {
    std::shared_lock l(children_mu_);
    kids = ReadableChildrenLocked(true);
  }
  // Buffers kept per thread: a scan reuses them for every run (resize of a vector that is
  // large enough touches no byte).
  thread_local std::vector<std::vector<uint8_t>> scratch;
  auto& copies = scratch;  // the helpers read into this thread's buffers
  if (copies.size() < kids.size()) copies.resize(kids.size());
  std::vector<char> read_ok(kids.size());
  for (size_t i = 0; i < kids.size(); i++) {
    if (copies[i].size() < length) copies[i].resize(length);
  }
  fanout_->Run(kids.size(), [&](size_t i) {
    read_ok[i] = kids[i]->device->Read(offset, std::span<uint8_t>(copies[i].data(), length)).ok();
  });
  std::vector<bool> good(kids.size());
  for (auto& piece : pieces) {
    int source = -1;
    for (size_t i = 0; i < kids.size(); i++) {
      const std::span<const uint8_t> b(copies[i].data() + piece.rel, piece.length);
      good[i] = read_ok[i] && piece.ok(b);
      if (read_ok[i] && !good[i] && !kids[i]->resilvering) kids[i]->errors->checksum++;
      if (good[i] && source < 0 && !kids[i]->resilvering) source = static_cast<int>(i);
    }
    if (source < 0) {
      piece.bad = true;
      continue;
    }
    const std::span<const uint8_t> src(copies[source].data() + piece.rel, piece.length);
    for (size_t i = 0; i < kids.size(); i++) {
      if (good[i]) continue;
      if (heal) heal->bad_copies++;
      if (kids[i]->device->Write(offset + piece.rel, src).ok() && heal) {
        heal->repaired_bytes += piece.length;
      }
    }
    if (first_good && first_good->empty()) first_good->assign(src.begin(), src.end());
  }
}

void Vdev::LeafLabelFields(const Leaf& leaf, LabelConfig& c) const {
  c.vdev_size = leaf.device->size();
  if (!mirror_ && !is_raidz()) return;
  c.leaf_guid = leaf.guid;
  c.alloc_end = alloc_end_;
  c.children.clear();
  for (auto& k : children_) {
    c.children.push_back({k->guid, k->path, k->state.load() == LeafState::kOffline});
  }
  if (is_raidz()) {
    c.nparity = raidz_.parity;
    c.sector = raidz_.sector;
  }
}

Status Vdev::WriteLeafLabels(Leaf& leaf, const LabelConfig& config, int parity) {
  LabelConfig c = config;
  LeafLabelFields(leaf, c);
  for (int l = parity; l < kLabelCount; l += 2) {
    const uint64_t off = LabelOffset(leaf.device->size(), l) + kLabelConfigOffset;
    const auto buf = EncodeLabelConfig(c, off);
    VS_RETURN_IF_ERROR(leaf.device->Write(off, buf));
  }
  return Status::Ok();
}

Status Vdev::WriteLabelConfigs(const LabelConfig& config, int parity) {
  std::shared_lock l(children_mu_);
  Status first;
  size_t ok = 0;
  for (auto& k : children_) {
    if (!k->usable()) continue;
    Status st = WriteLeafLabels(*k, config, parity);
    if (st.ok()) {
      ok++;
    } else if (first.ok()) {
      first = st;
    }
  }
  if ((!mirror_ && !is_raidz()) || ok == 0)
    return first.ok() && ok == 0 ? Status::IoError("no usable child") : first;
  return Status::Ok();
}

Result<uint64_t> Vdev::RepairLabels(const LabelConfig& config) {
  std::shared_lock l(children_mu_);
  uint64_t fixed = 0;
  std::vector<uint8_t> buf(kLabelConfigSize);
  for (auto& k : children_) {
    if (!k->usable()) continue;
    for (int li = 0; li < kLabelCount; li++) {
      const uint64_t off = LabelOffset(k->device->size(), li) + kLabelConfigOffset;
      if (k->device->Read(off, buf).ok() && DecodeLabelConfig(buf, off).ok()) continue;
      LabelConfig c = config;
      LeafLabelFields(*k, c);
      if (k->device->Write(off, EncodeLabelConfig(c, off)).ok()) fixed++;
    }
  }
  return fixed;
}

Status Vdev::WriteUberblock(const Uberblock& ub) {
  std::shared_lock l(children_mu_);
  Status first;
  size_t ok = 0;
  for (auto& k : children_) {
    if (!k->usable()) continue;
    auto write = [&](Leaf& leaf) {
      Status st;
      for (int li = 0; li < kLabelCount && st.ok(); li++) {
        const uint64_t off = LabelOffset(leaf.device->size(), li) + kUberRingOffset +
                             (ub.txg % kUberSlots) * kUberSlotSize;
        st = leaf.device->Write(off, EncodeUberblock(ub, off));
      }
      return st;
    };
    // A raidz child being replaced still holds the pool until the replace is done.
    if (k->replaces && k->replaces->usable()) {
      if (!write(*k->replaces).ok()) k->replaces->state = LeafState::kFaulted;
    }
    Status st = write(*k);
    if (st.ok()) {
      ok += !k->resilvering;
    } else {
      if (first.ok()) first = st;
      if (mirror_ || is_raidz()) k->state = LeafState::kFaulted;
    }
  }
  if (!mirror_ && !is_raidz()) return first;
  if (ok == 0) return first.ok() ? Status::IoError("no usable child") : first;
  return Status::Ok();
}

std::vector<Uberblock> Vdev::ReadUberblocks() {
  std::vector<Uberblock> out;
  std::vector<uint8_t> ring(kUberSlots * kUberSlotSize);
  for (auto& k : children()) {
    if (!k->readable()) continue;
    for (int l = 0; l < kLabelCount; l++) {
      const uint64_t base = LabelOffset(k->device->size(), l) + kUberRingOffset;
      if (!k->device->Read(base, ring).ok()) continue;
      for (uint64_t s = 0; s < kUberSlots; s++) {
        auto ub = DecodeUberblock(
            std::span<const uint8_t>(ring.data() + s * kUberSlotSize, kUberSlotSize),
            base + s * kUberSlotSize);
        if (ub.ok()) out.push_back(*ub);
      }
    }
  }
  return out;
}

Status Vdev::AttachChild(size_t index, bdev::BlockDevicePtr device, uint64_t guid,
                         std::string path) {
  std::unique_lock l(children_mu_);
  if (index > children_.size()) return Status::InvalidArgument("no such child");
  if (is_raidz() && index == children_.size()) {
    return Status::InvalidArgument("a raidz takes no more children (replace one instead)");
  }
  if (is_raidz() && device->logical_block_size() > raidz_.sector) {
    return Status::InvalidArgument(device->name() + ": sector size above the raidz's " +
                                   std::to_string(raidz_.sector));
  }
  if (children_.size() >= 16 && index == children_.size()) {
    return Status::InvalidArgument("a mirror has at most 16 children");
  }
  const uint64_t need = is_raidz() ? raidz_.ChildOffset(alloc_end_) : alloc_end_;
  if (AllocEnd(device->size()) < need) {
    return Status::InvalidArgument(device->name() + " is too small for vdev " +
                                   std::to_string(id_));
  }
  auto leaf = MakeLeaf(std::move(device), guid, std::move(path));
  leaf->resilvering = true;
  if (is_raidz() && children_[index]->device) leaf->replaces = children_[index];
  if (index == children_.size()) {
    children_.push_back(leaf);
  } else {
    children_[index] = leaf;
  }
  mirror_ = true;
  return Status::Ok();
}

void Vdev::DropReplaced(uint64_t guid) {
  std::unique_lock l(children_mu_);
  for (auto& k : children_) {
    if (k->guid == guid) k->replaces.reset();
  }
}

void Vdev::ColumnLeaves(std::vector<LeafPtr>* kids, std::vector<LeafPtr>* olds) const {
  std::shared_lock l(children_mu_);
  *kids = children_;
  olds->clear();
  for (auto& k : children_) olds->push_back(k->resilvering ? k->replaces : nullptr);
}

Status Vdev::DetachChild(uint64_t guid) {
  std::unique_lock l(children_mu_);
  auto it = std::find_if(children_.begin(), children_.end(),
                         [&](const LeafPtr& k) { return k->guid == guid; });
  if (it == children_.end()) return Status::NotFound("no such device in vdev");
  if (is_raidz()) {
    return Status::InvalidArgument(
        "only a mirror's children can be detached (a raidz child can "
        "be replaced)");
  }
  if (!mirror_ || children_.size() < 2) {
    return Status::InvalidArgument("only a mirror's children can be detached");
  }
  size_t readable_left = 0;
  for (auto& k : children_) readable_left += k != *it && k->readable();
  if (readable_left == 0) return Status::Busy("no valid replicas would be left");
  children_.erase(it);
  return Status::Ok();
}

LeafPtr Vdev::FindChild(const std::string& guid_or_path) const {
  std::shared_lock l(children_mu_);
  for (auto& k : children_) {
    if (k->path == guid_or_path || std::to_string(k->guid) == guid_or_path) return k;
  }
  return nullptr;
}

Result<LabelConfig> Vdev::ReadLabelConfig(bdev::BlockDevice& device) {
  if (device.size() < kMinVdevSize) {
    return Status::Corruption(device.name() + ": too small to hold a pool label");
  }
  std::vector<uint8_t> buf(kLabelConfigSize);
  Status first_error;
  std::optional<LabelConfig> best;
  for (int l = 0; l < kLabelCount; l++) {
    const uint64_t off = LabelOffset(device.size(), l) + kLabelConfigOffset;
    Status st = device.Read(off, buf);
    if (st.ok()) {
      auto c = DecodeLabelConfig(buf, off);
      if (c.ok()) {
        if (!best || c->txg > best->txg) best = *c;
        continue;
      }
      st = c.status();
    }
    if (first_error.ok()) first_error = st;
  }
  if (best) return *best;
  return Status::Corruption(device.name() + ": no valid pool label (" + first_error.message() +
                            ")");
}

}  // namespace volstack::pool
