// The store-side limiters of one config: one Limiter per configured limit (by id), made in the
// configured store, plus the limiters of Envoy's per-request `limit` overrides, made on first
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
#include "sluice/redis_store.h"
#include "sluice/status.h"

namespace sluice::server {

// Makes limiters in one store: the embedded memory store or Redis.
class LimiterFactory {
 public:
  // memory_max_bytes is shared by the config's limits (see ServiceOptions).
  static Result<std::unique_ptr<LimiterFactory>> Open(const std::string& store,
                                                      size_t memory_max_bytes,
                                                      int redis_connections,
                                                      int64_t redis_command_timeout_ms);

  Result<std::shared_ptr<Limiter>> Make(const Limit& limit, size_t limits_in_config) const;

  // Decides one request's checks all or nothing (RedisStore::DecideAll, or sluice::DecideAll).
  void DecideAll(std::span<const LimitCheck> checks, Timestamp now, std::span<Decision> out) const;

  bool Ready() const { return redis_ == nullptr || redis_->Ping(); }
  RedisStore* redis() const { return redis_.get(); }

 private:
  size_t memory_max_bytes_ = 0;
  std::shared_ptr<RedisStore> redis_;  // null: the memory store
};

class LimiterSet {
 public:
  // Every limited limit of `config` gets a limiter; those of `previous` (may be null) are reused
  // where id, spec and failure mode match.
  static Result<std::shared_ptr<const LimiterSet>> Install(std::shared_ptr<const Config> config,
                                                           const LimiterSet* previous,
                                                           const LimiterFactory& factory);

  // The limiter of a configured limit, or of an override limit (made on first use; at most
  // kMaxOverrides distinct ones, then an error).
  Result<Limiter*> For(const Limit& limit) const;

  const std::shared_ptr<const Config>& config() const { return config_; }

  // Summed over the configured limits' limiters.
  StoreStats Totals() const;

  static constexpr size_t kMaxOverrides = 1024;

 private:
  struct Entry {
    LimitSpec spec;
    FailureMode failure_mode;
    std::shared_ptr<Limiter> limiter;
  };

  std::shared_ptr<const Config> config_;
  const LimiterFactory* factory_ = nullptr;
  std::map<std::string, Entry, std::less<>> limiters_;  // by limit id; immutable once installed
  mutable std::mutex overrides_mu_;
  mutable std::map<std::string, Entry, std::less<>> overrides_;  // guarded by overrides_mu_
};

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_LIMITER_SET_H_
