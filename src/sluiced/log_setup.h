// sluiced's logging: spdlog to stderr, as text for people or as JSON lines for log shippers.
#ifndef SLUICE_SLUICED_LOG_SETUP_H_
#define SLUICE_SLUICED_LOG_SETUP_H_

#include <string_view>

#include "sluice/status.h"

namespace sluice::server {

// level: trace|debug|info|warn|error|critical|off. format: text, or json, one object per line:
//   {"time":"2024-05-01T12:00:00.123Z","level":"info","msg":"http: listening on 127.0.0.1:8080"}
// Replaces spdlog's default logger; call once, before starting threads.
Result<void> SetupLogging(std::string_view level, std::string_view format);

}  // namespace sluice::server

#endif  // SLUICE_SLUICED_LOG_SETUP_H_
