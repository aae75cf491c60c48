// A permit table's part of a snapshot (snapshot_format.h, the permits section): the permits
// live when it is saved, and put back into a new process's table of the same pool id. Internal
// to the memory store.
//
// Time: an expiry is an instant of the store's clock, saved as the wall-clock instant (adding
// `to_wall`, as a bucket's instants are: state_codec.h) and loaded back onto the new process's
// clock (subtracting its own). The time sluiced is down passes for the permits too: one whose
// expiry has passed by then is dropped.
#ifndef SLUICE_STORE_MEMORY_PERMIT_SNAPSHOT_H_
#define SLUICE_STORE_MEMORY_PERMIT_SNAPSHOT_H_

#include <cstdint>
#include <string>

#include "sluice/memory_store.h"
#include "store/memory/permit_table.h"
#include "store/memory/snapshot_format.h"

namespace sluice::internal {

// Writes a permits section for the permits of `table` live at `now`, unless there are none.
// Returns how many it wrote.
uint64_t SavePermitSection(const std::string& id, const PermitTable& table, Timestamp now,
                           int64_t to_wall_ns, SnapshotWriter& out);

// Holds the permits of `section` in `table` again, counting them in `counts` (those expired at
// `now`, or that the table's bytes leave no room for, are dropped).
void RestorePermitSection(const PermitSection& section, PermitTable& table, Timestamp now,
                          int64_t to_wall_ns, SnapshotRestored& counts);

}  // namespace sluice::internal

#endif  // SLUICE_STORE_MEMORY_PERMIT_SNAPSHOT_H_
