#include "http/adjust_json.h"

#include <array>
#include <utility>

#include "http/admin_json.h"
#include "http/flat_json.h"
#include "util/json_string.h"

namespace sluice::server {
namespace {

constexpr int64_t kMaxAmount = int64_t{1} << 53;

struct Kind {
  std::string_view name;
  AdjustKind kind;
};
constexpr std::array<Kind, 3> kKinds = {{{"credit", AdjustKind::kCredit},
                                         {"debit", AdjustKind::kDebit},
                                         {"remaining", AdjustKind::kSetRemaining}}};

Result<int64_t> Amount(const FlatJson::Node& n) {
  const std::string what = std::string(n.name) + ": must be a whole number in [0, 2^53]";
  if (n.kind == FlatJson::Kind::kUnsigned) {
    if (n.unsigned_integer > static_cast<uint64_t>(kMaxAmount)) return MakeError(what);
    return static_cast<int64_t>(n.unsigned_integer);
  }
  if (n.kind != FlatJson::Kind::kInteger || n.integer < 0 || n.integer > kMaxAmount) {
    return MakeError(what);
  }
  return n.integer;
}

// The counter as GET /v1/state renders it, without its closing newline.
std::string CounterJson(std::string_view domain, const CounterState& state) {
  std::string out = RenderCounterStateJson(domain, state);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

Result<AdjustBody> ParseAdjustBody(std::string_view body) {
  FlatJson doc;
  if (!doc.Parse(body, {.max_depth = 2, .max_values = 16})) {
    return MakeError(
        "the body must be a JSON object: {\"credit\": N}, {\"debit\": N} or {\"remaining\": N}");
  }
  if (doc.root().kind != FlatJson::Kind::kObject) {
    return MakeError("the body must be a JSON object, not another JSON value");
  }
  AdjustBody out;
  bool found = false;
  for (const FlatJson::Node* m = doc.First(doc.root()); m != nullptr; m = doc.Next(*m)) {
    if (m->name == "allow_over_limit") {
      if (m->kind != FlatJson::Kind::kBool) {
        return MakeError("allow_over_limit: must be true or false");
      }
      out.change.allow_over_limit = m->integer != 0;
      continue;
    }
    const Kind* kind = nullptr;
    for (const Kind& k : kKinds) {
      if (m->name == k.name) kind = &k;
    }
    if (kind == nullptr) {
      return MakeError("unknown field '" + m->name +
                       "' (credit, debit, remaining, allow_over_limit)");
    }
    if (found) return MakeError("give exactly one of credit, debit and remaining");
    auto amount = Amount(*m);
    if (!amount) return std::unexpected(amount.error());
    found = true;
    out.change.kind = kind->kind;
    out.change.amount = *amount;
    out.action = kind->name;
  }
  if (!found) return MakeError("give one of credit, debit and remaining, e.g. {\"credit\": 10}");
  out.change_json = "{\"" + std::string(out.action) + "\":";
  util::AppendJsonInt(out.change_json, out.change.amount);
  if (out.change.allow_over_limit) out.change_json += ",\"allow_over_limit\":true";
  out.change_json += '}';
  return out;
}

std::string RenderCounterChangeJson(std::string_view domain, std::string_view action,
                                    std::string_view request_id, const CounterChange& change) {
  std::string out = "{";
  util::AppendJsonStringOfBytes(out, "domain");
  out += ':';
  util::AppendJsonStringOfBytes(out, domain);
  out += ",\"counter_key\":";
  util::AppendJsonStringOfBytes(out, change.after.counter_key);
  out += ",\"action\":";
  util::AppendJsonStringOfBytes(out, action);
  out += ",\"request_id\":";
  util::AppendJsonStringOfBytes(out, request_id);
  out += ",\"before\":" + CounterJson(domain, change.before);
  out += ",\"after\":" + CounterJson(domain, change.after);
  out += "}\n";
  return out;
}

}  // namespace sluice::server
