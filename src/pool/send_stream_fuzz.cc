// libFuzzer target for the send stream parser (send_stream_fuzz.h). Built only with
// -DVOLSTACK_FUZZ=ON and clang (see format_fuzz.cc for the commands):
//   build-fuzz/fuzz_pool_send_stream -max_total_time=300 corpus/
// The same entry runs in CI on mutated streams (send_test.cc, ParserFuzzSmoke).
#include "pool/send_stream_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return volstack::pool::FuzzSendStream(data, size);
}
