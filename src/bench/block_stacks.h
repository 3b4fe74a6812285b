// The bench's stacks built in this process as BlockDevices, for the block workload: the same
// layering as the kernel stacks (stack_builder.h) minus the kernel (no devfs, loop or XFS).
// Each stack is a function returning the top BlockDevicePtr; the device keeps the layers
// below it alive, and what the function created on disk is undone by the Teardown.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "bench/teardown.h"

namespace volstack::bench {

struct BlockStackParams {
  std::string dir;          // a scratch directory for this build's files
  uint64_t size_bytes = 0;  // the size of the top device
  Teardown* teardown = nullptr;
};

struct BlockStack {
  std::string name;
  std::string description;
  // OK when this build can make the stack in-process; otherwise why not.
  Status available;
  std::function<Result<bdev::BlockDevicePtr>(const BlockStackParams&)> build;
};

// Every stack name of AllStackNames(), in the same order; the ones that need the kernel
// (a loop device in the middle, a loop sector size) are unavailable here.
std::vector<BlockStack> AllBlockStacks();

}  // namespace volstack::bench
