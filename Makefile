# The front door. `make run` and `make test` are all a fresh Debian 12 machine needs.
JOBS ?= $(shell nproc)
CTEST = ctest --output-on-failure -j $(JOBS)

.PHONY: all build deps package run demo test test-release test-asan test-tsan test-chaos chaos \
  build-sluiced bench test-bench-smoke test-abuse-smoke fuzz format lint clean plots

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake --preset release >/dev/null
	@cmake --build build -j $(JOBS)

# The Debian package, build/package/sluice_<version>_<arch>.deb, made from the release build
# (docs/install.md). `cmake --install build --prefix DIR` installs the libraries and headers.
package: build
	cd build && cpack -G DEB

# docs/images/*.png (and the data they are drawn from, docs/images/data) from sluice's own output:
# the boundary problem, the sliding counter's accuracy, a recommend distribution, the retry
# storm. Needs Debian's python3-matplotlib (installed here only). docs/recommend.md.
plots: build
	SLUICE_PLOTS_DEPS=1 scripts/install-deps
	scripts/plots

# Build, then serve examples/sluice.yaml: HTTP on 127.0.0.1:8080, Envoy gRPC on :8081, the
# forward-auth endpoint for proxies on :8082 (docs/gateways.md). Ctrl-C stops it (SIGINT:
# requests in flight finish). docs/server.md is the manual.
run: build
	@echo "sluiced: try, from another terminal:"
	@echo "  curl -i http://127.0.0.1:8080/v1/check -d '{\"domain\":\"api\",\"descriptors\":[{\"entries\":[{\"key\":\"api_key\",\"value\":\"key_live_pro_7f3a\"}]}]}'"
	@echo "  curl -i http://127.0.0.1:8082/ -H 'X-Forwarded-Uri: /v1/payments' -H 'X-Forwarded-Method: POST' -H 'X-Api-Key: key_live_pro_7f3a'"
	build/bin/sluiced --config examples/sluice.yaml --forward-auth 127.0.0.1:8082

# Every algorithm on the design note's worked example.
demo: build
	build/bin/sluice demo

# Lint, then release, ASan+UBSan, and TSan (over the concurrent store) test runs.
test: lint test-release test-asan test-tsan test-chaos test-bench-smoke test-abuse-smoke

test-release: build
	cd build && $(CTEST)

test-asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(CTEST)

# ThreadSanitizer over the concurrent code: the memory store, DecideAll, the stores' scheduler, the
# pipelined Redis connections (under failure, with many asynchronous decisions in flight, and a
# store whose last reference goes on its own I/O thread), the store suite on
# the memory store and on Redis (asynchronous decisions answered on I/O threads), the memory
# store's snapshots beside decisions and reloads, the metrics,
# sluiced's asynchronous Redis checks, the usage views; the client SDK's shared budget, pacer and Client (async
# and blocking calls on one connection pool).
TSAN_TESTS = store_test memory_snapshot_test redis_test redis_failure_test metrics_test \
  rate_limit_service_redis_test redis_faults_test lease_test batched_test client_test \
  client_net_test
test-tsan: deps
	@cmake --preset tsan >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 $(CTEST) \
	  -R '^(Memory|DecideAll|ManualScheduler|ThreadScheduler|RedisFailure|MetricsConcurrency|UsageViewsTest\.Threads|AsyncRedisService|RedisStore\.OneThread|RedisStore\.AnAnsweredCallback|RedisStoreLifetime|Redis/StoreSuite|Redis/PermitSuite|RedisPermits|RedisRestart|RedisEvents|LeasedStore|Algorithms/LeasedOnRedis|LeaseScript|BatchedStore|ClientConcurrency)'

# The fault matrix of docs/reliability.md against real processes (a private redis-server and
# build/bin/sluiced per row): Redis killed, paused, restarted empty, DEBUG SLEEP, CLIENT KILL,
# evicting, wrong password, a TLS Redis killed, a certificate rotated; slowloris, connection,
# key, override and gRPC stream floods. Prints the table docs/reliability.md holds (about 9
# minutes).
chaos: build-sluiced
	scripts/chaos

# Its quick version (about 3 minutes): fails on any over-admission, any sluiced exit, and any
# degraded decision for a request sent after the fault ended.
test-chaos: build-sluiced
	scripts/chaos --quick

# The hostile-client scripts in their --smoke modes, plaintext then TLS (about 15 s):
# docs/reliability.md, "Over TLS".
test-abuse-smoke: build-sluiced
	scripts/abuse-json --smoke build/bin/sluiced
	scripts/abuse-grpc --smoke --sluiced build/bin/sluiced

build-sluiced: deps
	@cmake --preset release >/dev/null
	@cmake --build build -j $(JOBS) --target sluiced

bench: build
	SLUICE_BENCH_DEPS=1 scripts/install-deps
	scripts/run-bench

# Every benchmark script in its --smoke mode, on the release build (about a minute; no Node peer):
# a check a script makes (run-redis-bench's: the ceiling runs the store's own script and
# arguments) or a part that measures nothing fails here, not in a later benchmark run.
# run-bench --smoke runs run-redis-bench --smoke.
BENCH_SMOKE = run-bench run-overlimit-bench run-sync-bench run-usage-bench run-server-bench \
  run-forward-auth-bench run-grpc-tls-bench run-tls-bench run-snapshot-bench run-permit-bench
test-bench-smoke: build
	@set -e; for s in $(BENCH_SMOKE); do \
	  echo "== scripts/$$s --smoke"; BUILD_DIR=build scripts/$$s --smoke; done

# Each fuzz target (tests/fuzz) under AFL++ for FUZZ_SECONDS, one after another; fails on a crash
# or hang. `make test` replays the corpora without AFL++. docs/fuzzing.md.
FUZZ_SECONDS ?= 60
fuzz:
	SLUICE_FUZZ_DEPS=1 scripts/install-deps
	@cmake --preset fuzz >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_afl
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz build-fuzz

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

# clang-format must be clean; no layer may include a higher one (scripts/check-layers,
# docs/design.md); no function in src/ over 120 lines but tables (scripts/check-function-length);
# commit subjects of at most 72 characters since origin/main or SLUICE_COMMIT_BASE
# (scripts/check-commit-subjects; skipped without either). cppcheck stands in for clang-tidy,
# and the function-length script for its readability-function-size, because Debian 12's
# clang-tidy 14 cannot parse libstdc++ 12's <expected> (it crashes). .clang-tidy is kept for
# newer toolchains. The scripts' own tests run in ctest (tests/lint).
lint: deps
	clang-format --dry-run -Werror $$(git ls-files '*.h' '*.cc')
	scripts/check-layers
	scripts/check-function-length
	scripts/check-commit-subjects
	cppcheck --std=c++20 --enable=warning,performance,portability --error-exitcode=1 --quiet \
	  -I include -I src src/

clean:
	rm -rf build build-asan build-tsan build-debug build-fuzz
