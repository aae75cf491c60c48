// The forward-auth endpoint without a network: how a proxy's request is read (header fields,
// X-Forwarded-For through trusted proxies only, the three ways method/uri/host arrive), which
// descriptors the actions make, and the answers over the real service on the memory store with
// a manual clock. Expected values come from the config text and the headers each test writes.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "http/forward_auth_api.h"
#include "http/forwarded_request.h"
#include "http/http_headers.h"
#include "sluice/open_store.h"
#include "support/temp_config_dir.h"

namespace sluice::server {
namespace {

using Entries = std::vector<std::pair<std::string, std::string>>;

TEST(HttpHeaders, FindsFieldsCaseInsensitivelyAndCombinesRepeats) {
  const std::string lines =
      "Host: a.example\r\nx-forwarded-for: 1.1.1.1\r\nX-Api-Key:   k1  \r\n"
      "X-Forwarded-For: 2.2.2.2, 3.3.3.3\r\nEmpty:\r\nX-Api-Key-2: other\r\n";
  EXPECT_EQ(FindHeader(lines, "x-api-key"), "k1");
  EXPECT_EQ(FindHeader(lines, "X-FORWARDED-FOR"), "1.1.1.1");
  EXPECT_EQ(FindHeader(lines, "Empty"), "");
  EXPECT_EQ(FindHeader(lines, "X-Api"), std::nullopt);
  EXPECT_EQ(FindHeader(lines, "Missing"), std::nullopt);
  EXPECT_EQ(CombinedHeader(lines, "X-Forwarded-For"), "1.1.1.1, 2.2.2.2, 3.3.3.3");
  EXPECT_EQ(CombinedHeader(lines, "Missing"), std::nullopt);
  EXPECT_EQ(FindHeader("", "Host"), std::nullopt);
}

ForwardAuth Trusting(std::vector<std::string> blocks) {
  ForwardAuth fa;
  for (const std::string& b : blocks) fa.trusted_proxies.push_back(*util::ParseIpNetwork(b));
  return fa;
}

HttpRequestView View(std::string_view peer, std::string_view lines,
                     std::string_view target = "/auth", std::string_view method = "GET") {
  HttpRequestView v;
  v.method = method;
  v.target = target;
  v.header_lines = lines;
  v.peer = peer;
  return v;
}

TEST(ForwardedRequest, AnUntrustedPeerIsTheClientWhateverItSends) {
  const ForwardAuth fa = Trusting({"10.0.0.0/8"});
  const std::string lines = "X-Forwarded-For: 10.9.9.9, 1.2.3.4\r\n";
  EXPECT_EQ(DescribeForwarded(View("198.51.100.7", lines), fa).client, "198.51.100.7");
  EXPECT_EQ(DescribeForwarded(View("198.51.100.7", lines), ForwardAuth{}).client, "198.51.100.7");
}

// A peer on a Unix-socket listener ("unix") has no address: only `unix` in trusted_proxies lets
// it say who the client is (no CIDR matches it, not even 0.0.0.0/0); otherwise, and when it says
// nothing, the client is "unix".
TEST(ForwardedRequest, AUnixPeerIsTrustedOnlyWhenUnixIsListed) {
  const std::string lines = "X-Forwarded-For: 6.6.6.6, 203.0.113.5\r\n";
  ForwardAuth everyone = Trusting({"0.0.0.0/0", "::/0"});
  EXPECT_EQ(DescribeForwarded(View(kUnixPeer, lines), everyone).client, "unix");
  EXPECT_EQ(DescribeForwarded(View(kUnixPeer, lines), ForwardAuth{}).client, "unix");
  ForwardAuth unix_only;
  unix_only.trust_unix = true;
  EXPECT_EQ(DescribeForwarded(View(kUnixPeer, lines), unix_only).client, "203.0.113.5");
  EXPECT_EQ(DescribeForwarded(View(kUnixPeer, ""), unix_only).client, "unix") << "no header";
  EXPECT_EQ(DescribeForwarded(View(kUnixPeer, "X-Forwarded-For: junk\r\n"), unix_only).client,
            "unix")
      << "nothing usable: the peer";
  ForwardAuth unix_and_inner = Trusting({"10.0.0.0/8"});
  unix_and_inner.trust_unix = true;
  EXPECT_EQ(DescribeForwarded(View(kUnixPeer, "X-Forwarded-For: 198.51.100.4, 10.1.1.1\r\n"),
                              unix_and_inner)
                .client,
            "198.51.100.4")
      << "past the socket and a trusted inner proxy";
  // Trusting `unix` trusts no TCP peer.
  EXPECT_EQ(DescribeForwarded(View("127.0.0.1", lines), unix_only).client, "127.0.0.1");
}

TEST(ForwardedRequest, ThroughTrustedProxiesTheRightmostUntrustedAddressIsTheClient) {
  const ForwardAuth fa = Trusting({"10.0.0.0/8", "127.0.0.1", "2001:db8::/32"});
  // The client sent "6.6.6.6" itself; the edge proxy appended 203.0.113.5, an inner proxy
  // 10.1.1.1.
  EXPECT_EQ(DescribeForwarded(View("127.0.0.1",
                                   "X-Forwarded-For: 6.6.6.6, 203.0.113.5, "
                                   "10.1.1.1\r\n"),
                              fa)
                .client,
            "203.0.113.5");
  // The same spread over two lines.
  EXPECT_EQ(DescribeForwarded(View("127.0.0.1",
                                   "X-Forwarded-For: 6.6.6.6\r\n"
                                   "X-Forwarded-For: 203.0.113.5,10.1.1.1\r\n"),
                              fa)
                .client,
            "203.0.113.5");
  EXPECT_EQ(DescribeForwarded(View("2001:db8::5",
                                   "X-Forwarded-For: [2001:DB8:1::9]:443, "
                                   "2001:db8::7\r\n"),
                              fa)
                .client,
            "2001:db8:1::9")
      << "every address trusted: the leftmost";
  EXPECT_EQ(
      DescribeForwarded(View("10.0.0.2", "X-Forwarded-For: 10.0.0.3, 10.0.0.4\r\n"), fa).client,
      "10.0.0.3")
      << "every address trusted: the leftmost";
  EXPECT_EQ(DescribeForwarded(View("10.0.0.2", ""), fa).client, "10.0.0.2")
      << "no header: the peer";
  EXPECT_EQ(
      DescribeForwarded(View("10.0.0.2", "X-Forwarded-For: 203.0.113.1, junk, 10.0.0.9\r\n"), fa)
          .client,
      "10.0.0.9")
      << "a malformed entry stops the walk at the last good address";
  EXPECT_EQ(
      DescribeForwarded(View("::ffff:127.0.0.1", "X-Forwarded-For: 203.0.113.8\r\n"), fa).client,
      "203.0.113.8")
      << "a mapped IPv4 peer is the IPv4 address it maps";
}

TEST(ForwardedRequest, MethodUriAndHostComeFromTheProxysHeadersInOrderOfPrecedence) {
  const ForwardAuth fa;
  // Traefik and Caddy.
  auto f = DescribeForwarded(View("127.0.0.1",
                                  "X-Forwarded-Method: POST\r\nX-Forwarded-Uri: /v1/pay?x=1\r\n"
                                  "X-Forwarded-Host: Shop.Example:8443\r\nHost: sluiced\r\n"
                                  "X-Original-URI: /ignored\r\n"),
                             fa);
  EXPECT_EQ(f.method, "POST");
  EXPECT_EQ(f.path, "/v1/pay");
  EXPECT_EQ(f.query, "x=1");
  EXPECT_EQ(f.host, "shop.example");
  // The nginx recipe.
  f = DescribeForwarded(View("127.0.0.1",
                             "X-Original-Method: DELETE\r\nX-Original-URI: /items/7\r\n"
                             "Host: [::1]:8080\r\n"),
                        fa);
  EXPECT_EQ(f.method, "DELETE");
  EXPECT_EQ(f.path, "/items/7");
  EXPECT_EQ(f.query, "");
  EXPECT_EQ(f.host, "[::1]");
  // Envoy ext_authz (HTTP): the original request line itself.
  f = DescribeForwarded(View("127.0.0.1", "Host: api.example\r\n", "/orders?page=2", "PUT"), fa);
  EXPECT_EQ(f.method, "PUT");
  EXPECT_EQ(f.path, "/orders");
  EXPECT_EQ(f.query, "page=2");
  EXPECT_EQ(f.host, "api.example");
}

// What a client can put in the headers a proxy passes on: long, empty, odd lists. Each answer
// is an address from the list or the peer, never a crash or a stray value.
TEST(ForwardedRequest, HostileForwardedForListsAreReadSafely) {
  const ForwardAuth fa = Trusting({"127.0.0.1"});
  std::string many = "X-Forwarded-For: ";
  for (int i = 0; i < 3000; ++i) many += ",,";
  many += "198.51.100.4\r\n";
  EXPECT_EQ(DescribeForwarded(View("127.0.0.1", many), fa).client, "198.51.100.4");
  EXPECT_EQ(DescribeForwarded(View("127.0.0.1", "X-Forwarded-For: , ,\t,\r\n"), fa).client,
            "127.0.0.1");
  EXPECT_EQ(DescribeForwarded(View("127.0.0.1", "X-Forwarded-For: \xff\xfe, [::1\r\n"), fa).client,
            "127.0.0.1");
  EXPECT_EQ(DescribeForwarded(View("127.0.0.1", "X-Forwarded-For:\r\n"), fa).client, "127.0.0.1");
  EXPECT_EQ(DescribeForwarded(View("not-an-ip", "X-Forwarded-For: 1.2.3.4\r\n"), fa).client, "");
  const auto f = DescribeForwarded(View("127.0.0.1",
                                        "X-Forwarded-Uri: ?only=query\r\n"
                                        "X-Forwarded-Host: [::1\r\n"),
                                   fa);
  EXPECT_FALSE(f.path.has_value()) << "a target without a path has no canonical path";
  EXPECT_EQ(f.query, "only=query");
  EXPECT_EQ(f.host, "");
  EXPECT_TRUE(f.host_invalid);
}

// The path and host are canonical (util/canonical_path.h, util/canonical_host.h), with the
// section's normalize options; the query is the target's, without a fragment.
TEST(ForwardedRequest, PathAndHostAreCanonical) {
  ForwardAuth fa;
  auto f = DescribeForwarded(View("127.0.0.1",
                                  "X-Forwarded-Uri: http://h/v1/./x/..//%73earch;a/?q=1#f\r\n"
                                  "X-Forwarded-Host: Shaped.Example.:443\r\n"),
                             fa);
  EXPECT_EQ(f.path, "/v1/search;a/");
  EXPECT_EQ(f.query, "q=1");
  EXPECT_EQ(f.host, "shaped.example");
  EXPECT_FALSE(f.host_invalid);
  fa.normalize = {.trailing_slash = util::PathNormalize::TrailingSlash::kStrip,
                  .path_params = util::PathNormalize::PathParams::kStrip,
                  .path_case = util::PathNormalize::PathCase::kLower};
  f = DescribeForwarded(View("127.0.0.1", "Host: [2001:DB8::0:1]:80\r\n", "/V1/Search;a/?q"), fa);
  EXPECT_EQ(f.path, "/v1/search");
  EXPECT_EQ(f.query, "q");
  EXPECT_EQ(f.host, "[2001:db8::1]");
  f = DescribeForwarded(View("127.0.0.1", "Host: bad host\r\n", "/v1/%zz"), fa);
  ASSERT_FALSE(f.path.has_value());
  EXPECT_NE(f.path.error().find("bad percent-escape '%zz'"), std::string::npos) << f.path.error();
  EXPECT_EQ(f.host, "");
  EXPECT_TRUE(f.host_invalid);
  // No host at all is not an invalid one.
  f = DescribeForwarded(View("127.0.0.1", ""), fa);
  EXPECT_FALSE(f.host_invalid);
}

ForwardAuth WithActions(std::vector<std::vector<ForwardAuthEntry>> actions) {
  ForwardAuth fa = Trusting({"127.0.0.1"});
  for (auto& a : actions) fa.actions.push_back({std::move(a)});
  return fa;
}

std::vector<Entries> Descriptors(const ForwardAuth& fa, const HttpRequestView& view) {
  std::vector<Entries> out;
  for (const CheckDescriptor& d : ForwardedDescriptors(DescribeForwarded(view, fa), view, fa)) {
    out.push_back(d.entries);
  }
  return out;
}

TEST(ForwardedDescriptors, OnePerCompleteActionWithEntriesInOrder) {
  const ForwardAuthEntry ip{RequestField::kRemoteAddress, "remote_address", "", ""};
  const ForwardAuthEntry key{RequestField::kHeader, "api_key", "X-Api-Key", ""};
  const ForwardAuthEntry path{RequestField::kPath, "path", "", ""};
  const ForwardAuthEntry method{RequestField::kMethod, "method", "", ""};
  const ForwardAuthEntry host{RequestField::kHost, "host", "", ""};
  const ForwardAuthEntry tenant{RequestField::kQuery, "tenant", "tenant", ""};
  const ForwardAuthEntry generic{RequestField::kGenericKey, "generic_key", "", "search"};
  const ForwardAuth fa =
      WithActions({{ip}, {key, path, method}, {host, generic}, {tenant}, {key, tenant}});

  const auto all = Descriptors(
      fa,
      View("127.0.0.1",
           "X-Forwarded-For: 203.0.113.9\r\nX-Api-Key: k1\r\nX-Forwarded-Method: GET\r\n"
           "X-Forwarded-Uri: /search?q=a&tenant=acme%20co\r\nX-Forwarded-Host: api.example\r\n"));
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0], (Entries{{"remote_address", "203.0.113.9"}}));
  EXPECT_EQ(all[1], (Entries{{"api_key", "k1"}, {"path", "/search"}, {"method", "GET"}}));
  EXPECT_EQ(all[2], (Entries{{"host", "api.example"}, {"generic_key", "search"}}));
  EXPECT_EQ(all[3], (Entries{{"tenant", "acme co"}}));
  EXPECT_EQ(all[4], (Entries{{"api_key", "k1"}, {"tenant", "acme co"}}));

  // No key, no tenant, no host: only the address and the generic key's action... which needs
  // the host too, so only the address.
  const auto bare = Descriptors(fa, View("127.0.0.1", "X-Forwarded-Uri: /search\r\n"));
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_EQ(bare[0], (Entries{{"remote_address", "127.0.0.1"}}));
  // An empty header is as good as none; a query that does not decode has no parameters.
  EXPECT_EQ(
      Descriptors(fa, View("127.0.0.1", "X-Api-Key:\r\nX-Forwarded-Uri: /s?tenant=%G1\r\n")).size(),
      1u);
  // No peer address (no socket): no remote_address.
  EXPECT_TRUE(Descriptors(WithActions({{ip}}), View("", "")).empty());
}

// ForwardAuthApi over the real service: the limit is the config's number, exactly.
constexpr char kConfig[] = R"yaml(
domain: api
forward_auth:
  trusted_proxies: [127.0.0.1]
  actions:
    - [remote_address]
    - [{header: X-Api-Key, key: api_key}]
descriptors:
  - key: remote_address
    rate_limit: {name: per_ip, unit: minute, requests_per_unit: 3, algorithm: fixed_window}
  - key: api_key
    rate_limit: {name: per_key, unit: minute, requests_per_unit: 100, algorithm: fixed_window}
)yaml";

std::string Header(const HttpReply& r, std::string_view name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "<absent>";
}

class ForwardAuthApiTest : public ::testing::Test {
 protected:
  void Start(const std::vector<std::pair<std::string, std::string>>& files,
             HeaderOptions headers = {}) {
    for (const auto& [name, yaml] : files) dir_.Write(name, yaml);
    auto config = LoadConfig(dir_.path());
    ASSERT_TRUE(config.has_value()) << config.error().message;
    ServiceOptions options;
    options.clock = &clock_;
    auto opened = OpenStore("memory");
    ASSERT_TRUE(opened.has_value()) << opened.error().message;
    auto service = RateLimitService::Create(*config, *opened, options, &metrics_);
    ASSERT_TRUE(service.has_value()) << service.error().message;
    service_ = std::move(*service);
    api_ = std::make_unique<ForwardAuthApi>(service_.get(), &metrics_,
                                            ForwardAuthOptions{.headers = headers});
  }
  HttpReply Ask(std::string_view peer, std::string_view lines) const {
    return api_->Handle(View(peer, lines));
  }
  std::string Metric(std::string_view result) const {
    const std::string text = metrics_.Render();
    const std::string series =
        "sluice_forward_auth_requests_total{result=\"" + std::string(result) + "\"} ";
    const size_t at = text.find(series);
    if (at == std::string::npos) return "<absent>";
    return text.substr(at + series.size(), text.find('\n', at) - at - series.size());
  }

  // Minute-aligned, so the fixed windows do not roll over inside a test.
  ManualClock clock_{FromNanos(int64_t{28'333'333} * 60 * 1'000'000'000)};
  Metrics metrics_;
  test::TempConfigDir dir_{"fauth"};
  std::unique_ptr<RateLimitService> service_;
  std::unique_ptr<ForwardAuthApi> api_;
};

TEST_F(ForwardAuthApiTest, AllowsExactlyTheLimitThenAnswers429WithTheFields) {
  Start({{"api.yaml", kConfig}}, {.legacy = true});
  for (int i = 1; i <= 3; ++i) {
    const HttpReply r = Ask("127.0.0.1", "X-Forwarded-For: 203.0.113.9\r\n");
    ASSERT_EQ(r.status, 200) << "request " << i;
    EXPECT_EQ(r.body, "");
    EXPECT_EQ(Header(r, "RateLimit-Policy"), "\"per_ip\";q=3;w=60");
    EXPECT_EQ(Header(r, "RateLimit").substr(0, 12), "\"per_ip\";r=" + std::to_string(3 - i));
    EXPECT_EQ(Header(r, "X-RateLimit-Limit"), "3");
  }
  const HttpReply over = Ask("127.0.0.1", "X-Forwarded-For: 203.0.113.9\r\n");
  EXPECT_EQ(over.status, 429);
  EXPECT_EQ(Header(over, "Retry-After"), "60");  // the fixed window ends a minute from its start
  EXPECT_EQ(Header(over, "RateLimit-Policy"), "\"per_ip\";q=3;w=60");
  EXPECT_EQ(over.body,
            "Too many requests: over the rate limit 'per_ip' (3 per minute); retry in 60 s.\n");
  // Another client, and the same client spoofing X-Forwarded-For from outside, are others.
  EXPECT_EQ(Ask("127.0.0.1", "X-Forwarded-For: 203.0.113.10\r\n").status, 200);
  EXPECT_EQ(Ask("198.51.100.1", "X-Forwarded-For: 203.0.113.9\r\n").status, 200);
  EXPECT_EQ(Metric("allowed"), "5");
  EXPECT_EQ(Metric("over_limit"), "1");
}

TEST_F(ForwardAuthApiTest, ARequestWithoutDescriptorsIsAllowedAndCounted) {
  Start({{"api.yaml", R"yaml(
domain: api
forward_auth:
  actions:
    - [{header: X-Api-Key, key: api_key}]
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 1}
)yaml"}});
  for (int i = 0; i < 3; ++i) {
    const HttpReply r = Ask("203.0.113.9", "");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(Header(r, "RateLimit"), "<absent>");
  }
  EXPECT_EQ(Metric("no_descriptor"), "3");
  EXPECT_EQ(Ask("203.0.113.9", "X-Api-Key: k\r\n").status, 200);
  EXPECT_EQ(Ask("203.0.113.9", "X-Api-Key: k\r\n").status, 429);
}

// A proxy's forward-auth has no release: a concurrency rule is skipped (allowed) and counted
// (docs/load-protection.md), while the rate limit beside it still counts.
TEST_F(ForwardAuthApiTest, ConcurrencyRulesAreSkippedAndCounted) {
  Start({{"api.yaml", R"yaml(
domain: api
forward_auth:
  actions:
    - [{header: X-Api-Key, key: api_key}]
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: fixed_window}
    concurrency: {max_in_flight: 1, permit_ttl: 30s}
)yaml"}});
  EXPECT_EQ(Ask("203.0.113.9", "X-Api-Key: k\r\n").status, 200);
  EXPECT_EQ(Ask("203.0.113.9", "X-Api-Key: k\r\n").status, 200) << "max_in_flight 1: skipped";
  EXPECT_EQ(Ask("203.0.113.9", "X-Api-Key: k\r\n").status, 429) << "the rate limit counts";
  EXPECT_NE(metrics_.Render().find("sluice_descriptors_unchecked_total{reason=\"concurrency\"} 3"),
            std::string::npos);
}

TEST_F(ForwardAuthApiTest, SeveralDomainsNeedSluiceDomain) {
  std::string other = kConfig;
  other.replace(other.find("domain: api"), 11, "domain: web");
  Start({{"api.yaml", kConfig}, {"web.yaml", other}, {"plain.yaml", R"yaml(
domain: plain
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
)yaml"}});
  HttpReply r = Ask("127.0.0.1", "");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("Sluice-Domain"), std::string::npos) << r.body;
  r = Ask("127.0.0.1", "Sluice-Domain: plain\r\n");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("no domain 'plain' with a forward_auth section"), std::string::npos);
  EXPECT_EQ(Metric("bad_request"), "2");
  // Each domain counts on its own: three each.
  for (const char* domain : {"api", "web"}) {
    const std::string lines = std::string("Sluice-Domain: ") + domain + "\r\n";
    for (int i = 0; i < 3; ++i) EXPECT_EQ(Ask("127.0.0.1", lines).status, 200) << domain;
    EXPECT_EQ(Ask("127.0.0.1", lines).status, 429) << domain;
  }
}

TEST_F(ForwardAuthApiTest, NoDomainWithTheSectionIsABadRequestNotACrash) {
  Start({{"plain.yaml", "domain: plain\ndescriptors: []\n"}});
  const HttpReply r = Ask("127.0.0.1", "");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, "sluice forward-auth: no domain of the config has a forward_auth section\n");
}

// Issue 29: one path, however a client spells it, is one counter; a path with no canonical form
// is refused and counted as bad_request, never passed unlimited.
constexpr char kPathConfig[] = R"yaml(
domain: api
forward_auth:
  actions:
    - [{header: X-Api-Key, key: api_key}, path]
    - [host]
descriptors:
  - key: api_key
    descriptors:
      - key: path
        value: /v1/search
        rate_limit: {name: search, unit: minute, requests_per_unit: 3, algorithm: fixed_window}
  - key: host
    value: shaped.example
    rate_limit: {name: shaped, unit: minute, requests_per_unit: 2, algorithm: fixed_window}
)yaml";

class ForwardAuthPathTest : public ForwardAuthApiTest {
 protected:
  int Status(std::string_view uri, std::string_view key = "k1") const {
    const std::string lines =
        "X-Api-Key: " + std::string(key) + "\r\nX-Forwarded-Uri: " + std::string(uri) + "\r\n";
    return Ask("127.0.0.1", lines).status;
  }
  std::string InvalidHosts() const {
    const std::string text = metrics_.Render();
    const std::string series = "sluice_forward_auth_invalid_host_total ";
    const size_t line = text.find("\n" + series);  // the sample, not # HELP's line
    if (line == std::string::npos) return "<absent>";
    const size_t at = line + 1;
    return text.substr(at + series.size(), text.find('\n', at) - at - series.size());
  }
};

TEST_F(ForwardAuthPathTest, EverySpellingSharesTheOneLimitByDefault) {
  Start({{"api.yaml", kPathConfig}});
  const std::vector<std::string_view> spellings = {
      "/v1/%73earch", "/v1//search",  "/v1/./search",       "/v1/../v1/search",
      "//v1/search",  "/v1/search#f", "http://h/v1/search", "/v1/search"};
  for (std::string_view s : spellings) {
    // A fresh key each round: its first three are allowed whatever the spelling, the fourth
    // (each spelling in turn) refused.
    const std::string key = "key-" + std::string(s);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(Status("/v1/search", key), 200) << s;
    EXPECT_EQ(Status(s, key), 429) << s << " escaped the limit";
  }
  // Routers disagree on these: by default each is a path of its own, which no rule limits.
  for (std::string_view s : {"/v1/search/", "/v1/search;a", "/V1/search", "/v1/searchx"}) {
    for (int i = 0; i < 5; ++i) EXPECT_EQ(Status(s), 200) << s;
  }
  EXPECT_EQ(Metric("over_limit"), std::to_string(spellings.size()));
}

TEST_F(ForwardAuthPathTest, TheNormalizeOptionsFoldWhatRoutersFold) {
  std::string config = kPathConfig;
  config.replace(config.find("  actions:"), 0,
                 "  normalize: {trailing_slash: strip, path_params: strip, path_case: lower}\n");
  Start({{"api.yaml", config}});
  EXPECT_EQ(Status("/v1/search/"), 200);
  EXPECT_EQ(Status("/v1/search;a"), 200);
  EXPECT_EQ(Status("/V1/search"), 200);
  EXPECT_EQ(Status("/v1/%53EARCH;x=1/"), 429);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Status("/v1/searchx"), 200);
}

TEST_F(ForwardAuthPathTest, APathWithNoCanonicalFormIsABadRequest) {
  Start({{"api.yaml", kPathConfig}});
  for (std::string_view s : {"/v1/%zzsearch", "/v1/search%", "/v1/%00search", "v1/search"}) {
    const std::string lines = "X-Api-Key: k1\r\nX-Forwarded-Uri: " + std::string(s) + "\r\n";
    const HttpReply r = Ask("127.0.0.1", lines);
    EXPECT_EQ(r.status, 400) << s;
    EXPECT_TRUE(r.body.starts_with("sluice forward-auth: no canonical path: ")) << r.body;
  }
  EXPECT_EQ(Metric("bad_request"), "4");
  // Where no action reads the path, its spelling is not judged.
  Start({{"api.yaml", kConfig}});
  EXPECT_EQ(Ask("127.0.0.1", "X-Forwarded-Uri: /v1/%zz\r\n").status, 200);
}

TEST_F(ForwardAuthPathTest, AHostWithATrailingDotIsTheHostAndAnInvalidOneIsCounted) {
  Start({{"api.yaml", kPathConfig}});
  const auto host = [&](std::string_view h) {
    return Ask("127.0.0.1", "X-Forwarded-Host: " + std::string(h) + "\r\n").status;
  };
  EXPECT_EQ(host("shaped.example"), 200);
  EXPECT_EQ(host("Shaped.Example.:8443"), 200);
  EXPECT_EQ(host("shaped.example."), 429);
  EXPECT_EQ(InvalidHosts(), "0");
  // Not a name: no host entry (no descriptor at all here), counted.
  EXPECT_EQ(host("shaped.example.."), 200);
  EXPECT_EQ(host("shaped example"), 200);
  EXPECT_EQ(InvalidHosts(), "2");
  EXPECT_EQ(Metric("no_descriptor"), "2");
}

// A shaper: the 200 is held (send_at) for the request's place in the queue, counted from when
// the check was asked; one that would wait over max_delay is 429 at once. The manual clock
// stands still, so the k-th request of one client waits k release intervals (20/s: 50 ms), the
// schedule nginx limit_req keeps; 1 s of max_delay admits 21 (waits 0 to 1000 ms).
TEST_F(ForwardAuthApiTest, AShapersAnswerIsHeldForItsDelayAndBeyondMaxDelayRefusedAtOnce) {
  Start({{"api.yaml", R"yaml(
domain: api
forward_auth:
  actions:
    - [remote_address]
descriptors:
  - key: remote_address
    rate_limit: {name: paced, unit: second, requests_per_unit: 20, algorithm: leaky_bucket,
                 burst: 40, shaper: true, max_delay: 1s}
)yaml"}});
  using Steady = std::chrono::steady_clock;
  for (int k = 0; k <= 20; ++k) {
    const Steady::time_point before = Steady::now();
    const HttpReply r = Ask("203.0.113.9", "");
    const Steady::time_point after = Steady::now();
    ASSERT_EQ(r.status, 200) << "request " << k << ": " << r.body;
    const auto wait = std::chrono::milliseconds(50 * k);
    if (k == 0) {
      EXPECT_EQ(r.send_at, Steady::time_point{}) << "the first is not held";
      continue;
    }
    EXPECT_GE(r.send_at, before + wait) << "request " << k;
    EXPECT_LE(r.send_at, after + wait) << "request " << k;
  }
  const HttpReply over = Ask("203.0.113.9", "");
  EXPECT_EQ(over.status, 429);
  EXPECT_EQ(over.send_at, Steady::time_point{}) << "a refusal is not held";
  // Another client has a queue of its own.
  EXPECT_EQ(Ask("203.0.113.10", "").send_at, Steady::time_point{});
}

}  // namespace
}  // namespace sluice::server
