// libFuzzer target for the LVM2 decoders: the metadata text parser, VG import, the label
// header, the PV header, the mda header, a metadata area and a whole PV (metadata_fuzz.h
// says which first byte picks which). Built only with -DVOLSTACK_FUZZ=ON and clang:
//   cmake -S . -B build-fuzz -DVOLSTACK_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
//     -DCMAKE_C_COMPILER=clang && make -C build-fuzz fuzz_lvm_metadata
//   build-fuzz/fuzz_lvm_metadata -max_total_time=300 corpus/
// The same entry runs in CI on deterministic inputs (fuzz_smoke_test.cc).
#include "lvm/metadata_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return volstack::lvm::FuzzLvmMetadata(data, size);
}
