// The gRPC front end's default message cap: the encoded size of the largest ShouldRateLimit
// request the service's bounds (kCheckLimits) let it check, and no more. No gRPC or protobuf
// header: the arithmetic follows the wire format of RateLimitRequest (proto/), and
// tests/grpc/grpc_limits_test.cc checks it against protobuf's own encoder.
#ifndef SLUICE_GRPC_GRPC_LIMITS_H_
#define SLUICE_GRPC_GRPC_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "service/check.h"

namespace sluice::server {

// The longest domain a config can hold (docs/configuration.md, "Limits": names are at most 256
// bytes). A longer one is a domain sluiced does not have, which Envoy gets answered without a
// check, so it cannot make a larger request worth reading.
inline constexpr size_t kMaxConfiguredDomainBytes = 256;

namespace wire {
// Bytes of a protobuf varint holding v.
constexpr size_t VarintBytes(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}
// A length-delimited field (string, bytes, message) of `len` bytes: a 1-byte tag (field numbers
// below 16), the length as a varint, the bytes.
constexpr size_t LenField(size_t len) { return 1 + VarintBytes(len) + len; }
// A varint field holding v.
constexpr size_t VarintField(uint64_t v) { return 1 + VarintBytes(v); }
}  // namespace wire

// With kCheckLimits (64 descriptors of 16 entries, keys of 256 bytes, values of 1024, hits up
// to 10^9, which takes a 5-byte varint as uint32's largest does):
//   entry       = key LenField(256) 259 + value LenField(1024) 1027          = 1286 bytes
//   descriptor  = 16 x LenField(1286) 1289                                   = 20624
//               + limit LenField(requests_per_unit 6 + unit 2) 10
//               + hits_addend LenField(UInt64Value{value 10^9} 6) 8           = 20642
//   request     = 64 x LenField(20642) 20646                                 = 1321344
//               + domain LenField(256) 259 + hits_addend VarintField(10^9) 6 = 1321609 bytes.
// A value longer than max_value_bytes is hashed, not refused (grpc_translate.h): Envoy fills
// values from the client's path and headers. It needs no room of its own: the cap bounds the
// whole request, and a request with fewer or shorter entries leaves the rest of the 1.26 MiB
// to long values (twenty copies of a path as long as Envoy's default 60 KiB header limit
// allows). Only a request longer than the largest the service could count is refused.
constexpr size_t MaxCheckRequestBytes(const CheckLimits& limits) {
  using wire::LenField;
  using wire::VarintField;
  const auto hits = static_cast<uint64_t>(limits.max_hits);
  const size_t entry = LenField(limits.max_key_bytes) + LenField(limits.max_value_bytes);
  const size_t override_limit = VarintField(UINT32_MAX) + VarintField(7);  // rate, unit (<128)
  const size_t descriptor =
      limits.max_entries * LenField(entry) + LenField(override_limit) + LenField(VarintField(hits));
  return limits.max_descriptors * LenField(descriptor) + LenField(kMaxConfiguredDomainBytes) +
         VarintField(hits);
}
inline constexpr size_t kMaxCheckRequestBytes = MaxCheckRequestBytes(kCheckLimits);
static_assert(kMaxCheckRequestBytes == 1'321'609, "the arithmetic above no longer holds");

}  // namespace sluice::server

#endif  // SLUICE_GRPC_GRPC_LIMITS_H_
