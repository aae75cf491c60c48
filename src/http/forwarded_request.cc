#include "http/forwarded_request.h"

#include <optional>
#include <utility>

#include "http/http_headers.h"
#include "http/http_query.h"
#include "util/canonical_host.h"
#include "util/canonical_path.h"
#include "util/ip_network.h"

namespace sluice::server {
namespace {

bool Trusted(const std::vector<util::IpNetwork>& trusted, const util::IpAddress& ip) {
  for (const util::IpNetwork& net : trusted) {
    if (net.Contains(ip)) return true;
  }
  return false;
}

std::string_view Trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

// The client, walking X-Forwarded-For from the right (each proxy appends the address it got
// the request from) past the trusted proxies. An entry that is not an address stops the walk
// at the last address known good: only a trusted proxy could have written what lies left of a
// trusted address, and one that writes garbage vouches for nothing further.
//
// A client of a Unix socket has no address: the peer is "unix" (kUnixPeer), trusted only when
// trusted_proxies lists `unix` (anyone who may open the socket file could otherwise claim any
// address), and the client is "unix" when nothing trusted says more.
std::string ClientAddress(const HttpRequestView& request, const ForwardAuth& config) {
  const bool unix_peer = request.peer == kUnixPeer;
  std::optional<util::IpAddress> peer;
  if (!unix_peer) {
    peer = util::ParseIpAddress(request.peer);
    if (!peer) return {};
  }
  const std::string self = unix_peer ? std::string(kUnixPeer) : peer->ToString();
  if (unix_peer ? !config.trust_unix : !Trusted(config.trusted_proxies, *peer)) return self;
  const std::optional<std::string> xff = CombinedHeader(request.header_lines, "X-Forwarded-For");
  if (!xff) return self;
  std::optional<util::IpAddress> client = peer;
  std::string_view rest = *xff;
  while (!rest.empty()) {
    const size_t comma = rest.rfind(',');
    const std::string_view item =
        Trim(comma == std::string_view::npos ? rest : rest.substr(comma + 1));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(0, comma);
    if (item.empty()) continue;
    const auto ip = util::ParseIpAddress(item);
    if (!ip) break;
    client = *ip;
    if (!Trusted(config.trusted_proxies, *ip)) break;
  }
  return client ? client->ToString() : self;
}

std::string_view FirstNonEmpty(std::string_view header_lines, std::string_view a,
                               std::string_view b, std::string_view fallback) {
  for (std::string_view name : {a, b}) {
    if (const auto v = FindHeader(header_lines, name); v && !v->empty()) return *v;
  }
  return fallback;
}

}  // namespace

bool ActionsRead(const ForwardAuth& config, RequestField field) {
  for (const ForwardAuthAction& action : config.actions) {
    for (const ForwardAuthEntry& e : action.entries) {
      if (e.field == field) return true;
    }
  }
  return false;
}

ForwardedRequest DescribeForwarded(const HttpRequestView& request, const ForwardAuth& config) {
  ForwardedRequest f;
  const std::string_view lines = request.header_lines;
  f.method = FirstNonEmpty(lines, "X-Forwarded-Method", "X-Original-Method", request.method);
  const std::string_view uri =
      FirstNonEmpty(lines, "X-Forwarded-Uri", "X-Original-URI", request.target);
  auto target = util::CanonicalTarget(uri, config.normalize);
  if (target) {
    f.path = std::move(target->path);
    f.query = target->query;
  } else {
    f.path = std::unexpected(std::move(target.error()));
    // The query still counts where only query parameters are read: a bad path must not hide it.
    f.query = SplitTarget(uri.substr(0, uri.find('#'))).query;
  }
  if (const std::string_view host = FirstNonEmpty(lines, "X-Forwarded-Host", "Host", {});
      !host.empty()) {
    auto canonical = util::CanonicalHost(host);
    f.host_invalid = !canonical;
    if (canonical) f.host = std::move(*canonical);
  }
  f.client = ClientAddress(request, config);
  return f;
}

std::vector<CheckDescriptor> ForwardedDescriptors(const ForwardedRequest& forwarded,
                                                  const HttpRequestView& request,
                                                  const ForwardAuth& config) {
  // The query is decoded once, and only when an action reads it.
  std::optional<std::vector<std::pair<std::string, std::string>>> params;
  bool query_bad = false;
  const auto query_value = [&](const std::string& name) -> std::optional<std::string_view> {
    if (!params && !query_bad) {
      auto parsed = ParseQuery(forwarded.query);
      if (parsed) {
        params = std::move(*parsed);
      } else {
        query_bad = true;  // as if absent: a client's bad escape must not fail its proxy
      }
    }
    if (query_bad) return std::nullopt;
    for (const auto& [key, value] : *params) {
      if (key == name) return std::string_view(value);
    }
    return std::nullopt;
  };

  std::vector<CheckDescriptor> descriptors;
  for (const ForwardAuthAction& action : config.actions) {
    CheckDescriptor d;
    bool complete = true;
    for (const ForwardAuthEntry& e : action.entries) {
      std::optional<std::string_view> value;
      switch (e.field) {
        case RequestField::kRemoteAddress:
          value = forwarded.client;
          break;
        case RequestField::kMethod:
          value = forwarded.method;
          break;
        case RequestField::kHost:
          value = forwarded.host;
          break;
        case RequestField::kPath:
          if (forwarded.path) value = *forwarded.path;
          break;
        case RequestField::kHeader:
          value = FindHeader(request.header_lines, e.name);
          break;
        case RequestField::kQuery:
          value = query_value(e.name);
          break;
        case RequestField::kGenericKey:
          value = e.value;
          break;
      }
      if (!value || value->empty()) {
        complete = false;
        break;
      }
      d.entries.emplace_back(e.key, std::string(*value));
    }
    if (complete) descriptors.push_back(std::move(d));
  }
  return descriptors;
}

}  // namespace sluice::server
