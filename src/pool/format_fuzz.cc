// libFuzzer target for every pool decoder of untrusted bytes (format_fuzz.h says which first
// byte picks which). Built only with -DVOLSTACK_FUZZ=ON and clang:
//   cmake -S . -B build-fuzz -DVOLSTACK_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
//     -DCMAKE_C_COMPILER=clang && make -C build-fuzz fuzz_pool_format
//   build-fuzz/fuzz_pool_format -max_total_time=300 corpus/
// The same entry runs in CI on deterministic inputs (fuzz_smoke_test.cc).
#include "pool/format_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return volstack::pool::FuzzPoolFormat(data, size);
}
