// Fuzz target: sluiced's HTTP/1.1 request parser (http/http_request_parser.h) on the bytes a
// connection could receive. Besides "no crash, no UB", it checks:
// - a complete request lies within the bytes: consumed, the body and every view are bounded by
//   the input, and the body by max_body_bytes;
// - the work is linear (examined() stays within a small multiple of the bytes given);
// - resuming is the same as parsing at once: the same bytes split in two calls (a prefix, then
//   all of them) give the outcome one call gives, as a slow client's request must, and a
//   verdict on a prefix (complete, refused) is the verdict on all the bytes;
// - pipelined requests after the first parse the same way;
// - the forward-auth endpoint reads any complete request (http/forwarded_request.h: its header
//   lines as X-Forwarded-For, method, URI, host, headers and query parameters) without a crash,
//   and every descriptor it makes has entries with non-empty values.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "fuzz_check.h"
#include "http/forwarded_request.h"
#include "http/http_request_parser.h"

namespace {

using sluice::server::HttpParseLimits;
using sluice::server::HttpRequestParser;
using sluice::server::ParseOutcome;
using sluice::server::ParseStatus;

// Small limits, so that inputs reach them.
constexpr HttpParseLimits kLimits{
    .max_header_bytes = 1024, .max_body_bytes = 2048, .max_chunk_framing_bytes = 512};

bool Within(std::string_view part, std::string_view whole) {
  return part.empty() ||
         (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

void CheckOutcome(const ParseOutcome& r, std::string_view data) {
  if (r.status == ParseStatus::kBadRequest) FUZZ_CHECK(!r.error.empty());
  if (r.status != ParseStatus::kComplete) return;
  FUZZ_CHECK(r.consumed > 0 && r.consumed <= data.size());
  FUZZ_CHECK(r.request.body.size() <= data.size());
  FUZZ_CHECK(r.request.body.size() <= kLimits.max_body_bytes);
  FUZZ_CHECK(!r.request.method.empty() && !r.request.target.empty());
  FUZZ_CHECK(Within(r.request.method, data.substr(0, r.consumed)));
  FUZZ_CHECK(Within(r.request.target, data.substr(0, r.consumed)));
  FUZZ_CHECK(Within(r.request.authorization, data.substr(0, r.consumed)));
  FUZZ_CHECK(Within(r.request.header_lines, data.substr(0, r.consumed)));
  FUZZ_CHECK(r.request.version == 10 || r.request.version == 11);
}

void CheckSame(const ParseOutcome& a, const ParseOutcome& b) {
  if (a.status != b.status || a.error != b.error) {
    std::fprintf(stderr, "outcomes differ: status %d '%.*s' and %d '%.*s'\n",
                 static_cast<int>(a.status), static_cast<int>(a.error.size()), a.error.data(),
                 static_cast<int>(b.status), static_cast<int>(b.error.size()), b.error.data());
  }
  FUZZ_CHECK(a.status == b.status);
  FUZZ_CHECK(a.error == b.error);
  if (a.status != ParseStatus::kComplete) return;
  FUZZ_CHECK(a.consumed == b.consumed);
  FUZZ_CHECK(a.request.method == b.request.method);
  FUZZ_CHECK(a.request.target == b.request.target);
  FUZZ_CHECK(a.request.authorization == b.request.authorization);
  FUZZ_CHECK(a.request.header_lines == b.request.header_lines);
  FUZZ_CHECK(a.request.body == b.request.body);
  FUZZ_CHECK(a.request.version == b.request.version);
  FUZZ_CHECK(a.request.keep_alive == b.request.keep_alive);
}

// Every kind of entry, and every address trusted, so that the whole X-Forwarded-For is walked.
const sluice::server::ForwardAuth& EveryEntry() {
  using sluice::server::RequestField;
  static const sluice::server::ForwardAuth fa = [] {
    sluice::server::ForwardAuth f;
    f.trusted_proxies = {*sluice::util::ParseIpNetwork("0.0.0.0/0"),
                         *sluice::util::ParseIpNetwork("::/0")};
    f.actions.push_back({{{RequestField::kRemoteAddress, "remote_address", "", ""},
                          {RequestField::kMethod, "method", "", ""},
                          {RequestField::kHost, "host", "", ""},
                          {RequestField::kPath, "path", "", ""}}});
    f.actions.push_back({{{RequestField::kHeader, "k", "X-Api-Key", ""},
                          {RequestField::kQuery, "q", "tenant", ""}}});
    return f;
  }();
  return fa;
}

void CheckForwarded(const sluice::server::ParsedRequest& r) {
  sluice::server::HttpRequestView view;
  view.method = r.method;
  view.target = r.target;
  view.header_lines = r.header_lines;
  view.peer = "127.0.0.1";
  const auto forwarded = sluice::server::DescribeForwarded(view, EveryEntry());
  for (const auto& d : sluice::server::ForwardedDescriptors(forwarded, view, EveryEntry())) {
    for (const auto& [key, value] : d.entries) FUZZ_CHECK(!key.empty() && !value.empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  std::string_view data(reinterpret_cast<const char*>(bytes), size);
  for (int pipelined = 0; pipelined < 8 && !data.empty(); ++pipelined) {
    HttpRequestParser at_once(kLimits);
    const ParseOutcome whole = at_once.Parse(data);
    CheckOutcome(whole, data);
    if (whole.status == ParseStatus::kComplete) CheckForwarded(whole.request);
    FUZZ_CHECK(at_once.examined() <= 2 * data.size() + 64);

    // The same bytes in two calls, split where the input says (its bytes are a cheap hash).
    const size_t split = (data.size() * 7 + static_cast<unsigned char>(data.back())) % data.size();
    HttpRequestParser resumed(kLimits);
    const ParseOutcome first = resumed.Parse(data.substr(0, split));
    CheckOutcome(first, data.substr(0, split));
    if (first.status == ParseStatus::kIncomplete) {
      const ParseOutcome second = resumed.Parse(data);
      CheckOutcome(second, data);
      CheckSame(second, whole);
      FUZZ_CHECK(resumed.examined() <= 3 * data.size() + 128);
    } else {
      // A verdict on a prefix stands: more bytes after a complete request change nothing, and
      // what is wrong in the first bytes is wrong however many follow.
      CheckSame(first, whole);
    }
    if (whole.status != ParseStatus::kComplete) break;
    data.remove_prefix(whole.consumed);
  }
  return 0;
}
