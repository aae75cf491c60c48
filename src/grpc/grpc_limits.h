// The gRPC front end's default message cap, and the encoded size of the largest ShouldRateLimit
// request the service's bounds (kCheckLimits) reach, which the cap must hold. No gRPC or protobuf
// header: the arithmetic follows the wire format of RateLimitRequest (proto/), and
// tests/grpc/grpc_limits_test.cc checks it against protobuf's own encoder.
#ifndef SLUICE_GRPC_GRPC_LIMITS_H_
#define SLUICE_GRPC_GRPC_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "service/check.h"

namespace sluice::server {

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

// The encoded size of the largest request that reaches the service's bounds (CheckLimits) in
// both directions at once: max_descriptors descriptors of max_entries one-byte keys and values
// (every count at its bound), plus one more descriptor of max_entries entries with max_key_bytes
// keys and max_value_bytes values (every size at its bound); every descriptor with a `limit`
// override and the largest hits_addend, a domain as long as a config may have and the largest
// request hits_addend. With kCheckLimits (1024, 64, 4096, 1024):
//   small descriptor = 64 x LenField(key 3 + value 3) 8 = 512 + limit LenField(6 + 2) 10
//                    + hits_addend LenField(UInt64Value{2^64-1} 11) 13              = 535 bytes
//   large descriptor = 64 x LenField(LenField(4096) 4099 + LenField(1024) 1027) 5129 = 328256
//                    + 10 + 13                                                       = 328279
//   request          = 1024 x LenField(535) 538 + LenField(328279) 328283
//                    + domain LenField(256) 259 + hits_addend VarintField(2^32-1) 6 = 879460.
constexpr size_t LargestBoundedRequestBytes(const CheckLimits& limits) {
  using wire::LenField;
  using wire::VarintField;
  const size_t override_limit = VarintField(UINT32_MAX) + VarintField(7);  // rate, unit (<128)
  const size_t extras = LenField(override_limit) + LenField(VarintField(UINT64_MAX));
  const size_t small = limits.max_entries * LenField(LenField(1) + LenField(1)) + extras;
  const size_t large = limits.max_entries * LenField(LenField(limits.max_key_bytes) +
                                                     LenField(limits.max_value_bytes)) +
                       extras;
  return limits.max_descriptors * LenField(small) + LenField(large) +
         LenField(kMaxConfiguredDomainBytes) + VarintField(UINT32_MAX);
}
static_assert(LargestBoundedRequestBytes(kCheckLimits) == 879'460,
              "the arithmetic above no longer holds");

// The default message cap: 4 MiB, gRPC's own default receive limit, which envoyproxy/ratelimit
// serves with, so that every request it answers is answered here too. It holds the largest
// bounded request above with room to spare: values longer than max_value_bytes are hashed and
// descriptors past the bounds answered unchecked (service/check_rules.h), so a larger request is
// still answered, not refused, up to the cap. It bounds the memory one call can take.
inline constexpr size_t kMaxCheckRequestBytes = size_t{4} << 20;
static_assert(LargestBoundedRequestBytes(kCheckLimits) <= kMaxCheckRequestBytes);

}  // namespace sluice::server

#endif  // SLUICE_GRPC_GRPC_LIMITS_H_
