#include "lvm/activations.h"

#include "lvm/lv_device.h"

namespace volstack::lvm {

Activations::Activations() : own_gate_(std::make_unique<MirrorGate>()), gate_(own_gate_.get()) {}

Activations::Activations(MirrorGate* gate) : gate_(gate) {}

Activations::~Activations() = default;

std::shared_ptr<Activations> Activations::Default() {
  // Never destroyed: devices may outlive main().
  static auto* process = new std::shared_ptr<Activations>(new Activations(&MirrorGate::Global()));
  return *process;
}

void Activations::AddLive(const std::string& key, const std::shared_ptr<LvDevice>& device) {
  std::lock_guard lock(live_mu_);
  for (auto it = live_.begin(); it != live_.end();) {  // drop entries of destroyed devices
    it = it->second.expired() ? live_.erase(it) : std::next(it);
  }
  live_.emplace(key, device);
}

std::vector<std::shared_ptr<LvDevice>> Activations::FindLive(const std::string& key) {
  std::vector<std::shared_ptr<LvDevice>> out;
  std::lock_guard lock(live_mu_);
  auto [b, e] = live_.equal_range(key);
  for (auto it = b; it != e; ++it) {
    if (auto d = it->second.lock()) out.push_back(std::move(d));
  }
  return out;
}

}  // namespace volstack::lvm
