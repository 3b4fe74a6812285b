// lvm::Activations: what the LVM sessions of one stack share while its LVs are active.
//
//   - the live LvDevices, so a metadata commit remaps every activation of the LVs it changed
//     (RemapLiveLvs, lv_device.h);
//   - the mirror gate that keeps a pvmove copy and the LV's own writes apart (mirror_gate.h);
//   - the running pvmoves, one per VG, so another session can stop one or read its progress
//     (StopMove, LiveMoveProgress; pvmove.h);
//   - the commit lock: sessions commit one at a time, never on top of newer metadata.
//
// A stack owns one (stack::Stack) and passes it to every Lvm it opens; an Lvm made without
// one (tests, tools, the bench) shares Default(). Devices made from a session keep their
// Activations alive.
//
// Threads: every method is safe from any thread.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lvm/mirror_gate.h"

namespace volstack::lvm {

class LvDevice;
struct RunningMove;

class Activations {
 public:
  Activations();
  ~Activations();
  Activations(const Activations&) = delete;
  Activations& operator=(const Activations&) = delete;

  // The one an Lvm made without Activations uses. Its gate is MirrorGate::Global().
  static std::shared_ptr<Activations> Default();

  MirrorGate& gate() { return *gate_; }
  std::mutex& commit_mu() { return commit_mu_; }

  // Live LVs by VG UUID + LV UUID.
  void AddLive(const std::string& key, const std::shared_ptr<LvDevice>& device);
  std::vector<std::shared_ptr<LvDevice>> FindLive(const std::string& key);

  // Running moves by VG (pvmove.cc).
  struct Moves {
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::string, std::shared_ptr<RunningMove>> by_vg;  // GUARDED_BY(mu)
  };
  Moves& moves() { return moves_; }

 private:
  explicit Activations(MirrorGate* gate);

  std::unique_ptr<MirrorGate> own_gate_;
  MirrorGate* gate_;
  std::mutex commit_mu_;
  std::mutex live_mu_;
  std::multimap<std::string, std::weak_ptr<LvDevice>> live_;  // GUARDED_BY(live_mu_)
  Moves moves_;
};

}  // namespace volstack::lvm
