#include "sluiced/log_setup.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "util/json_string.h"

namespace sluice::server {
namespace {

// %* in a pattern: the message as a JSON string literal, so that quotes, newlines and odd
// bytes in a message (a config error quoting a file) cannot break the line's JSON.
class JsonMessageFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string out;
    util::AppendJsonStringOfBytes(out, std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(out.data(), out.data() + out.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

}  // namespace

Result<void> SetupLogging(std::string_view level, std::string_view format) {
  const auto parsed = spdlog::level::from_str(std::string(level));
  // from_str maps anything unknown to off; only "off" itself may mean off.
  if (parsed == spdlog::level::off && level != "off") {
    return MakeError("unknown log level '" + std::string(level) +
                     "' (trace, debug, info, warn, error, critical, off)");
  }
  std::shared_ptr<spdlog::logger> logger;
  if (format == "json") {
    logger = std::make_shared<spdlog::logger>("sluiced",
                                              std::make_shared<spdlog::sinks::stderr_sink_mt>());
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<JsonMessageFlag>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","msg":%*})");
    logger->set_formatter(std::move(formatter));
  } else if (format == "text") {
    logger = std::make_shared<spdlog::logger>(
        "sluiced", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  } else {
    return MakeError("unknown log format '" + std::string(format) + "' (text, json)");
  }
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
  return {};
}

}  // namespace sluice::server
