# The front door. `make run` and `make test` are all a fresh Debian 12 machine needs.
JOBS ?= $(shell nproc)
CTEST = ctest --output-on-failure -j $(JOBS)

.PHONY: all build deps run test test-release test-asan test-tsan bench format lint clean

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake --preset release >/dev/null
	@cmake --build build -j $(JOBS)

run: build
	build/bin/sluice demo

# Lint, then release, ASan+UBSan, and TSan (over the concurrent store) test runs.
test: lint test-release test-asan test-tsan

test-release: build
	cd build && $(CTEST)

test-asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(CTEST)

# ThreadSanitizer over the concurrent code (the memory store).
test-tsan: deps
	@cmake --preset tsan >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target store_test
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 $(CTEST) -R '^Memory'

bench: build
	SLUICE_BENCH_DEPS=1 scripts/install-deps
	scripts/run-bench

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

# clang-format must be clean; cppcheck stands in for clang-tidy, because Debian 12's
# clang-tidy 14 cannot parse libstdc++ 12's <expected> (it crashes). .clang-tidy is kept for
# newer toolchains.
lint: deps
	clang-format --dry-run -Werror $$(git ls-files '*.h' '*.cc')
	cppcheck --std=c++20 --enable=warning,performance,portability --error-exitcode=1 --quiet \
	  -I include -I src src/

clean:
	rm -rf build build-asan build-tsan build-debug
