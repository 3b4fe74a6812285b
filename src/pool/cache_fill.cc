#include "pool/cache_fill.h"

#include <system_error>

namespace volstack::pool {

namespace {
// Below this the copies cost less than starting a thread.
constexpr uint64_t kThreadBytes = 1 << 20;
}  // namespace

std::unique_ptr<CacheFill> CacheFill::Start(BlockCache* cache, CacheRefill* refill,
                                            std::vector<BlockKey> forget,
                                            std::vector<Block> blocks) {
  uint64_t bytes = 0;
  for (const Block& b : blocks) bytes += b.data.size();
  std::unique_ptr<CacheFill> fill(
      new CacheFill(cache, refill, std::move(forget), std::move(blocks)));
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

CacheFill::CacheFill(BlockCache* cache, CacheRefill* refill, std::vector<BlockKey> forget,
                     std::vector<Block> blocks)
    : cache_(cache), refill_(refill), forget_(std::move(forget)), blocks_(std::move(blocks)) {}

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
  if (refill_ != nullptr) refill_->Forget(forget_);
  size_t copied = 0;
  for (; copied < blocks_.size(); copied++) {
    const Block& b = blocks_[copied];
    if (threaded) {
      claimed_.store(b.data.data());
      if (stop_.load()) break;
    }
    cache_->Insert(b.block.key, b.data.data(), true);
  }
  claimed_.store(nullptr);
  if (refill_ != nullptr && copied < blocks_.size()) {
    std::vector<WrittenBlock> left;
    left.reserve(blocks_.size() - copied);
    for (size_t i = copied; i < blocks_.size(); i++) left.push_back(blocks_[i].block);
    refill_->Add(left);
  }
  std::vector<BlockKey>().swap(forget_);
  std::vector<Block>().swap(blocks_);
  done_.store(true, std::memory_order_release);
}

}  // namespace volstack::pool
