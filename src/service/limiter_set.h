// The store-side limiters of one config: one Limiter per configured limit (by id), made in the
// service's store, plus the limiters of Envoy's per-request `limit` overrides, made on first
// use. Installing a new config reuses the limiter (and so the counters) of every limit whose id,
// spec and failure mode are unchanged. Internal to the service.
#ifndef SLUICE_SERVICE_LIMITER_SET_H_
#define SLUICE_SERVICE_LIMITER_SET_H_

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "config/config.h"
#include "sluice/limiter.h"
#include "sluice/status.h"
#include "sluice/store.h"

namespace sluice::server {

class LimiterSet {
 public:
  // Every limited limit of `config` gets a limiter; those of `previous` (may be null) are reused
  // where id, spec and failure mode match.
  static Result<std::shared_ptr<const LimiterSet>> Install(std::shared_ptr<const Config> config,
                                                           const LimiterSet* previous,
                                                           Store& store);

  // The limiter of a configured limit, or of an override limit (made on first use; at most
  // kMaxOverrides distinct ones, then an error).
  Result<Limiter*> For(const Limit& limit) const;

  const std::shared_ptr<const Config>& config() const { return config_; }

  static constexpr size_t kMaxOverrides = 1024;

 private:
  struct Entry {
    LimitSpec spec;
    FailureMode failure_mode;
    std::shared_ptr<Limiter> limiter;
  };

  // A limiter for `limit` in the store, which shares its memory among `limits` limits.
  static Result<std::shared_ptr<Limiter>> Make(Store& store, const Limit& limit, size_t limits);

  std::shared_ptr<const Config> config_;
  Store* store_ = nullptr;
  std::map<std::string, Entry, std::less<>> limiters_;  // by limit id; immutable once installed
  mutable std::mutex overrides_mu_;
  mutable std::map<std::string, Entry, std::less<>> overrides_;  // guarded by overrides_mu_
};

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_LIMITER_SET_H_
