// DirtyReservation: room in the pool for the blocks one write (or zero) will dirty, taken
// before the request changes anything (PoolImpl::ReserveDirty: the space check and the
// reservation are one step under reserve_mu) and handed over block by block as those
// blocks become dirty data (Take). Concurrent writers count each other's reservations, so
// a request that found room cannot lose it to another halfway through and fail with part
// of it applied (PoolTest.WritersRacingForTheLastSpaceApplyWholeWritesOrNothing); what a
// request did not use (blocks already dirty, or a failure) is given back at its end.
#pragma once

#include <cstdint>

namespace volstack::pool {

class PoolImpl;
class Volume;

class DirtyReservation {
 public:
  DirtyReservation() = default;
  DirtyReservation(PoolImpl* pool, Volume* vol, uint64_t bytes);
  DirtyReservation(DirtyReservation&& other) noexcept;
  DirtyReservation& operator=(DirtyReservation&& other) noexcept;
  DirtyReservation(const DirtyReservation&) = delete;
  DirtyReservation& operator=(const DirtyReservation&) = delete;
  ~DirtyReservation() { GiveBack(); }

  // `bytes` of the reservation have become dirty data: the caller has added them to the
  // pool's and the volume's dirty counters already, so the space is counted throughout.
  void Take(uint64_t bytes);

 private:
  void GiveBack();

  PoolImpl* pool_ = nullptr;
  Volume* vol_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace volstack::pool
