#include "pool/cache_fill.h"

#include <system_error>

namespace volstack::pool {

namespace {
// Below this the copies cost less than starting a thread.
constexpr uint64_t kThreadBytes = 1 << 20;
}  // namespace

std::unique_ptr<CacheFill> CacheFill::Start(BlockCache* cache, uint64_t txg,
                                            std::vector<BlockKey> forget,
                                            std::vector<Block> blocks) {
  uint64_t bytes = 0;
  for (const auto& [dva, data] : blocks) bytes += data.size();
  std::unique_ptr<CacheFill> fill(new CacheFill(cache, txg, std::move(forget), std::move(blocks)));
  if (bytes >= kThreadBytes) {
    try {
      fill->thread_ = std::jthread([f = fill.get()](std::stop_token stop) { f->Run(stop); });
      return fill;
    } catch (const std::system_error&) {
      // No thread to be had: copy here.
    }
  }
  fill->Run(std::stop_token{});
  return nullptr;
}

CacheFill::CacheFill(BlockCache* cache, uint64_t txg, std::vector<BlockKey> forget,
                     std::vector<Block> blocks)
    : cache_(cache), txg_(txg), forget_(std::move(forget)), blocks_(std::move(blocks)) {}

CacheFill::~CacheFill() { Finish(); }

std::vector<std::pair<std::shared_ptr<Volume>, std::map<uint64_t, Volume::Buf>>>
CacheFill::Finish() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
  return std::move(adopted_);
}

void CacheFill::Run(std::stop_token stop) {
  for (const BlockKey& key : forget_) cache_->Forget(key);
  for (const auto& [dva, data] : blocks_) {
    if (stop.stop_requested()) break;
    cache_->Insert(BlockKey{dva.vdev, static_cast<uint32_t>(data.size()), dva.offset, txg_},
                   data.data(), true);
  }
  done_.store(true, std::memory_order_release);
}

}  // namespace volstack::pool
