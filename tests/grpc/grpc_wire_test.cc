// Wire compatibility without sluice's .proto: the request is encoded by hand with the field
// numbers and types Envoy's published API gives, sent as raw bytes to the method's path (as
// grpcurl or Envoy would), and the response is decoded by hand the same way. A wrong number or
// type in proto/ fails here even though the generated client would agree with the server.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "grpc/grpc_test_util.h"

namespace sluice::server::test {
namespace {

// --- A minimal protobuf wire codec ----------------------------------------------------------

enum WireType : uint32_t { kVarint = 0, kLen = 2 };

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void PutTag(std::string& out, uint32_t field, WireType type) { PutVarint(out, field << 3 | type); }
void PutUint(std::string& out, uint32_t field, uint64_t v) {
  PutTag(out, field, kVarint);
  PutVarint(out, v);
}
void PutBytes(std::string& out, uint32_t field, const std::string& bytes) {
  PutTag(out, field, kLen);
  PutVarint(out, bytes.size());
  out += bytes;
}

// One message's fields: number -> values in order (varints as numbers, the rest as bytes).
struct Fields {
  std::map<uint32_t, std::vector<uint64_t>> varints;
  std::map<uint32_t, std::vector<std::string>> bytes;
  bool ok = true;
};

Fields Decode(const std::string& in) {
  Fields f;
  size_t i = 0;
  auto varint = [&](uint64_t& v) {
    v = 0;
    for (int shift = 0; i < in.size() && shift < 64; shift += 7) {
      const auto b = static_cast<uint8_t>(in[i++]);
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  };
  while (i < in.size()) {
    uint64_t tag = 0;
    uint64_t v = 0;
    if (!varint(tag)) return f.ok = false, f;
    const auto field = static_cast<uint32_t>(tag >> 3);
    if ((tag & 7) == kVarint) {
      if (!varint(v)) return f.ok = false, f;
      f.varints[field].push_back(v);
    } else if ((tag & 7) == kLen) {
      if (!varint(v) || v > in.size() - i) return f.ok = false, f;
      f.bytes[field].push_back(in.substr(i, v));
      i += v;
    } else {
      return f.ok = false, f;  // sluiced sends no fixed-width fields
    }
  }
  return f;
}

// --- Envoy's field numbers ---------------------------------------------------------------------

std::string Entry(const std::string& key, const std::string& value) {
  std::string e;
  PutBytes(e, 1, key);    // RateLimitDescriptor.Entry.key
  PutBytes(e, 2, value);  // RateLimitDescriptor.Entry.value
  return e;
}

class GrpcWireTest : public GrpcServerTest {
 protected:
  // Sends raw bytes to ShouldRateLimit; returns the status and the raw response.
  grpc::Status RawCall(const std::string& request, std::string* response) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Slice slice(request);
    grpc::ByteBuffer in(&slice, 1);
    grpc::ByteBuffer out;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&ctx, "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
                   grpc::StubOptions(), &in, &out,
                   [&](grpc::Status s) { done.set_value(std::move(s)); });
    grpc::Status status = done.get_future().get();
    std::vector<grpc::Slice> slices;
    if (status.ok() && out.Dump(&slices).ok()) {
      for (const auto& s : slices)
        response->append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    return status;
  }
};

TEST_F(GrpcWireTest, RequestFieldNumbers) {
  std::string override;
  PutUint(override, 1, 30);  // RateLimitOverride.requests_per_unit
  PutUint(override, 2, 2);   // RateLimitOverride.unit = MINUTE
  std::string hits;
  PutUint(hits, 1, 9);  // google.protobuf.UInt64Value.value
  std::string d0;
  PutBytes(d0, 1, Entry("path", "/v1/pay"));  // RateLimitDescriptor.entries
  PutBytes(d0, 1, Entry("method", "POST"));
  PutBytes(d0, 2, override);  // RateLimitDescriptor.limit
  PutBytes(d0, 3, hits);      // RateLimitDescriptor.hits_addend
  std::string d1;
  PutBytes(d1, 1, Entry("ip", "10.0.0.1"));
  std::string request;
  PutBytes(request, 1, "api");  // RateLimitRequest.domain
  PutBytes(request, 2, d0);     // RateLimitRequest.descriptors
  PutBytes(request, 2, d1);
  PutUint(request, 3, 4);  // RateLimitRequest.hits_addend

  std::string response;
  const grpc::Status status = RawCall(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const auto seen = service_.requests();
  ASSERT_EQ(seen.size(), 1u);
  const CheckRequest& got = seen[0];
  EXPECT_EQ(got.domain, "api");
  EXPECT_EQ(got.hits, 4);
  ASSERT_EQ(got.descriptors.size(), 2u);
  using Entries = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(got.descriptors[0].entries, (Entries{{"path", "/v1/pay"}, {"method", "POST"}}));
  EXPECT_EQ(got.descriptors[0].hits, 9);
  ASSERT_TRUE(got.descriptors[0].limit_override.has_value());
  EXPECT_EQ(got.descriptors[0].limit_override->requests_per_unit, 30);
  EXPECT_EQ(got.descriptors[0].limit_override->period.unit, Unit::kMinute);
  EXPECT_EQ(got.descriptors[1].entries, (Entries{{"ip", "10.0.0.1"}}));
  EXPECT_FALSE(got.descriptors[1].hits.has_value());
  EXPECT_FALSE(got.descriptors[1].limit_override.has_value());
}

// Bytes that are no RateLimitRequest are the caller's fault: INVALID_ARGUMENT, never INTERNAL
// (gRPC's own parsing would answer INTERNAL), and the service is not asked.
TEST_F(GrpcWireTest, MalformedRequestsAreInvalidArgument) {
  for (const std::string& bytes : {
           std::string("\x0a\x05"
                       "ab",
                       4),                      // domain: length 5, 2 bytes follow
           std::string("\xff\xff\xff", 3),      // a tag that never ends
           std::string("\x0a\x02\xff\xfe", 4),  // domain: not UTF-8 (a proto3 string)
       }) {
    std::string raw;
    const grpc::Status status = RawCall(bytes, &raw);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  }
  EXPECT_TRUE(service_.requests().empty());
}

TEST_F(GrpcWireTest, ResponseFieldNumbers) {
  CheckResponse decision;
  decision.overall = Code::kOverLimit;
  decision.statuses.push_back(StatusOf(MakeLimit("pay", 5, Unit::kWeek), Code::kOverLimit, 3,
                                       std::chrono::milliseconds(2250)));
  service_.Answer(decision);
  std::string d;
  PutBytes(d, 1, Entry("k", "v"));
  std::string request;
  PutBytes(request, 1, "api");
  PutBytes(request, 2, d);
  std::string raw;
  ASSERT_TRUE(RawCall(request, &raw).ok());

  const Fields response = Decode(raw);
  ASSERT_TRUE(response.ok);
  EXPECT_EQ(response.varints.at(1), std::vector<uint64_t>{2});  // overall_code = OVER_LIMIT
  ASSERT_EQ(response.bytes.at(2).size(), 1u);                   // statuses
  const Fields status = Decode(response.bytes.at(2)[0]);
  EXPECT_EQ(status.varints.at(1), std::vector<uint64_t>{2});           // code = OVER_LIMIT
  EXPECT_EQ(status.varints.at(3), std::vector<uint64_t>{3});           // limit_remaining
  const Fields limit = Decode(status.bytes.at(2).at(0));               // current_limit
  EXPECT_EQ(limit.bytes.at(3), std::vector<std::string>{"pay"});       // name
  EXPECT_EQ(limit.varints.at(1), std::vector<uint64_t>{5});            // requests_per_unit
  EXPECT_EQ(limit.varints.at(2), std::vector<uint64_t>{7});            // unit = WEEK
  const Fields reset = Decode(status.bytes.at(4).at(0));               // duration_until_reset
  EXPECT_EQ(reset.varints.at(1), std::vector<uint64_t>{2});            // seconds
  EXPECT_EQ(reset.varints.at(2), std::vector<uint64_t>{250'000'000});  // nanos

  const auto want = RateLimitHeaders(decision, HeaderOptions{});
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(response.bytes.count(3), 1u);  // response_headers_to_add
  ASSERT_EQ(response.bytes.at(3).size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const Fields header = Decode(response.bytes.at(3)[i]);
    EXPECT_EQ(header.bytes.at(1), std::vector<std::string>{want[i].first});   // key
    EXPECT_EQ(header.bytes.at(2), std::vector<std::string>{want[i].second});  // value
  }
}

TEST_F(GrpcWireTest, UnknownFieldsFromANewerEnvoyAreIgnored) {
  // Fields sluice's .proto leaves out or Envoy may add later must not break parsing.
  std::string d;
  PutBytes(d, 1, Entry("k", "v"));
  PutUint(d, 15, 1);
  std::string request;
  PutBytes(request, 1, "api");
  PutBytes(request, 2, d);
  PutBytes(request, 99, "future");
  std::string raw;
  ASSERT_TRUE(RawCall(request, &raw).ok());
  ASSERT_EQ(service_.requests().size(), 1u);
  EXPECT_EQ(service_.requests()[0].domain, "api");
}

TEST_F(GrpcWireTest, GarbageIsRejectedWithoutReachingTheService) {
  std::string raw;
  const grpc::Status status = RawCall(std::string("\xff\xff\xff", 3), &raw);
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(service_.requests().empty());
}

}  // namespace
}  // namespace sluice::server::test
