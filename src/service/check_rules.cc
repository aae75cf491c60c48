#include "service/check_rules.h"

#include <openssl/sha.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/hex.h"

namespace sluice::server {
namespace {

enum class Rule {
  // What makes a request one.
  kDomainEmpty,
  kNoDescriptors,
  kNoEntries,
  kKeyEmpty,
  kValueEmpty,
  kNegativeHits,
  kNegativeDescriptorHits,
  // The domain.
  kUnknownDomain,
};

// The first rule a request breaks, and where.
struct Broken {
  Rule rule;
  size_t descriptor = 0;
  size_t entry = 0;
};

// The words each caller's users have always seen. HTTP names the JSON field and says what is
// wrong with it after a colon; Envoy's requests are named by their proto fields; a direct
// caller gets the service's own words.
std::string Describe(const Broken& b, Caller caller, std::string_view domain) {
  const bool http = caller == Caller::kHttpJson;
  const bool envoy = caller == Caller::kEnvoy;
  const std::string descriptor = "descriptors[" + std::to_string(b.descriptor) + "]";
  const std::string entry = descriptor + ".entries[" + std::to_string(b.entry) + "]";
  const std::string plain = "descriptor " + std::to_string(b.descriptor) + ": ";
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
    case Rule::kNegativeHits:  // Envoy's hits are unsigned: only JSON and direct callers
      return http ? "hits: must not be negative" : "hits must not be negative";
    case Rule::kNegativeDescriptorHits:
      return http ? descriptor + ".hits: must not be negative"
                  : plain + "hits must not be negative";
    case Rule::kUnknownDomain:
      return "unknown domain '" + std::string(domain) + "'";
  }
  return "invalid request";
}

std::unexpected<Error> Refuse(const Broken& broken, const CheckRequest& request) {
  return MakeError(Describe(broken, request.caller, request.domain));
}

// What makes a request one: a domain, descriptors, entries, keys (and values, for HTTP), hits
// not negative. Every descriptor is looked at, past max_descriptors too: a malformed request is
// malformed wherever the fault is (the front ends' size caps bound the walk).
std::optional<Broken> FindMissing(const CheckRequest& request) {
  if (request.domain.empty()) return Broken{Rule::kDomainEmpty};
  if (request.descriptors.empty()) return Broken{Rule::kNoDescriptors};
  if (request.hits < 0) return Broken{Rule::kNegativeHits};
  const bool empty_values = EmptyValuesAllowed(request.caller);
  for (size_t i = 0; i < request.descriptors.size(); ++i) {
    const CheckDescriptor& d = request.descriptors[i];
    if (d.entries.empty()) return Broken{Rule::kNoEntries, i};
    for (size_t j = 0; j < d.entries.size(); ++j) {
      if (d.entries[j].first.empty()) return Broken{Rule::kKeyEmpty, i, j};
      if (!empty_values && d.entries[j].second.empty()) return Broken{Rule::kValueEmpty, i, j};
    }
    if (d.hits && *d.hits < 0) return Broken{Rule::kNegativeDescriptorHits, i};
  }
  return std::nullopt;
}

std::string Sha256Tagged(std::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  std::string out = kLongValuePrefix;
  out.reserve(out.size() + 2 * SHA256_DIGEST_LENGTH);
  for (const unsigned char byte : digest) util::AppendHexByte(out, byte, util::HexCase::kLower);
  return out;
}

}  // namespace

UnknownDomain UnknownDomainFor(Caller caller) {
  return caller == Caller::kEnvoy ? UnknownDomain::kLimitNothing : UnknownDomain::kError;
}

bool EmptyValuesAllowed(Caller caller) { return caller != Caller::kHttpJson; }

Result<Admission> AdmitCheck(const CheckRequest& request, const Config& config) {
  return AdmitCheck(request, config.FindDomain(request.domain));
}

Result<Admission> AdmitCheck(const CheckRequest& request, const Domain* domain) {
  if (const auto broken = FindMissing(request)) return Refuse(*broken, request);
  if (domain == nullptr) {
    if (UnknownDomainFor(request.caller) == UnknownDomain::kLimitNothing) {
      return Admission::kLimitNothing;
    }
    return Refuse(Broken{Rule::kUnknownDomain}, request);
  }
  return Admission::kCheck;
}

Result<void> ValidateCheck(const CheckRequest& request) {
  if (auto broken = FindMissing(request)) return Refuse(*broken, request);
  return {};
}

Unchecked UncheckedReason(const CheckRequest& request, size_t index, const CheckLimits& limits) {
  if (index >= limits.max_descriptors) return Unchecked::kPastMaxDescriptors;
  const CheckDescriptor& d = request.descriptors[index];
  if (d.entries.size() > limits.max_entries) return Unchecked::kTooManyEntries;
  for (const auto& [key, value] : d.entries) {
    if (key.size() > limits.max_key_bytes) return Unchecked::kKeyTooLong;
  }
  return Unchecked::kNo;
}

std::string_view UncheckedName(Unchecked reason) {
  switch (reason) {
    case Unchecked::kNo:
      return "none";
    case Unchecked::kPastMaxDescriptors:
      return "descriptors";
    case Unchecked::kTooManyEntries:
      return "entries";
    case Unchecked::kKeyTooLong:
      return "key";
    case Unchecked::kConcurrency:
      return "concurrency";
  }
  return "none";
}

std::string_view CountedValue(std::string_view value, std::string& digest,
                              const CheckLimits& limits) {
  if (value.size() <= limits.max_value_bytes) return value;
  digest = Sha256Tagged(value);
  return digest;
}

std::string BoundedCounterKey(std::string counter_key, const CheckLimits& limits) {
  if (counter_key.size() <= limits.max_counter_key_bytes) return counter_key;
  const size_t hash = counter_key.find('#');
  const size_t identity = hash == std::string::npos ? 0 : hash + 1;
  std::string bounded = counter_key.substr(0, identity);
  bounded += Sha256Tagged(std::string_view(counter_key).substr(identity));
  return bounded;
}

CheckResponse LimitNothing(const CheckRequest& request) {
  CheckResponse response;
  response.overall = Code::kOk;
  response.statuses.resize(request.descriptors.size());
  return response;
}

}  // namespace sluice::server
