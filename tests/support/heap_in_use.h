// Bytes the process's heap has handed out and not taken back: an oracle for memory bounds that is
// independent of any accounting of the code under test. glibc's figure in a plain build; the
// sanitizer allocator's (which replaces malloc) under ASan or TSan.
#ifndef SLUICE_TESTS_SUPPORT_HEAP_IN_USE_H_
#define SLUICE_TESTS_SUPPORT_HEAP_IN_USE_H_

#include <malloc.h>

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// From the sanitizer runtime (sanitizer/allocator_interface.h, which Debian's GCC does not
// install): the bytes the program holds from the sanitizer's allocator.
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace sluice::testing {

inline size_t HeapInUse() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return __sanitizer_get_current_allocated_bytes();
#else
  // Small blocks come from the arenas (uordblks), large ones (big tables) from mmap (hblkhd).
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
#endif
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_HEAP_IN_USE_H_
