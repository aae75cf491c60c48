// What the fuzz targets share: a check that, unlike assert, stays on in release builds and says
// which invariant broke before it aborts (AFL++ and the replay driver both see the abort).
#ifndef SLUICE_TESTS_FUZZ_FUZZ_CHECK_H_
#define SLUICE_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                                                \
  do {                                                                                       \
    if (!(condition)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (false)

#endif  // SLUICE_TESTS_FUZZ_FUZZ_CHECK_H_
