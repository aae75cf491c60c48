// A rate_limit's `scope:` and `regions:` (docs/regions.md), and giving each limit of scope
// global this node's region's part at load.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "config/config_parse.h"
#include "sluice/duration.h"

namespace sluice::server::internal {
namespace {

constexpr size_t kMaxRegionNameBytes = 64;

// Region names go into the global store's field names, separated by ':'.
bool ValidRegionName(std::string_view name) {
  return !name.empty() && name.size() <= kMaxRegionNameBytes &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.';
         });
}

// "0.25" (or "1", "25%"-free) to ppm; at most 6 decimals count.
std::optional<int64_t> ParseShare(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return static_cast<int64_t>(std::llround(value * kWholeShare));
}

std::string RegionList(const RegionScope& scope) {
  std::string out;
  for (const RegionShare& s : scope.shares) out += (out.empty() ? "" : ", ") + s.region;
  return out;
}

}  // namespace

bool IsRegionName(std::string_view name) { return ValidRegionName(name); }

Result<RegionScope> ParseRegionScope(const std::string& file,
                                     const std::optional<YAML::Node>& scope,
                                     const std::optional<YAML::Node>& regions, const Limit& limit,
                                     const std::string& limit_name, Warnings& warnings) {
  RegionScope out;
  if (scope) {
    auto text = ReadString(file, *scope, "scope", kMaxRegionNameBytes);
    if (!text) return std::unexpected(text.error());
    if (*text == "global") {
      out.global = true;
    } else if (*text != "region") {
      return ErrorAt(file, *scope, "unknown scope '" + *text + "' (expected region or global)");
    }
  }
  if (!out.global) {
    if (regions) {
      return ErrorAt(file, *regions,
                     limit_name +
                         ": regions applies only to scope: global (scope: region, the "
                         "default, holds the limit per store)");
    }
    return out;
  }
  if (!regions) {
    return ErrorAt(file, *scope,
                   limit_name +
                       ": scope: global needs regions: {mode: static|leased, shares: "
                       "{...}}");
  }
  auto fields = Fields::Of(file, *regions, "regions", {"mode", "refresh", "shares"}, &warnings);
  if (!fields) return std::unexpected(fields.error());
  const auto mode = fields->Get("mode");
  if (!mode) return ErrorAt(file, *regions, "regions needs a 'mode' (static or leased)");
  auto mode_text = ReadString(file, *mode, "regions mode", kMaxRegionNameBytes);
  if (!mode_text) return std::unexpected(mode_text.error());
  if (*mode_text == "leased") {
    out.mode = RegionMode::kLeased;
  } else if (*mode_text != "static") {
    return ErrorAt(file, *mode,
                   "unknown regions mode '" + *mode_text + "' (expected static or leased)");
  }
  // A fixed window's count is hits, which reads the same whatever the part; a bucket's level in
  // Redis is kept in units scaled to its rate, which a part that moves would misread.
  if (out.mode == RegionMode::kLeased && limit.spec.algorithm != Algorithm::kFixedWindow) {
    return ErrorAt(file, *mode,
                   limit_name + ": regions mode leased needs algorithm: fixed_window, not " +
                       std::string(AlgorithmName(limit.spec.algorithm)) +
                       " (a region's part moves while the limit runs; docs/regions.md)");
  }
  if (const auto r = fields->Get("refresh")) {
    if (out.mode != RegionMode::kLeased) {
      return ErrorAt(file, fields->KeyOf("refresh"), "refresh applies only to regions mode leased");
    }
    auto text = ReadString(file, *r, "refresh", kMaxRegionNameBytes);
    if (!text) return std::unexpected(text.error());
    const auto d = ParseDuration(*text);
    if (!d || *d < std::chrono::milliseconds(50) || *d > std::chrono::hours(1)) {
      return ErrorAt(file, *r, "refresh must be a duration from 50ms to 1h (got '" + *text + "')");
    }
    out.refresh = *d;
  }
  const auto shares = fields->Get("shares");
  if (!shares) {
    return ErrorAt(file, *regions, "regions needs 'shares' ({region: fraction, ...})");
  }
  auto entries = MappingEntries(file, *shares, "shares", "region");
  if (!entries) return std::unexpected(entries.error());
  int64_t sum = 0;
  for (const auto& [key, value] : *entries) {
    const std::string name = key.Scalar();
    if (!ValidRegionName(name)) {
      return ErrorAt(file, key,
                     "region name '" + name + "' must be 1 to 64 letters, digits, '_', '-' or '.'");
    }
    auto text = ReadString(file, value, "share", kMaxRegionNameBytes);
    if (!text) return std::unexpected(text.error());
    const auto ppm = ParseShare(*text);
    if (!ppm || *ppm <= 0 || *ppm > kWholeShare) {
      return ErrorAt(
          file, value,
          "share of region '" + name + "' must be a number in (0, 1] (got '" + *text + "')");
    }
    if (SharedUnits(limit.spec.limit, *ppm) < 1) {
      return ErrorAt(file, value,
                     limit_name + ": share " + *text + " of region '" + name + "' is less than " +
                         "one of its " + std::to_string(limit.spec.limit) +
                         " requests (raise the share or the limit)");
    }
    sum += *ppm;
    out.shares.push_back({name, *ppm});
  }
  if (out.shares.empty()) return ErrorAt(file, *shares, "shares lists no region");
  if (sum > kWholeShare) {
    char shown[32];  // the sum as the shares are written: 1.1, not 1.100000
    std::snprintf(shown, sizeof shown, "%.6g", static_cast<double>(sum) / kWholeShare);
    return ErrorAt(file, *shares,
                   limit_name + ": shares sum to " + shown +
                       ", more than 1 (the regions together would admit more than the limit)");
  }
  std::sort(out.shares.begin(), out.shares.end(),
            [](const RegionShare& a, const RegionShare& b) { return a.region < b.region; });
  return out;
}

Result<void> ApplyRegion(Limit& limit, const RegionOptions& options) {
  RegionScope& scope = limit.regions;
  if (!scope.global) return {};
  const std::string name = limit.name.empty() ? "a rate_limit" : "rate_limit '" + limit.name + "'";
  if (options.region.empty()) {
    return MakeError(limit.origin + ": " + name +
                     " has scope: global: start sluiced with --region (one of: " +
                     RegionList(scope) + ") to say which part of it this node enforces");
  }
  scope.region = options.region;
  const int64_t own = scope.OwnShare();
  if (own == 0) {
    return MakeError(limit.origin + ": " + name + " has scope: global but its shares (" +
                     RegionList(scope) + ") do not list this node's region '" + options.region +
                     "'");
  }
  if (scope.mode == RegionMode::kLeased && !options.global_store) {
    return MakeError(limit.origin + ": " + name +
                     " has regions mode leased: start sluiced with --global-store");
  }
  scope.global_spec = limit.spec;
  auto part = RegionPart(limit.spec, SharedUnits(limit.spec.limit, own));
  if (!part) return MakeError(limit.origin + ": " + name + ": " + part.error().message);
  limit.spec = *part;
  return {};
}

}  // namespace sluice::server::internal
