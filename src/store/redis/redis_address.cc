// Store addresses: redis://[user:password@]host:port[/db], redis+cluster://...,
// redis+sentinel://.../MASTER[/db], their TLS twins rediss://, rediss+cluster:// and
// rediss+sentinel://, and redis+unix://[user:password@]/path[?db=N], parsed into options and
// shown without their credentials.
#include <string>
#include <utility>
#include <vector>

#include "sluice/redis_store.h"

namespace sluice {
namespace {

// "user:password" or "password" (a password may hold ':'), as an address carries them.
void SetCredentials(std::string_view cred, RedisStoreOptions& o) {
  const size_t colon = cred.find(':');
  if (colon == std::string_view::npos) {
    o.password = std::string(cred);
  } else {
    o.user = std::string(cred.substr(0, colon));
    o.password = std::string(cred.substr(colon + 1));
  }
}

Result<std::pair<std::string, int>> ParseHostPort(std::string_view hp, const std::string& shown) {
  const size_t colon = hp.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return MakeError("store address '" + shown + "': expected host:port");
  }
  const std::string_view port = hp.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos ||
      std::stoi(std::string(port)) == 0 || std::stoi(std::string(port)) > 65535) {
    return MakeError("store address '" + shown + "': port must be 1-65535");
  }
  return std::make_pair(std::string(hp.substr(0, colon)), std::stoi(std::string(port)));
}

constexpr std::string_view kUnixScheme = "redis+unix://";

// Where a redis+unix address's credentials end (the '@' before the path), or npos if it has
// none. The path is absolute, so with no credentials the text after the scheme starts with '/';
// with them, they end at the last "@/" (a password may hold '@' and '/', a path "@/" would be
// a directory name ending in '@', and a path with one must come without credentials).
size_t UnixCredentialsEnd(std::string_view rest) {
  if (rest.starts_with('/')) return std::string_view::npos;
  return rest.rfind("@/");
}

Result<RedisStoreOptions> ParseUnixAddress(std::string_view rest, const std::string& shown) {
  const std::string form = "store address '" + shown + "': expected ";
  RedisStoreOptions o;
  if (!rest.starts_with('/')) {
    const size_t at = UnixCredentialsEnd(rest);
    if (at == std::string_view::npos) {
      return MakeError(form + "redis+unix://[user:password@]/absolute/path[?db=N]");
    }
    SetCredentials(rest.substr(0, at), o);
    rest.remove_prefix(at + 1);
  }
  if (const size_t q = rest.rfind('?'); q != std::string_view::npos) {
    const std::string_view query = rest.substr(q + 1);
    const std::string_view db = query.starts_with("db=") ? query.substr(3) : std::string_view();
    if (db.empty() || db.size() > 4 ||
        db.find_first_not_of("0123456789") != std::string_view::npos) {
      return MakeError(form + "?db=N (a number) after the socket's path");
    }
    o.db = std::stoi(std::string(db));
    rest = rest.substr(0, q);
  }
  // sun_path holds 107 bytes and a NUL.
  if (rest.size() < 2 || rest.size() > 107) {
    return MakeError(form + "an absolute socket path of at most 107 bytes");
  }
  o.unix_path = std::string(rest);
  return o;
}

// The schemes, each with what it says about the transport.
struct Scheme {
  std::string_view prefix;
  bool cluster;
  bool tls;
  bool sentinel;
};
constexpr Scheme kSchemes[] = {
    {"redis://", false, false, false},         {"rediss://", false, true, false},
    {"redis+cluster://", true, false, false},  {"rediss+cluster://", true, true, false},
    {"redis+sentinel://", false, false, true}, {"rediss+sentinel://", false, true, true},
};

const Scheme* FindScheme(std::string_view address) {
  for (const Scheme& s : kSchemes) {
    if (address.starts_with(s.prefix)) return &s;
  }
  return nullptr;
}

}  // namespace

std::string RedactRedisAddress(std::string_view address) {
  if (address.starts_with(kUnixScheme)) {
    const std::string_view rest = address.substr(kUnixScheme.size());
    if (rest.starts_with('/')) return std::string(address);  // no credentials: '@' is the path's
    const size_t at = UnixCredentialsEnd(rest);
    if (at != std::string_view::npos) {
      return std::string(kUnixScheme) + "***" + std::string(rest.substr(at));
    }
    // Malformed: the general rule below hides up to the last '@'.
  }
  const size_t scheme = address.find("://");
  if (scheme == std::string_view::npos) return std::string(address);
  const size_t authority = scheme + 3;
  // Credentials end at the last '@', as ParseRedisAddress reads them: a password may itself
  // hold '@', ':' or '/'.
  const size_t at = address.rfind('@');
  if (at == std::string_view::npos || at < authority) return std::string(address);
  return std::string(address.substr(0, authority)) + "***" + std::string(address.substr(at));
}

namespace {

// "host:port[,host:port...]" into "host:port" strings, each checked.
Result<std::vector<std::string>> ParseHostList(std::string_view rest, const std::string& shown) {
  std::vector<std::string> out;
  for (;;) {
    const size_t comma = rest.find(',');
    auto hp = ParseHostPort(rest.substr(0, comma), shown);
    if (!hp) return std::unexpected(hp.error());
    out.push_back(hp->first + ":" + std::to_string(hp->second));
    if (comma == std::string_view::npos) return out;
    rest.remove_prefix(comma + 1);
  }
}

Result<int> ParseDb(std::string_view db, const std::string& shown) {
  if (db.empty() || db.size() > 4 || db.find_first_not_of("0123456789") != std::string_view::npos) {
    return MakeError("store address '" + shown + "': database must be a number");
  }
  return std::stoi(std::string(db));
}

// After "redis+sentinel://" and the credentials: "host:port[,host:port...]/MASTER[/db]".
Result<void> ParseSentinel(std::string_view rest, const std::string& shown, RedisStoreOptions& o) {
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) {
    return MakeError("store address '" + shown +
                     "': expected redis+sentinel://host:port[,host:port...]/MASTER[/db]");
  }
  auto sentinels = ParseHostList(rest.substr(0, slash), shown);
  if (!sentinels) return std::unexpected(sentinels.error());
  o.sentinels = std::move(*sentinels);
  std::string_view name = rest.substr(slash + 1);
  if (const size_t db_slash = name.find('/'); db_slash != std::string_view::npos) {
    auto db = ParseDb(name.substr(db_slash + 1), shown);
    if (!db) return std::unexpected(db.error());
    o.db = *db;
    name = name.substr(0, db_slash);
  }
  // A master's name goes into a command and is matched in +switch-master messages, whose
  // fields are separated by spaces.
  if (name.empty() || name.size() > 256 ||
      name.find_first_of(" \t\r\n") != std::string_view::npos) {
    return MakeError("store address '" + shown +
                     "': the master's name must be 1-256 bytes without spaces");
  }
  o.sentinel_master = std::string(name);
  o.host = o.sentinels.front().substr(0, o.sentinels.front().rfind(':'));
  return {};
}

}  // namespace

Result<RedisStoreOptions> ParseRedisAddress(std::string_view address) {
  // Error messages show the address without its credentials: they end up in logs.
  const std::string shown = RedactRedisAddress(address);
  if (address.starts_with(kUnixScheme)) {
    return ParseUnixAddress(address.substr(kUnixScheme.size()), shown);
  }
  const Scheme* scheme = FindScheme(address);
  if (scheme == nullptr) {
    return MakeError("store address '" + shown +
                     "' must look like redis://[user:password@]host:port[/db], "
                     "redis+cluster://[user:password@]host:port[,host:port...], "
                     "redis+sentinel://[user:password@]host:port[,host:port...]/MASTER[/db] "
                     "(rediss:// and the others over TLS) or "
                     "redis+unix://[user:password@]/path[?db=N]");
  }
  const bool cluster = scheme->cluster;
  std::string_view rest = address.substr(scheme->prefix.size());
  RedisStoreOptions o;
  o.tls.enabled = scheme->tls;
  const bool sentinel = scheme->sentinel;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    SetCredentials(rest.substr(0, at), o);
    rest.remove_prefix(at + 1);
  }
  if (sentinel) {
    if (auto ok = ParseSentinel(rest, shown, o); !ok) return std::unexpected(ok.error());
    return o;
  }
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    if (cluster) return MakeError("store address '" + shown + "': a cluster has only database 0");
    auto db = ParseDb(rest.substr(slash + 1), shown);
    if (!db) return std::unexpected(db.error());
    o.db = *db;
    rest = rest.substr(0, slash);
  }
  if (!cluster) {
    auto hp = ParseHostPort(rest, shown);
    if (!hp) return std::unexpected(hp.error());
    o.host = hp->first;
    o.port = hp->second;
    return o;
  }
  auto seeds = ParseHostList(rest, shown);
  if (!seeds) return std::unexpected(seeds.error());
  o.cluster_seeds = std::move(*seeds);
  o.host = o.cluster_seeds.front().substr(0, o.cluster_seeds.front().rfind(':'));
  return o;
}

}  // namespace sluice
