// The config the gRPC and HTTP bounds tests (tests/grpc/grpc_bounds_test.cc,
// tests/http/http_bounds_test.cc) share: a limit of 10 per minute (a bucket's capacity: 10) for
// each algorithm, keyed by `alg`'s value, plus two fixed windows. One text, so both front ends
// are checked against the same limits.
#ifndef SLUICE_TESTS_SUPPORT_BOUNDS_CONFIG_H_
#define SLUICE_TESTS_SUPPORT_BOUNDS_CONFIG_H_

namespace sluice::testing {

inline constexpr char kBoundsConfig[] = R"yaml(
domain: bounds
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 10, algorithm: fixed_window}
  - key: path
    rate_limit: {name: per_path, unit: minute, requests_per_unit: 1, algorithm: fixed_window}
  - key: alg
    value: token_bucket
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: token_bucket}
  - key: alg
    value: gcra
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: gcra}
  - key: alg
    value: leaky_bucket
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: leaky_bucket}
  - key: alg
    value: fixed_window
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: fixed_window}
  - key: alg
    value: sliding_window_counter
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window_counter}
  - key: alg
    value: sliding_window_log
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window_log}
)yaml";

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_SUPPORT_BOUNDS_CONFIG_H_
