#include "service/request_zones.h"

namespace sluice::server {
namespace {

constexpr StatFamily kUnknownZones{
    "sluice_calendar_unknown_zones_total", StatKind::kCounter,
    "Envoy requests naming a time zone sluiced does not know for a calendar limit: decided in "
    "the rule's own zone."};

// The identity of the request: the value of the domain's plan key, if it sent one.
const std::string_view* IdentityIn(const Domain& domain, std::span<const DescriptorEntry> entries) {
  if (domain.plan_key.empty()) return nullptr;
  for (const DescriptorEntry& e : entries) {
    if (e.key == domain.plan_key) return &e.value;
  }
  return nullptr;
}

}  // namespace

Result<std::optional<CalendarZone>> RequestZones::For(const Domain& domain, const Limit& limit,
                                                      std::span<const DescriptorEntry> entries,
                                                      std::span<const RequestAttribute> attributes,
                                                      bool unknown_is_error) {
  if (!limit.spec.IsCalendar()) return std::nullopt;
  // Every calendar request names its zone to the store, the rule's own included, so that the
  // stores count a request in a window another zone opened (after a reload that changed the
  // rule's timezone, too) and nothing else -- not an admin read.
  if (limit.timezone_from.empty()) return RuleZone(limit);
  // The plan file wins: it is the operator's record of the customer's billing zone, which a
  // client must not be able to move by sending another entry.
  if (const std::string_view* identity = IdentityIn(domain, entries)) {
    if (const auto it = domain.identity_zones.find(*identity); it != domain.identity_zones.end()) {
      auto zone = Resolve(it->second);  // validated at load
      if (zone) return *zone;
    }
  }
  const std::string* name = FindAttribute(attributes, limit.timezone_from);
  if (name == nullptr) return RuleZone(limit);
  auto zone = Resolve(*name);
  if (zone) return *zone;
  const std::string message = "unknown time zone '" + *name + "' in descriptor entry '" +
                              limit.timezone_from + "' (an IANA name such as Europe/Lisbon)";
  if (unknown_is_error) return MakeError(message);
  CountUnknown(domain.name,
               message + "; decided in the rule's zone " + limit.spec.calendar.timezone);
  return RuleZone(limit);
}

std::optional<CalendarZone> RequestZones::RuleZone(const Limit& limit) {
  auto zone = Resolve(limit.spec.calendar.timezone);  // validated at load
  if (!zone) return std::nullopt;                     // the limiter's own, then
  return *zone;
}

Result<CalendarZone> RequestZones::Resolve(std::string_view name) {
  {
    std::shared_lock lock(cache_mu_);
    if (const auto it = cache_.find(name); it != cache_.end()) return it->second;
    if (const auto it = unknown_names_.find(name); it != unknown_names_.end()) {
      return std::unexpected(it->second);
    }
  }
  auto zone = lookup_(name);
  std::unique_lock lock(cache_mu_);
  // Full caches stay as they are: nothing is evicted, so a name once cached is answered from
  // the cache for the process's life (as the tz database itself is read once).
  if (zone) {
    if (cache_.size() < kMaxCached) cache_.emplace(std::string(name), *zone);
  } else if (unknown_names_.size() < kMaxUnknownCached) {
    unknown_names_.emplace(std::string(name), zone.error());
  }
  return zone;
}

void RequestZones::CountUnknown(const std::string& domain, const std::string& message) {
  std::lock_guard lock(unknown_mu_);
  ++unknown_[domain];
  ++since_warning_;
  const Timestamp now = clock_->Now();
  if (warned_ && now - last_warning_ < kWarnEvery) return;
  if (warn_) {
    warn_(message + " (" + std::to_string(since_warning_) +
          " such requests since the last warning; sluice_calendar_unknown_zones_total)");
  }
  warned_ = true;
  last_warning_ = now;
  since_warning_ = 0;
}

void RequestZones::ReportStats(StatsSink& sink) const {
  std::lock_guard lock(unknown_mu_);
  for (const auto& [domain, n] : unknown_) {
    const StatLabel labels[] = {{"domain", domain}};
    sink.Add(kUnknownZones, labels, static_cast<double>(n));
  }
}

}  // namespace sluice::server
