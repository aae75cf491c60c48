// The time zone of a request for a calendar limit with timezone_from (docs/quotas.md, "A zone
// per customer"): the identity's zone in the plan file, else the request's entry, else the
// rule's own. Names resolve through bounded caches, of zones and of unknown names, so a request
// pays a hash lookup, not a search of the tz database (nor, for an unknown name, an exception)
// each time; an unknown zone from Envoy is counted and logged at most once per interval of the
// service's Clock.
#ifndef SLUICE_SERVICE_REQUEST_ZONES_H_
#define SLUICE_SERVICE_REQUEST_ZONES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "config/config.h"
#include "config/descriptor.h"
#include "config/descriptor_entry.h"
#include "sluice/calendar_window.h"
#include "sluice/clock.h"
#include "sluice/stats_sink.h"
#include "sluice/status.h"

namespace sluice::server {

class RequestZones {
 public:
  using Warn = std::function<void(const std::string&)>;
  // The tz database: ResolveCalendarZone, or a test's stand-in that counts what is asked.
  using Lookup = std::function<Result<CalendarZone>(std::string_view name)>;
  static constexpr Duration kWarnEvery = std::chrono::seconds(10);
  // More than the tz database's zones and links together: every valid name stays cached.
  static constexpr size_t kMaxCached = 2048;
  // Unknown names, kept apart so that a flood of them never takes a valid zone's place. A
  // client repeating a few wrong names (a typo in its config) costs a hash lookup each; names
  // past the bound are looked up every time, as before, and answered the same.
  static constexpr size_t kMaxUnknownCached = 1024;

  // `warn` may be null; `clock` must outlive this.
  RequestZones(Warn warn, const Clock* clock, Lookup lookup = ResolveCalendarZone)
      : warn_(std::move(warn)), clock_(clock), lookup_(std::move(lookup)) {}

  // The zone `limit` decides this request in: nullopt for a limit that is not a calendar one;
  // the rule's own zone without timezone_from or when neither the plan file nor the request
  // names one. `entries` is the request's descriptor
  // before its attributes were stripped; `attributes` what Match stripped. An unknown name is
  // an error naming it when `unknown_is_error` (HTTP's 400); otherwise (Envoy, which has no
  // error to give a descriptor) counted, logged, and the rule's own zone.
  Result<std::optional<CalendarZone>> For(const Domain& domain, const Limit& limit,
                                          std::span<const DescriptorEntry> entries,
                                          std::span<const RequestAttribute> attributes,
                                          bool unknown_is_error);

  // sluice_calendar_unknown_zones_total{domain}.
  void ReportStats(StatsSink& sink) const;

 private:
  Result<CalendarZone> Resolve(std::string_view name);
  std::optional<CalendarZone> RuleZone(const Limit& limit);
  void CountUnknown(const std::string& domain, const std::string& message);

  const Warn warn_;
  const Clock* const clock_;
  const Lookup lookup_;
  mutable std::shared_mutex cache_mu_;  // guards both caches
  std::unordered_map<std::string, CalendarZone, Domain::Hash, std::equal_to<>> cache_;
  std::unordered_map<std::string, Error, Domain::Hash, std::equal_to<>> unknown_names_;
  mutable std::mutex unknown_mu_;  // guards the fields below; taken only for an unknown zone
  std::map<std::string, uint64_t, std::less<>> unknown_;  // by domain (configured ones only)
  uint64_t since_warning_ = 0;
  bool warned_ = false;
  Timestamp last_warning_{};
};

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_REQUEST_ZONES_H_
