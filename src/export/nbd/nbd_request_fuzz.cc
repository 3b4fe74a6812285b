// libFuzzer target for the NBD server's parsers of untrusted bytes (nbd_request_fuzz.h).
// Built only with -DVOLSTACK_FUZZ=ON and clang:
//   cmake -S . -B build-fuzz -DVOLSTACK_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
//     -DCMAKE_C_COMPILER=clang && make -C build-fuzz fuzz_export_nbd_request
//   build-fuzz/fuzz_export_nbd_request -max_total_time=300 corpus/
// The same entry runs in CI on deterministic inputs (fuzz_smoke_test.cc).
#include "export/nbd/nbd_request_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return volstack::exportfs::nbd::FuzzNbdRequest(data, size);
}
