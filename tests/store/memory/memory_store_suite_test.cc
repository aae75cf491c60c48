// The memory store in the store suite (tests/store/store_suite.h), opened as sluiced opens
// `--store memory`: OpenStore("memory"). Once, in sync mode exact: the memory store has no
// counters to share, so it ignores a limit's sync mode (docs/redis.md, "Three ways to share a
// limit"), and the other modes would run the same store through the same code.
#include <string>

#include "store/open_store_under_test.h"
#include "store/store_suite.h"

namespace sluice::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(OpenStore, StoreSuite,
                         ::testing::Values(ThroughOpenStore(
                             "memory", [] { return std::string("memory"); }, nullptr,
                             SyncMode::kExact)),
                         StoreSuiteName);

}  // namespace
}  // namespace sluice::testing
