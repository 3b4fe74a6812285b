// Raidz I/O: the columns of a raidz top-level vdev (layout and parity: raidz.h).
//
// Writes split the logical range into the data columns, compute P (and Q), and write every
// usable child's extent in parallel. A write (or flush) succeeds when at least m = n - p
// readable children took it, so every block written stays rebuildable; a child that failed
// is FAULTED (no more I/O until zpool clear or online; its columns are stale and are
// rebuilt by reads and scrub).
//
// Plain reads (the pool's runs and cache refills, verified by their callers) read the data
// columns only, and the parity too when a data column cannot be read: the missing columns
// are rebuilt (a DEGRADED raidz reads on).
//
// Verified reads (ReadVerified) do what OpenZFS's vdev_raidz_combrec does: when the data
// columns do not match the block's checksum, parity is read and the columns are rebuilt for
// each set of up to p columns that may be bad (those that could not be read always among
// them), smallest sets first, until the checksum matches. Only then are the columns that
// differ from the rebuilt stripe counted (CKSUM) and rewritten. When no set matches, the
// reader gets Corruption (EIO), never bytes that were not verified.
//
// Scrub reads every column, parity included, rebuilds the same way, and also rewrites
// parity that does not match good data. A RESILVERING child's column is never trusted: it is
// rebuilt from the others and written.
//
// Replace (zpool replace) puts the new child in the old one's column at once, RESILVERING,
// and keeps the old child (Leaf::replaces) until the resilver is done, as zfs's replacing
// vdev: writes, flushes and uberblocks go to both, and reads and scrub take the column
// from the old child (trusted) while the new one fills. So the raidz keeps its redundancy
// during the resilver, and a crash that cuts the resilver short leaves the old child
// current: the labels still name it, and the import finds its column whole.
#include <algorithm>
#include <cstring>

#include "pool/vdev.h"
#include "pool/vdev_fanout.h"

namespace volstack::pool {

namespace {

// The sets of columns to try as bad, smallest first: each holds every column of `known`
// (could not be read) and at most `parity` columns in all.
std::vector<std::vector<uint32_t>> Candidates(uint32_t n, uint32_t parity,
                                              const std::vector<uint32_t>& known) {
  std::vector<std::vector<uint32_t>> out;
  if (known.size() > parity) return out;
  out.push_back(known);
  if (known.size() == parity) return out;
  if (known.size() == 1) {
    for (uint32_t j = 0; j < n; j++) {
      if (j != known[0]) out.push_back({known[0], j});
    }
    return out;
  }
  for (uint32_t j = 0; j < n; j++) out.push_back({j});
  if (parity > 1) {
    for (uint32_t i = 0; i < n; i++) {
      for (uint32_t j = i + 1; j < n; j++) out.push_back({i, j});
    }
  }
  return out;
}

// Where a column is read: its child when readable, else the child it replaces while it
// resilvers (if that one is readable), else nowhere (rebuilt from parity).
Leaf* ColumnSource(const LeafPtr& kid, const LeafPtr& old) {
  if (kid->readable()) return kid.get();
  if (old && kid->resilvering && old->readable()) return old.get();
  return nullptr;
}

bool HasData(const RaidzGeometry& g, const std::vector<uint32_t>& set) {
  return std::any_of(set.begin(), set.end(), [&](uint32_t c) { return !g.is_parity(c); });
}

// Rebuilds the columns of `set` in `work` (the others as read in `orig`) and checks the
// gathered data with `ok`. `data` gets the data when it matches.
bool Try(const RaidzGeometry& g, const std::vector<std::vector<uint8_t>>& orig,
         std::vector<std::vector<uint8_t>>& work, const std::vector<uint32_t>& set,
         std::span<uint8_t> data, const BlockVerifier& ok) {
  for (uint32_t c = 0; c < g.children; c++) work[c] = orig[c];
  if (!RaidzReconstruct(g, work, set)) return false;
  RaidzGather(g, work, data);
  return ok(data);
}

}  // namespace

// The raidz's data device: logical offsets in [kAllocStart, alloc_end), whole units.
class Vdev::RaidzDevice final : public bdev::BlockDevice {
 public:
  RaidzDevice(Vdev* vdev, std::string name, const bdev::Geometry& g)
      : BlockDevice(std::move(name), g), vdev_(vdev) {}

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override {
    return vdev_->RaidzRead(offset, buf);
  }
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions) override {
    return vdev_->RaidzWrite(offset, buf);
  }
  Status DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                  bdev::WriteOptions) override {
    // One stripe computation over the whole run, not one per piece.
    thread_local std::vector<uint8_t> gathered;
    gathered.clear();
    for (auto& p : pieces) gathered.insert(gathered.end(), p.begin(), p.end());
    return vdev_->RaidzWrite(offset, gathered);
  }
  Status DoFlush() override {
    std::vector<LeafPtr> kids, olds;
    vdev_->ColumnLeaves(&kids, &olds);
    std::vector<Status> st(kids.size());
    vdev_->fanout_->Run(kids.size(), [&](size_t i) {
      if (kids[i]->usable()) st[i] = kids[i]->device->Flush();
      if (olds[i] && olds[i]->usable() && !olds[i]->device->Flush().ok()) {
        olds[i]->state = LeafState::kFaulted;
      }
    });
    size_t ok = 0;
    Status first;
    for (size_t i = 0; i < kids.size(); i++) {
      if (!kids[i]->usable()) continue;
      if (st[i].ok()) {
        ok += !kids[i]->resilvering;
      } else {
        if (first.ok()) first = st[i];
        kids[i]->state = LeafState::kFaulted;
      }
    }
    if (ok < vdev_->raidz_.data_cols()) {
      return first.ok() ? Status::IoError(name() + ": too few children to flush") : first;
    }
    return Status::Ok();
  }
  void DoStartWriteback(uint64_t offset, uint64_t length) override {
    const auto& g = vdev_->raidz_;
    if (offset < kAllocStart) return;
    for (auto& k : vdev_->children()) {
      if (k->usable()) k->device->StartWriteback(g.ChildOffset(offset), g.ChildLength(length));
    }
  }

 private:
  Vdev* const vdev_;
};

bdev::BlockDevicePtr Vdev::MakeRaidzDevice() {
  bdev::Geometry g;
  g.size_bytes = alloc_end_;
  g.logical_block_size = raidz_.unit;
  g.physical_block_size = raidz_.unit;
  return std::make_shared<RaidzDevice>(this, TypeName() + "-" + std::to_string(id_), g);
}

namespace {
Status CheckRaidzRange(uint64_t offset, uint64_t length, const RaidzGeometry& g) {
  if (offset < kAllocStart || (offset - kAllocStart) % g.unit != 0 || length % g.unit != 0) {
    return Status::InvalidArgument("raidz: I/O outside the allocatable space or not whole units");
  }
  return Status::Ok();
}
}  // namespace

Status Vdev::RaidzWrite(uint64_t offset, std::span<const uint8_t> buf) {
  const RaidzGeometry& g = raidz_;
  VS_RETURN_IF_ERROR(CheckRaidzRange(offset, buf.size(), g));
  std::shared_lock l(children_mu_);
  const std::vector<LeafPtr>& kids = children_;
  thread_local std::vector<std::vector<uint8_t>> scratch;
  auto& cols = scratch;  // the helpers write from this thread's buffers
  RaidzSplit(g, buf, cols);
  cols[0].resize(cols[g.parity].size());
  if (g.parity > 1) cols[1].resize(cols[g.parity].size());
  RaidzParity(g, cols);
  const uint64_t coff = g.ChildOffset(offset);
  std::vector<Status> st(kids.size());
  fanout_->Run(kids.size(), [&](size_t i) {
    if (kids[i]->usable()) st[i] = kids[i]->device->Write(coff, cols[i]);
    // The child being replaced stays current until the replace is done (DropReplaced).
    const LeafPtr& old = kids[i]->replaces;
    if (old && old->usable() && !old->device->Write(coff, cols[i]).ok()) {
      old->state = LeafState::kFaulted;
    }
  });
  size_t ok = 0;
  Status first;
  for (size_t i = 0; i < kids.size(); i++) {
    if (!kids[i]->usable()) continue;
    if (st[i].ok()) {
      ok += !kids[i]->resilvering;
    } else if (first.ok()) {
      first = st[i];
    }
  }
  // Fewer than m readable columns written: the block could not be rebuilt.
  if (ok < g.data_cols()) {
    return first.ok() ? Status::IoError(device_->name() + ": too few children to write") : first;
  }
  for (size_t i = 0; i < kids.size(); i++) {
    if (kids[i]->usable() && !st[i].ok()) kids[i]->state = LeafState::kFaulted;
  }
  return Status::Ok();
}

Status Vdev::RaidzRead(uint64_t offset, std::span<uint8_t> buf) {
  const RaidzGeometry& g = raidz_;
  VS_RETURN_IF_ERROR(CheckRaidzRange(offset, buf.size(), g));
  std::vector<LeafPtr> kids, olds;
  ColumnLeaves(&kids, &olds);
  const uint64_t coff = g.ChildOffset(offset), clen = g.ChildLength(buf.size());
  thread_local std::vector<std::vector<uint8_t>> scratch;
  auto& cols = scratch;  // the helpers read into this thread's buffers
  cols.resize(g.children);
  for (auto& c : cols) c.resize(clen);
  std::vector<char> read_ok(g.children, 0);
  auto read = [&](uint32_t i) {
    Leaf* src = ColumnSource(kids[i], olds[i]);
    read_ok[i] = src && src->device->Read(coff, std::span<uint8_t>(cols[i].data(), clen)).ok();
  };
  // Small reads are issued in turn (a helper's wake-up costs more than the read).
  if (clen >= (64u << 10)) {
    fanout_->Run(g.data_cols(), [&](size_t i) { read(g.parity + static_cast<uint32_t>(i)); });
  } else {
    for (uint32_t i = g.parity; i < g.children; i++) read(i);
  }
  std::vector<uint32_t> bad;
  for (uint32_t i = g.parity; i < g.children; i++) {
    if (!read_ok[i]) bad.push_back(i);
  }
  if (!bad.empty()) {
    for (uint32_t i = 0; i < g.parity; i++) {
      read(i);
      if (!read_ok[i]) bad.push_back(i);
    }
    RaidzZeroPadding(g, cols);
    if (!RaidzReconstruct(g, cols, bad)) {
      return Status::IoError(device_->name() + ": more columns unreadable than parity at offset " +
                             std::to_string(offset));
    }
  }
  RaidzGather(g, cols, buf);
  return Status::Ok();
}

Status Vdev::RaidzReadVerified(uint64_t offset, std::span<uint8_t> buf, const BlockVerifier& ok,
                               HealCounts* heal, bool count) {
  const RaidzGeometry& g = raidz_;
  VS_RETURN_IF_ERROR(CheckRaidzRange(offset, buf.size(), g));
  std::vector<LeafPtr> kids, olds;
  ColumnLeaves(&kids, &olds);
  const uint64_t coff = g.ChildOffset(offset), clen = g.ChildLength(buf.size());
  std::vector<std::vector<uint8_t>> orig(g.children, std::vector<uint8_t>(clen));
  std::vector<char> read_ok(g.children, 0);
  Status io_error;
  auto read = [&](uint32_t i) {
    Leaf* src = ColumnSource(kids[i], olds[i]);
    if (!src) return;
    Status st = src->device->Read(coff, orig[i]);
    read_ok[i] = st.ok();
    if (!st.ok() && io_error.ok()) io_error = st;
  };
  for (uint32_t i = g.parity; i < g.children; i++) read(i);
  bool data_read = true;
  for (uint32_t i = g.parity; i < g.children; i++) data_read &= read_ok[i] != 0;
  bool mismatch = false;
  if (data_read) {
    RaidzGather(g, orig, buf);
    if (ok(buf)) return Status::Ok();
    mismatch = true;
  }
  for (uint32_t i = 0; i < g.parity; i++) read(i);
  RaidzZeroPadding(g, orig);
  std::vector<uint32_t> known;
  for (uint32_t i = 0; i < g.children; i++) {
    if (!read_ok[i]) known.push_back(i);
  }
  std::vector<std::vector<uint8_t>> work(g.children);
  for (const auto& set : Candidates(g.children, g.parity, known)) {
    // A set of parity columns alone gives the data as read, which did not match.
    if (!HasData(g, set)) continue;
    if (!Try(g, orig, work, set, buf, ok)) continue;
    // The stripe as it should be (from the verified data, so a column rebuilt from bad
    // parity cannot carry its padding along): count and rewrite the columns that differ.
    RaidzSplit(g, buf, work);
    RaidzParity(g, work);
    for (uint32_t i = 0; i < g.children; i++) {
      if (read_ok[i] && work[i] != orig[i] && count) {
        ColumnSource(kids[i], olds[i])->errors->checksum++;
      }
      if (!kids[i]->readable() || (read_ok[i] && work[i] == orig[i])) continue;
      if (heal) heal->bad_copies++;
      if (repair_ && kids[i]->device->Write(coff, work[i]).ok() && heal) {
        heal->repaired_bytes += clen;
      }
    }
    return Status::Ok();
  }
  if (heal) heal->bad_copies += known.size();
  if (mismatch || io_error.ok()) {
    return Status::Corruption("checksum mismatch at vdev " + std::to_string(id_) + " offset " +
                              std::to_string(offset) +
                              " with every combination of columns rebuilt from parity");
  }
  return io_error;
}

void Vdev::RaidzScrubRun(uint64_t offset, uint64_t length, std::vector<ScrubPiece>& pieces,
                         HealCounts* heal, std::vector<uint8_t>* first_good) {
  const RaidzGeometry& g = raidz_;
  if (!CheckRaidzRange(offset, length, g).ok()) {
    for (auto& p : pieces) p.bad = true;
    return;
  }
  std::vector<LeafPtr> kids, olds;
  ColumnLeaves(&kids, &olds);
  const uint64_t coff = g.ChildOffset(offset), clen = g.ChildLength(length);
  thread_local std::vector<std::vector<uint8_t>> scratch;
  auto& cols = scratch;
  cols.resize(g.children);
  for (auto& c : cols) c.resize(clen);
  std::vector<char> read_ok(g.children, 0);
  // A column whose child is being replaced is read from the old child, and trusted.
  std::vector<char> from_old(g.children, 0);
  for (uint32_t i = 0; i < g.children; i++) from_old[i] = olds[i] && olds[i]->readable();
  fanout_->Run(g.children, [&](size_t i) {
    Leaf* src = from_old[i] ? olds[i].get() : kids[i]->usable() ? kids[i].get() : nullptr;
    read_ok[i] = src && src->device->Read(coff, cols[i]).ok();
  });
  RaidzZeroPadding(g, cols);
  // Never trusted: a column that could not be read, and a resilvering child's.
  std::vector<uint32_t> known;
  for (uint32_t i = 0; i < g.children; i++) {
    if (!read_ok[i] || (kids[i]->resilvering && !from_old[i])) known.push_back(i);
  }
  const auto sets = Candidates(g.children, g.parity, known);
  std::vector<std::vector<uint8_t>> orig(g.children), work(g.children);
  std::vector<uint8_t> data;
  for (auto& piece : pieces) {
    const uint64_t prel = g.ChildLength(piece.rel), plen = g.ChildLength(piece.length);
    for (uint32_t i = 0; i < g.children; i++) {
      orig[i].assign(cols[i].begin() + static_cast<ptrdiff_t>(prel),
                     cols[i].begin() + static_cast<ptrdiff_t>(prel + plen));
    }
    data.resize(piece.length);
    bool found = false;
    for (size_t s = 0; s < sets.size() && !found; s++) {
      // The first set is the known one alone; the later ones add suspects, and a set that
      // adds only parity gives the same data as the first.
      if (s > 0 && !HasData(g, sets[s])) continue;
      found = Try(g, orig, work, sets[s], data, piece.ok);
    }
    if (!found) {
      piece.bad = true;
      continue;
    }
    RaidzSplit(g, data, work);
    RaidzParity(g, work);
    for (uint32_t i = 0; i < g.children; i++) {
      if (!kids[i]->usable()) continue;
      const bool same = read_ok[i] && work[i] == orig[i];
      // The old child's column was bad: counted against it (the new one gets the column).
      if (from_old[i] && read_ok[i] && !same) olds[i]->errors->checksum++;
      // A returning child's column may already be right (it missed only later txgs); a
      // replacing child's column was read from the old child, so it is written anyway.
      if (same && !from_old[i]) continue;
      const bool trusted = read_ok[i] && !kids[i]->resilvering;
      if (trusted) kids[i]->errors->checksum++;
      if (heal) heal->bad_copies++;
      if (kids[i]->device->Write(coff + prel, work[i]).ok() && heal) heal->repaired_bytes += plen;
    }
    if (first_good && first_good->empty()) *first_good = data;
  }
}

}  // namespace volstack::pool
