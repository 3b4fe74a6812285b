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
      fill->thread_ = std::thread([f = fill.get()] { f->Run(/*threaded=*/true); });
      return fill;
    } catch (const std::system_error&) {
      // No thread to be had: copy here.
    }
  }
  fill->Run(/*threaded=*/false);
  return nullptr;
}

CacheFill::CacheFill(BlockCache* cache, uint64_t txg, std::vector<BlockKey> forget,
                     std::vector<Block> blocks)
    : cache_(cache), txg_(txg), forget_(std::move(forget)), blocks_(std::move(blocks)) {}

CacheFill::~CacheFill() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

const uint8_t* CacheFill::Stop() {
  stop_.store(true);
  return claimed_.load();
}

void CacheFill::Run(bool threaded) {
  for (const BlockKey& key : forget_) cache_->Forget(key);
  for (const auto& [dva, data] : blocks_) {
    if (threaded) {
      claimed_.store(data.data());
      if (stop_.load()) break;
    }
    cache_->Insert(BlockKey{dva.vdev, static_cast<uint32_t>(data.size()), dva.offset, txg_},
                   data.data(), true);
  }
  claimed_.store(nullptr);
  std::vector<BlockKey>().swap(forget_);
  std::vector<Block>().swap(blocks_);
  done_.store(true, std::memory_order_release);
}

}  // namespace volstack::pool
