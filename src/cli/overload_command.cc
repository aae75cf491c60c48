#include "cli/overload_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <tuple>

#include "sluice/duration.h"

namespace sluice::cli {
namespace {

constexpr int kUsageError = 2;
constexpr int kOutputError = 1;

int Fail(const std::string& message) {
  fmt::print(stderr, "sluice simulate overload: {}\n", message);
  return kUsageError;
}

}  // namespace

CLI::App* AddOverloadCommand(CLI::App& simulate, OverloadFlags& f) {
  auto* c = simulate.add_subcommand(
      "overload",
      "A backend of N workers behind a queue, a 3x load spike and clients with a deadline, "
      "per concurrency policy: goodput, p99 latency, calls shed by priority");
  c->add_option("--policy", f.policies,
                "none, fixed or adaptive; repeat or separate with commas (default: all three)")
      ->delimiter(',');
  c->add_option("--workers", f.options.workers, "the backend's workers")->capture_default_str();
  c->add_option("--service", f.service, "a call's mean service time (each 0.5x to 1.5x of it)")
      ->capture_default_str();
  c->add_option("--rate", f.options.rate, "calls per second outside the spike (Poisson)")
      ->capture_default_str();
  c->add_option("--spike", f.options.spike_factor, "the spike's factor on --rate")
      ->capture_default_str();
  c->add_option("--spike-start", f.spike_start, "when the spike starts")->capture_default_str();
  c->add_option("--spike-length", f.spike_length, "how long it lasts")->capture_default_str();
  c->add_option("--duration", f.duration, "arrivals stop here")->capture_default_str();
  c->add_option("--deadline", f.deadline, "the client gives up on a call after this")
      ->capture_default_str();
  c->add_option("--fixed-limit", f.options.fixed_limit, "the fixed policy's concurrency limit")
      ->capture_default_str();
  c->add_option("--seed", f.options.seed, "arrivals' and service times' seed")
      ->capture_default_str();
  c->add_option("--output", f.output, "text, csv or timeline-csv")->capture_default_str();
  return c;
}

int RunOverload(OverloadFlags f) {
  for (auto [text, field, name] :
       {std::tuple{&f.service, &f.options.service, "--service"},
        std::tuple{&f.spike_start, &f.options.spike_start, "--spike-start"},
        std::tuple{&f.spike_length, &f.options.spike_length, "--spike-length"},
        std::tuple{&f.duration, &f.options.duration, "--duration"},
        std::tuple{&f.deadline, &f.options.deadline, "--deadline"}}) {
    auto d = ParseDuration(*text);
    if (!d) return Fail(std::string(name) + ": " + d.error().message);
    *field = *d;
  }
  OverloadOutput output = OverloadOutput::kText;
  if (f.output == "csv") {
    output = OverloadOutput::kCsv;
  } else if (f.output == "timeline-csv") {
    output = OverloadOutput::kTimelineCsv;
  } else if (f.output != "text") {
    return Fail("--output must be text, csv or timeline-csv, not '" + f.output + "'");
  }
  if (auto valid = ValidateOverloadOptions(f.options); !valid) return Fail(valid.error().message);
  std::vector<OverloadPolicy> policies;
  for (const std::string& name : f.policies) {
    auto p = ParseOverloadPolicy(name);
    if (!p) return Fail(p.error().message);
    policies.push_back(*p);
  }
  if (policies.empty()) {
    policies.assign(std::begin(kAllOverloadPolicies), std::end(kAllOverloadPolicies));
  }
  std::vector<OverloadResult> results;
  for (OverloadPolicy p : policies) results.push_back(SimulateOverload(p, f.options));
  if (!PrintOverload(results, f.options, output, stdout)) {
    fmt::print(stderr, "sluice simulate overload: cannot write the output\n");
    return kOutputError;
  }
  return 0;
}

}  // namespace sluice::cli
