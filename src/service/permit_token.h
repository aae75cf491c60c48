// The permit POST /v1/acquire hands out, opaque to the client: what a release or a renew on any
// node needs to find the slots it holds. It carries a 128-bit random id (the id every slot is
// held under in its store, so nobody who has not seen the permit can release or renew it) and
// the store key of each slot, whose prefix up to '#' is its pool's id (LimiterSet::PoolStoreId).
// Nothing else: no limit numbers (a reload may change them) and no expiry (the store keeps it).
//
//   PermitIds ids;                                // one per service: the kernel's CSPRNG
//   PermitToken t{*ids.Next(), {"api|k|@concurrency#k=v"}};
//   std::string text = EncodePermit(t);           // base64url, at most kMaxPermitBytes
//   Result<PermitToken> back = DecodePermit(text);  // error: malformed (400)
#ifndef SLUICE_SERVICE_PERMIT_TOKEN_H_
#define SLUICE_SERVICE_PERMIT_TOKEN_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/status.h"

namespace sluice::server {

// Slots (descriptors with a concurrency limit) one acquire may take; more is refused (400).
inline constexpr size_t kMaxPermitSlots = 8;
// A slot's store key is bounded to this (BoundedCounterKey: the identity's SHA-256 past it).
inline constexpr size_t kMaxPermitKeyBytes = 512;
// The longest permit text: kMaxPermitSlots keys of kMaxPermitKeyBytes, in base64url.
inline constexpr size_t kMaxPermitBytes =
    (1 + 16 + 1 + kMaxPermitSlots * (2 + kMaxPermitKeyBytes) + 2) / 3 * 4;

struct PermitToken {
  std::array<uint8_t, 16> random{};
  std::vector<std::string> keys;  // one per slot: "<pool id>#<identity>"

  // The id each slot is held under in its store: the random bits in lower-case hex.
  std::string Id() const;
};

std::string EncodePermit(const PermitToken& token);
// Refuses anything a server cannot have written: another alphabet, padding, a wrong version,
// lengths that do not add up, no slots (an acquire without one answers no permit), more slots or
// longer keys than the bounds, a key without '#'.
Result<PermitToken> DecodePermit(std::string_view text);

// The pool id of a slot key: what precedes its first '#'.
std::string_view PoolIdOf(std::string_view key);

// Permit ids from the kernel's CSPRNG (getrandom(2)): no user-space state to seed or share, so
// each service owns one and two services never draw the same sequence.
class PermitIds {
 public:
  Result<std::array<uint8_t, 16>> Next() const;
};

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_PERMIT_TOKEN_H_
