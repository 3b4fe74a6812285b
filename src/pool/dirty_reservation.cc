#include "pool/dirty_reservation.h"

#include <utility>

#include "pool/pool_impl.h"

namespace volstack::pool {

DirtyReservation::DirtyReservation(PoolImpl* pool, Volume* vol, uint64_t bytes)
    : pool_(pool), vol_(vol), bytes_(bytes) {}

DirtyReservation::DirtyReservation(DirtyReservation&& other) noexcept
    : pool_(other.pool_), vol_(other.vol_), bytes_(std::exchange(other.bytes_, 0)) {}

DirtyReservation& DirtyReservation::operator=(DirtyReservation&& other) noexcept {
  if (this != &other) {
    GiveBack();
    pool_ = other.pool_;
    vol_ = other.vol_;
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DirtyReservation::Take(uint64_t bytes) {
  VS_CHECK_OP(bytes, <=, bytes_);
  bytes_ -= bytes;
  pool_->reserved_bytes -= bytes;
  vol_->reserved -= bytes;
}

void DirtyReservation::GiveBack() {
  if (bytes_ > 0) Take(bytes_);
}

}  // namespace volstack::pool
