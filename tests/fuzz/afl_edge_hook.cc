// Coverage for AFL++ from GCC's own instrumentation. Debian 12's afl++ 4.04c ships a GCC plugin
// (afl-g++-fast) built against an earlier gcc-12 than the one Debian 12 now has, and the plugin
// refuses to load ("GCC and plugin have incompatible versions"); its clang modes cannot compile
// libstdc++ 12's std::expected. So `make fuzz` compiles sluice with GCC's
// -fsanitize-coverage=trace-pc, which calls this hook at the start of every basic block, and the
// hook records the edge (previous block, this block) in AFL++'s shared coverage map the way
// AFL's instrumentation does. The map and the fork server come from AFL++'s runtime
// (afl-compiler-rt.o), the main loop from its libAFLDriver.a.
#include <cstdint>

extern "C" uint8_t* __afl_area_ptr;  // AFL++'s runtime: the coverage map of the current run

namespace {
// The previous block's id, shifted right by one so that A->B and B->A are different edges.
thread_local uint32_t previous_block = 0;
}  // namespace

// The hook itself must not be instrumented (it would call itself).
extern "C" __attribute__((no_sanitize_coverage)) void __sanitizer_cov_trace_pc() {
  const auto pc = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  // 16 well-mixed bits of the block's address: AFL++'s default map has 64 KiB entries.
  const auto block = static_cast<uint32_t>((pc * 0x9E3779B97F4A7C15ull) >> 48);
  __afl_area_ptr[block ^ previous_block]++;
  previous_block = block >> 1;
}
