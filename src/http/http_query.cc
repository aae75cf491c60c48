#include "http/http_query.h"

#include "util/hex.h"

namespace sluice::server {
namespace {

Result<std::string> Decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%') {
      if (i + 2 >= s.size()) {  // needs two hex digits after it
        return MakeError("bad percent-escape in the query: '" + std::string(s.substr(i)) + "'");
      }
      const int hi = util::HexValue(s[i + 1]);
      const int lo = util::HexValue(s[i + 2]);
      if (hi < 0 || lo < 0) {
        return MakeError("bad percent-escape in the query: '" + std::string(s.substr(i, 3)) + "'");
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

Target SplitTarget(std::string_view target) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return {target, {}};
  return {target.substr(0, q), target.substr(q + 1)};
}

Result<std::vector<std::pair<std::string, std::string>>> ParseQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> params;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (param.empty()) continue;
    const size_t eq = param.find('=');
    auto key = Decode(param.substr(0, eq));
    if (!key) return std::unexpected(key.error());
    auto value = Decode(eq == std::string_view::npos ? std::string_view() : param.substr(eq + 1));
    if (!value) return std::unexpected(value.error());
    params.emplace_back(std::move(*key), std::move(*value));
  }
  return params;
}

Result<CounterQuery> ParseCounterQuery(std::string_view query) {
  auto params = ParseQuery(query);
  if (!params) return std::unexpected(params.error());
  CounterQuery q;
  for (auto& [key, value] : *params) {
    if (key == "domain") {
      q.domain = std::move(value);
    } else {
      q.entries.emplace_back(std::move(key), std::move(value));
    }
  }
  if (q.domain.empty()) return MakeError("the query needs domain=<domain>");
  if (q.entries.empty()) {
    return MakeError("the query needs the descriptor entries, e.g. &api_key=k1");
  }
  return q;
}

}  // namespace sluice::server
