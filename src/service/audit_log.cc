#include "service/audit_log.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "util/json_string.h"

namespace sluice::server {
namespace {

constexpr int kOpenFlags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC;
constexpr mode_t kMode = 0640;

Error ErrnoError(std::string what, int err) {
  return Error{std::move(what) + ": " + std::strerror(err)};
}

void AppendCounter(std::string& out, std::string_view name, const AuditCounter& c) {
  util::AppendJsonStringOfBytes(out, name);
  out += ":{\"remaining\":";
  util::AppendJsonInt(out, c.remaining);
  out += ",\"reset_after_ms\":";
  util::AppendJsonInt(out, c.reset_after_ms);
  out += '}';
}

}  // namespace

Result<std::unique_ptr<AuditLog>> AuditLog::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), kOpenFlags, kMode);
  if (fd < 0) return std::unexpected(ErrnoError("audit log " + path, errno));
  return std::unique_ptr<AuditLog>(new AuditLog(path, fd));
}

AuditLog::~AuditLog() { ::close(fd_); }

Result<void> AuditLog::Append(std::string_view line) {
  std::string text(line);
  text += '\n';
  std::lock_guard lock(mu_);
  // One write: a short one (a full disk mid-line) is an error, and the partial line ends where
  // the next line's newline-less start would join it, so a newline closes it off first.
  const ssize_t n = ::write(fd_, text.data(), text.size());
  if (n == static_cast<ssize_t>(text.size())) return {};
  const int err = n < 0 ? errno : ENOSPC;
  if (n > 0) (void)!::write(fd_, "\n", 1);
  return std::unexpected(ErrnoError("audit log " + path_, err));
}

Result<void> AuditLog::Reopen() {
  const int fd = ::open(path_.c_str(), kOpenFlags, kMode);
  if (fd < 0) return std::unexpected(ErrnoError("audit log " + path_, errno));
  std::lock_guard lock(mu_);
  ::close(fd_);
  fd_ = fd;
  return {};
}

std::string Rfc3339Millis(Timestamp time) {
  const int64_t ns = ToNanos(time);
  const int64_t ms_total = ns >= 0 ? ns / 1000000 : (ns - 999999) / 1000000;
  const time_t secs =
      static_cast<time_t>(ms_total >= 0 ? ms_total / 1000 : (ms_total - 999) / 1000);
  const int ms = static_cast<int>(ms_total - static_cast<int64_t>(secs) * 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

std::string AuditLine(const AuditEntry& e) {
  std::string out = "{";
  util::AppendJsonStringMember(out, "time", Rfc3339Millis(e.time));
  out += ",\"event\":\"admin\",";
  util::AppendJsonStringMember(out, "phase", e.phase);
  out += ',';
  util::AppendJsonStringMember(out, "client", e.client);
  out += ',';
  util::AppendJsonStringMember(out, "action", e.action);
  out += ',';
  util::AppendJsonStringMember(out, "domain", e.domain);
  out += ',';
  util::AppendJsonStringMember(out, "counter_key", e.counter_key);
  out += ',';
  util::AppendJsonStringMember(out, "request_id", e.request_id);
  if (!e.change.empty()) {
    out += ",\"change\":";
    out += e.change;
  }
  if (e.before) {
    out += ',';
    AppendCounter(out, "before", *e.before);
  }
  if (e.after) {
    out += ',';
    AppendCounter(out, "after", *e.after);
  }
  out += '}';
  return out;
}

std::string AuditReloadLine(Timestamp time, std::string_view config_path, std::string_view sha256,
                            bool ok, std::string_view error) {
  std::string out = "{";
  util::AppendJsonStringMember(out, "time", Rfc3339Millis(time));
  out += ",\"event\":\"reload\",";
  util::AppendJsonStringMember(out, "config", config_path);
  out += ',';
  util::AppendJsonStringMember(out, "sha256", sha256);
  out += ',';
  util::AppendJsonStringMember(out, "outcome", ok ? "ok" : "failed");
  if (!error.empty()) {
    out += ',';
    util::AppendJsonStringMember(out, "error", error);
  }
  out += '}';
  return out;
}

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * sizeof digest);
  for (unsigned char b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

}  // namespace sluice::server
