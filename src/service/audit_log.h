// The audit log (--audit-log FILE): one JSON object a line, appended, for every admin write
// (POST and DELETE /v1/state) and every config reload. docs/quotas.md, "Credits, debits and the
// audit log", states what a line holds and the guarantee:
//
//   auto log = AuditLog::Open("/var/log/sluice/audit.log");
//   if (auto ok = (*log)->Append(line); !ok) refuse the write (503);
//   (*log)->Reopen();   // SIGHUP, after logrotate renamed the file
//
// The file is opened O_APPEND: each line is one write(2), which the kernel places at the end
// whole, so lines of concurrent writers (two sluiced on one file) never interleave. No secret
// reaches it: clients are named by their --api-tokens name, never by their token. Thread-safe.
#ifndef SLUICE_SERVICE_AUDIT_LOG_H_
#define SLUICE_SERVICE_AUDIT_LOG_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/status.h"
#include "sluice/time.h"

namespace sluice::server {

class AuditLog {
 public:
  // Opens (creating, mode 0640) `path` for appending.
  static Result<std::unique_ptr<AuditLog>> Open(const std::string& path);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Appends `line` and a newline in one write; an error (the line is not, or not wholly, in
  // the file: a full disk, an I/O error) when it was not written whole.
  Result<void> Append(std::string_view line);

  // Opens the path again and writes there from now on (logrotate's rename, then SIGHUP). On an
  // error the file already open stays in use.
  Result<void> Reopen();

  const std::string& path() const { return path_; }

 private:
  AuditLog(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  const std::string path_;
  std::mutex mu_;
  int fd_;  // guarded by mu_
};

// A counter as a line shows it: GET /v1/state's remaining and reset_after_ms.
struct AuditCounter {
  int64_t remaining = 0;
  int64_t reset_after_ms = 0;
};

// One admin write. `change` is the request's own JSON body part (e.g. {"credit":10}), already
// valid JSON, or empty.
struct AuditEntry {
  Timestamp time{};
  std::string_view client = {};  // the --api-tokens client's name, or "admin-token"
  std::string_view action = {};  // "credit", "debit", "remaining", "reset"
  std::string_view domain = {};
  std::string_view counter_key = {};
  std::string_view request_id = {};
  std::string_view phase = {};  // "intent" (before the write) or "done" (after it)
  std::string_view change = {};
  std::optional<AuditCounter> before = {};
  std::optional<AuditCounter> after = {};
};

// {"time":"2026-12-05T09:10:11.123Z","event":"admin","phase",...,"client","action","domain",
//  "counter_key","request_id","change":{...},"before":{"remaining","reset_after_ms"},"after":...}
std::string AuditLine(const AuditEntry& entry);

// {"time","event":"reload","config","sha256","outcome":"ok"|"failed"[,"error"]}.
std::string AuditReloadLine(Timestamp time, std::string_view config_path, std::string_view sha256,
                            bool ok, std::string_view error = {});

// The SHA-256 of `bytes`, 64 lower-case hex digits (a config file's, for the reload line).
std::string Sha256Hex(std::string_view bytes);

// RFC 3339 UTC with milliseconds: "2026-12-05T09:10:11.123Z".
std::string Rfc3339Millis(Timestamp time);

}  // namespace sluice::server

#endif  // SLUICE_SERVICE_AUDIT_LOG_H_
