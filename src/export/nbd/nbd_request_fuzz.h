// The fuzz entry for the NBD server's parsers of untrusted bytes: the transmission request
// header, and the bodies of NBD_OPT_INFO/GO and NBD_OPT_{LIST,SET}_META_CONTEXT. None may
// crash, read out of bounds or accept a body whose lengths do not add up (the entry aborts
// then, so libFuzzer keeps the input). A header so that the libFuzzer target
// (nbd_request_fuzz.cc) and the CI smoke test (fuzz_smoke_test.cc) run the same code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "export/nbd/nbd_protocol.h"

namespace volstack::exportfs::nbd {

inline int FuzzNbdRequest(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  std::span<const uint8_t> body(data + 1, size - 1);
  switch (selector % 3) {
    case 0:
      if (body.size() >= kRequestSize) {
        auto r = DecodeRequest(body.first<kRequestSize>());
        // Re-encoding what decoded must give the same bytes.
        if (r.ok()) {
          uint8_t out[kRequestSize];
          EncodeRequest(std::span<uint8_t, kRequestSize>(out), *r);
          for (size_t i = 0; i < kRequestSize; i++) {
            if (out[i] != body[i]) std::abort();
          }
        }
      }
      break;
    case 1: {
      auto r = DecodeInfoRequest(body);
      if (r.ok() && 4 + r->name.size() + 2 + 2 * r->items.size() != body.size()) std::abort();
      break;
    }
    default: {
      auto r = DecodeMetaContextRequest(body);
      if (r.ok()) {
        size_t n = 4 + r->name.size() + 4;
        for (const auto& q : r->queries) n += 4 + q.size();
        if (n != body.size()) std::abort();
      }
    }
  }
  return 0;
}

}  // namespace volstack::exportfs::nbd
