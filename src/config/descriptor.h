// Which configured limit applies to a request descriptor, and under which counter.
//
//   std::vector<DescriptorEntry> d = {{"path", "/v1/pay"}, {"method", "POST"}};
//   Result<MatchResult> m = Match(*config, "api", d);
//   if (m && m->limit) store.Decide(m->counter_key, m->limit->spec, ...);
//
// Pure functions of the config and the request: no I/O, no clock; safe from any thread.
#ifndef SLUICE_CONFIG_DESCRIPTOR_H_
#define SLUICE_CONFIG_DESCRIPTOR_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "config/descriptor_entry.h"
#include "config/limit_unit.h"
#include "sluice/status.h"

namespace sluice::server {

// Envoy's per-descriptor `limit` override (RateLimitDescriptor.RateLimitOverride): the caller
// sets the rate itself. As in ratelimit, it bypasses the descriptor tree.
struct LimitOverride {
  int64_t requests_per_unit = 0;
  LimitPeriod period = LimitPeriod::Of(Unit::kSecond);
};

// An entry that says something about the request rather than who sends it -- a rule's
// `timezone_from`, the domain's `priority_key`: removed from the descriptor before matching and
// keying (Domain::attribute_keys), so that it neither changes which rule matches nor makes a new
// counter, and handed to the rule that matched. A copy: the request's strings may not outlive
// the match.
struct RequestAttribute {
  std::string key;
  std::string value;
};

struct MatchResult {
  // The limit that applies; null when none does (the descriptor is then allowed, as in
  // ratelimit). Points into the Config (keep it alive) or into `owned` for an override.
  const Limit* limit = nullptr;
  // The store key of this request's counter: limit->id, '#', then every request entry as
  // key=value, '|'-separated and escaped. The actual values are in it, so a key-only or
  // pattern rule counts each distinct value separately. Empty when limit is null.
  std::string counter_key;
  // The plan whose rules matched; empty when the domain's own descriptors did.
  std::string plan;
  std::shared_ptr<const Limit> owned;
  // The entries the domain strips (RequestAttribute), in the request's order; a key may repeat.
  std::vector<RequestAttribute> attributes;
};

// `entries` without those whose key is one of domain.attribute_keys, which are appended to
// `attributes`. Match calls it; exposed for its tests.
std::vector<DescriptorEntry> StripAttributes(const Domain& domain,
                                             std::span<const DescriptorEntry> entries,
                                             std::vector<RequestAttribute>& attributes);

// The value of the first attribute named `key`; null when the request sent none.
const std::string* FindAttribute(std::span<const RequestAttribute> attributes,
                                 std::string_view key);

// Looks the descriptor up in `domain`. With plans, a descriptor holding the plan key is first
// matched against its identity's plan (or "default"), and against the domain's descriptors
// only if the plan has no rule for it. An unknown domain is an error (the caller's request is
// bad); no matching rule is a null limit, not an error. An override must have a positive
// requests_per_unit (0 blocks, as in ratelimit).
Result<MatchResult> Match(const Config& config, std::string_view domain,
                          std::span<const DescriptorEntry> entries,
                          const LimitOverride* override = nullptr);
// The same in a domain already found (Config::FindDomain), for a caller that has looked it up
// for other reasons: one lookup per request.
Result<MatchResult> Match(const Domain& domain, std::span<const DescriptorEntry> entries,
                          const LimitOverride* override = nullptr);

// ratelimit's `replaces`: of the limits one request matched (null entries allowed), which ones
// to drop because another matched limit names them in its `replaces`. result[i] is true for a
// dropped limit; the dropped limit is neither checked nor counted.
std::vector<bool> ReplacedLimits(std::span<const Limit* const> limits);

}  // namespace sluice::server

#endif  // SLUICE_CONFIG_DESCRIPTOR_H_
