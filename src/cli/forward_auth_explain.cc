#include "cli/forward_auth_explain.h"

#include "config/descriptor.h"
#include "http/forwarded_request.h"
#include "http/http_message.h"

namespace sluice::cli {
namespace {

Result<const server::Domain*> ChooseDomain(const server::Config& config, const std::string& name) {
  if (!name.empty()) {
    const server::Domain* d = config.FindDomain(name);
    if (d == nullptr || !d->forward_auth) {
      return MakeError("no domain '" + name + "' with a forward_auth section");
    }
    return d;
  }
  const server::Domain* found = nullptr;
  for (const auto& [domain_name, domain] : config.domains()) {
    if (!domain.forward_auth) continue;
    if (found != nullptr) {
      return MakeError("several domains have a forward_auth section: name one with --domain");
    }
    found = &domain;
  }
  if (found == nullptr) return MakeError("no domain of the config has a forward_auth section");
  return found;
}

// The header section as the HTTP parser hands it on: one "Name: value\r\n" per field. The
// request's own target carries the URI (as Envoy's ext_authz sends it), so no X-Forwarded-Uri.
Result<std::string> HeaderLines(const ExplainRequest& request) {
  std::string lines;
  if (!request.host.empty()) lines += "Host: " + request.host + "\r\n";
  for (const std::string& h : request.headers) {
    const size_t colon = h.find(':');
    if (colon == std::string::npos || colon == 0 || h.find_first_of("\r\n") != std::string::npos) {
      return MakeError("--header '" + h + "' is not 'Name: value'");
    }
    lines += h + "\r\n";
  }
  return lines;
}

std::string OrNone(const std::string& value, std::string_view why) {
  return value.empty() ? "(none: " + std::string(why) + ")" : value;
}

}  // namespace

Result<std::string> ExplainForwardAuth(const server::Config& config,
                                       const ExplainRequest& request) {
  const auto domain = ChooseDomain(config, request.domain);
  if (!domain) return std::unexpected(domain.error());
  const auto lines = HeaderLines(request);
  if (!lines) return std::unexpected(lines.error());
  server::HttpRequestView view;
  view.method = request.method;
  view.target = request.uri;
  view.header_lines = *lines;
  view.peer = request.peer;
  const server::ForwardAuth& fa = *(*domain)->forward_auth;
  const server::ForwardedRequest f = server::DescribeForwarded(view, fa);

  std::string out = "domain: " + (*domain)->name + "\n";
  out += "method: " + std::string(f.method) + "\n";
  out += "path: " + (f.path ? *f.path : "(none: " + f.path.error() + ")") + "\n";
  out += "query: " + std::string(f.query) + "\n";
  out += "host: " + OrNone(f.host, f.host_invalid ? "not a valid name or address" : "not given") +
         "\n";
  out += "client: " + OrNone(f.client, "give the proxy's address with --peer") + "\n";
  if (!f.path && server::ActionsRead(fa, server::RequestField::kPath)) {
    return out + "answer: 400, an action reads the path and it has no canonical form\n";
  }
  const auto descriptors = server::ForwardedDescriptors(f, view, fa);
  if (descriptors.empty()) return out + "descriptors: none (allowed, counted as no_descriptor)\n";
  out += "descriptors:\n";
  for (const server::CheckDescriptor& d : descriptors) {
    out += "  -";
    std::vector<server::DescriptorEntry> entries;
    for (const auto& [key, value] : d.entries) {
      out += " " + key + "=" + value;
      entries.push_back({key, value});
    }
    const auto m = server::Match(config, (*domain)->name, entries);
    if (!m) return std::unexpected(m.error());
    if (m->limit == nullptr) {
      out += "\n    no limit matches\n";
      continue;
    }
    const std::string& label = m->limit->name.empty() ? m->limit->metric_name : m->limit->name;
    out += "\n    limit '" + label + "', counter " + m->counter_key + "\n";
  }
  return out;
}

}  // namespace sluice::cli
