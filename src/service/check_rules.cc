#include "service/check_rules.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::server {
namespace {

enum class Rule {
  // What makes a request one.
  kDomainEmpty,
  kNoDescriptors,
  kNoEntries,
  kKeyEmpty,
  kValueEmpty,
  // The domain.
  kUnknownDomain,
  // The bounds.
  kTooManyDescriptors,
  kHitsOutOfRange,
  kTooManyEntries,
  kDescriptorHitsOutOfRange,
  kKeyTooLong,
  kValueTooLong,
};

// The first rule a request breaks, where, and by how much.
struct Broken {
  Rule rule;
  size_t descriptor = 0;
  size_t entry = 0;
  size_t found = 0;   // the count or the length (sizes)
  int64_t bound = 0;  // the CheckLimits bound it is over
};

// The words each caller's users have always seen. HTTP names the JSON field and says what is
// wrong with it after a colon; Envoy's requests are named by their proto fields for what makes
// a request one, and in the service's own words for the bounds; a direct caller gets those.
std::string Describe(const Broken& b, Caller caller, std::string_view domain) {
  const bool http = caller == Caller::kHttpJson;
  const bool envoy = caller == Caller::kEnvoy;
  const std::string descriptor = "descriptors[" + std::to_string(b.descriptor) + "]";
  const std::string entry = descriptor + ".entries[" + std::to_string(b.entry) + "]";
  const std::string plain = "descriptor " + std::to_string(b.descriptor) + ": ";
  const std::string found = std::to_string(b.found);
  const std::string bound = std::to_string(b.bound);
  switch (b.rule) {
    case Rule::kDomainEmpty:
      return http ? "domain: must not be empty"
                  : (envoy ? "domain must not be empty" : "domain is required");
    case Rule::kNoDescriptors:
      return http ? "descriptors: must not be empty" : "at least one descriptor is required";
    case Rule::kNoEntries:
      if (http) return descriptor + ".entries: must not be empty";
      return envoy ? descriptor + ": a descriptor needs at least one entry"
                   : plain + "entries must not be empty";
    case Rule::kKeyEmpty:
      if (http) return entry + ".key: must not be empty";
      return envoy ? entry + ".key must not be empty" : plain + "an entry has an empty key";
    case Rule::kValueEmpty:  // only HTTP refuses an empty value
      return http ? entry + ".value: must not be empty" : entry + ".value must not be empty";
    case Rule::kUnknownDomain:
      return "unknown domain '" + std::string(domain) + "'";
    case Rule::kTooManyDescriptors:
      return http ? "descriptors: " + found + " descriptors, over the limit of " + bound
                  : "too many descriptors: " + found + " (at most " + bound + ")";
    case Rule::kHitsOutOfRange:
      return http ? "hits: must be between 0 and " + bound : "hits must be 0.." + bound;
    case Rule::kTooManyEntries:
      return http ? descriptor + ".entries: " + found + " entries, over the limit of " + bound
                  : plain + "too many entries (at most " + bound + ")";
    case Rule::kDescriptorHitsOutOfRange:
      return http ? descriptor + ".hits: must be between 0 and " + bound
                  : plain + "hits must be 0.." + bound;
    case Rule::kKeyTooLong:
      return http ? entry + ".key: " + found + " bytes, over the " + bound + "-byte limit"
                  : plain + "a key is longer than " + bound + " bytes";
    case Rule::kValueTooLong:
      return http ? entry + ".value: " + found + " bytes, over the " + bound + "-byte limit"
                  : plain + "a value is longer than " + bound + " bytes";
  }
  return "invalid request";
}

std::unexpected<Error> Refuse(const Broken& broken, const CheckRequest& request) {
  return MakeError(Describe(broken, request.caller, request.domain));
}

// What makes a request one: a domain, descriptors, entries, keys (and values, for HTTP).
std::optional<Broken> FindMissing(const CheckRequest& request) {
  if (request.domain.empty()) return Broken{Rule::kDomainEmpty};
  if (request.descriptors.empty()) return Broken{Rule::kNoDescriptors};
  const bool empty_values = EmptyValuesAllowed(request.caller);
  for (size_t i = 0; i < request.descriptors.size(); ++i) {
    const CheckDescriptor& d = request.descriptors[i];
    if (d.entries.empty()) return Broken{Rule::kNoEntries, i};
    for (size_t j = 0; j < d.entries.size(); ++j) {
      if (d.entries[j].first.empty()) return Broken{Rule::kKeyEmpty, i, j};
      if (!empty_values && d.entries[j].second.empty()) return Broken{Rule::kValueEmpty, i, j};
    }
  }
  return std::nullopt;
}

// The bounds: counts, sizes, and hits from 0 to max_hits.
std::optional<Broken> FindOversized(const CheckRequest& request, const CheckLimits& limits) {
  const auto bad_hits = [&](int64_t hits) { return hits < 0 || hits > limits.max_hits; };
  const auto as_bound = [](size_t bound) { return static_cast<int64_t>(bound); };
  if (request.descriptors.size() > limits.max_descriptors) {
    return Broken{Rule::kTooManyDescriptors, 0, 0, request.descriptors.size(),
                  as_bound(limits.max_descriptors)};
  }
  if (bad_hits(request.hits)) return Broken{Rule::kHitsOutOfRange, 0, 0, 0, limits.max_hits};
  for (size_t i = 0; i < request.descriptors.size(); ++i) {
    const CheckDescriptor& d = request.descriptors[i];
    if (d.entries.size() > limits.max_entries) {
      return Broken{Rule::kTooManyEntries, i, 0, d.entries.size(), as_bound(limits.max_entries)};
    }
    if (d.hits && bad_hits(*d.hits)) {
      return Broken{Rule::kDescriptorHitsOutOfRange, i, 0, 0, limits.max_hits};
    }
    for (size_t j = 0; j < d.entries.size(); ++j) {
      const auto& [key, value] = d.entries[j];
      if (key.size() > limits.max_key_bytes) {
        return Broken{Rule::kKeyTooLong, i, j, key.size(), as_bound(limits.max_key_bytes)};
      }
      if (value.size() > limits.max_value_bytes) {
        return Broken{Rule::kValueTooLong, i, j, value.size(), as_bound(limits.max_value_bytes)};
      }
    }
  }
  return std::nullopt;
}

}  // namespace

UnknownDomain UnknownDomainFor(Caller caller) {
  return caller == Caller::kEnvoy ? UnknownDomain::kLimitNothing : UnknownDomain::kError;
}

bool EmptyValuesAllowed(Caller caller) { return caller != Caller::kHttpJson; }

Result<Admission> AdmitCheck(const CheckRequest& request, const Config& config,
                             const CheckLimits& limits) {
  if (const auto broken = FindMissing(request)) return Refuse(*broken, request);
  if (config.FindDomain(request.domain) == nullptr) {
    if (UnknownDomainFor(request.caller) == UnknownDomain::kLimitNothing) {
      return Admission::kLimitNothing;
    }
    return Refuse(Broken{Rule::kUnknownDomain}, request);
  }
  if (const auto broken = FindOversized(request, limits)) return Refuse(*broken, request);
  return Admission::kCheck;
}

Result<void> ValidateCheck(const CheckRequest& request, const CheckLimits& limits) {
  if (auto broken = FindMissing(request)) return Refuse(*broken, request);
  if (auto broken = FindOversized(request, limits)) return Refuse(*broken, request);
  return {};
}

CheckResponse LimitNothing(const CheckRequest& request) {
  CheckResponse response;
  response.overall = Code::kOk;
  response.statuses.resize(request.descriptors.size());
  return response;
}

}  // namespace sluice::server
