// Fuzz target: what Redis Sentinel and a would-be master answer, as sluice reads it. The bytes
// are what a sentinel (or whatever answers on its port) sends; hiredis' reader turns them into
// replies (with BoundReplies, as on a live connection), and each reply goes through
// ReadMasterAddress (SENTINEL get-master-addr-by-name), SaysMaster (ROLE) and ReadMessage plus
// ReadSwitchMaster (a +switch-master push). The raw bytes are also read as a +switch-master
// payload for the master named by their first word. Checks, besides "no crash, no UB":
// - an accepted master address is the reply's two strings: the host as sent, the port their
//   decimal value in 1..65535;
// - SaysMaster holds only for an array whose first element is the string "master";
// - an accepted switch names the master asked about and is the payload's last two fields, of
//   exactly five separated by single spaces.
#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "store/redis/redis_client.h"
#include "store/redis/redis_reply.h"
#include "store/redis/sentinel_reply.h"

namespace {

using sluice::internal::MasterAddress;
using sluice::internal::RedisReply;

void CheckAddress(const MasterAddress& a, std::string_view host, std::string_view port) {
  FUZZ_CHECK(a.host == host);
  FUZZ_CHECK(!a.host.empty() && a.host.find(' ') == std::string::npos);
  FUZZ_CHECK(a.port >= 1 && a.port <= 65535);
  FUZZ_CHECK(std::to_string(a.port) == std::string(port).erase(0, port.find_first_not_of('0')));
}

void CheckSwitch(std::string_view payload, std::string_view master) {
  const auto address = sluice::internal::ReadSwitchMaster(payload, master);
  if (!address) return;
  FUZZ_CHECK(payload.starts_with(std::string(master) + " "));
  size_t spaces = 0;
  for (char c : payload) spaces += c == ' ' ? 1 : 0;
  FUZZ_CHECK(spaces == 4);
  const size_t last = payload.rfind(' ');
  const size_t before = payload.rfind(' ', last - 1);
  CheckAddress(*address, payload.substr(before + 1, last - before - 1), payload.substr(last + 1));
}

void CheckReply(const RedisReply& reply) {
  if (auto address = sluice::internal::ReadMasterAddress(reply, "mymaster")) {
    FUZZ_CHECK(reply.type == RedisReply::Type::kArray && reply.elements.size() == 2);
    CheckAddress(*address, reply.elements[0].str, reply.elements[1].str);
  }
  if (sluice::internal::SaysMaster(reply)) {
    FUZZ_CHECK(reply.type == RedisReply::Type::kArray && !reply.elements.empty());
    FUZZ_CHECK(reply.elements[0].type == RedisReply::Type::kString);
    FUZZ_CHECK(reply.elements[0].str == "master");
  }
  if (auto payload = sluice::internal::ReadMessage(reply, sluice::internal::kSwitchMasterChannel)) {
    FUZZ_CHECK(reply.elements.size() == 3 && reply.elements[2].str == *payload);
    CheckSwitch(*payload, "mymaster");
    CheckSwitch(*payload, payload->substr(0, payload->find(' ')));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(bytes), size);
  CheckSwitch(raw, raw.substr(0, raw.find(' ')));
  redisReader* reader = redisReaderCreate();
  FUZZ_CHECK(reader != nullptr);
  sluice::internal::BoundReplies(reader);  // as every connection's reader
  if (redisReaderFeed(reader, raw.data(), raw.size()) == REDIS_OK) {
    for (int n = 0; n < 64; ++n) {
      void* reply = nullptr;
      if (redisReaderGetReply(reader, &reply) != REDIS_OK || reply == nullptr) break;
      CheckReply(sluice::internal::CopyReply(static_cast<const redisReply*>(reply)));
      freeReplyObject(reply);
    }
  }
  redisReaderFree(reader);
  return 0;
}
