#include "http/flat_json.h"

#include <charconv>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "util/hex.h"
#include "util/utf8.h"

namespace sluice::server {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A JSON reader over one text, appending nodes; iterative, so nesting depth costs no stack.
class Reader {
 public:
  Reader(std::string_view text, FlatJson::Bounds bounds, std::vector<FlatJson::Node>& nodes)
      : s_(text), bounds_(bounds), nodes_(nodes) {}

  FlatJson::Error error() const { return error_; }

  bool Document() {
    // A UTF-8 byte order mark is skipped, as nlohmann::json does.
    if (s_.starts_with("\xEF\xBB\xBF")) i_ = 3;
    if (!Value()) return false;
    while (!open_.empty()) {
      SkipSpace();
      if (i_ >= s_.size()) return false;
      const char c = s_[i_++];
      const bool object = nodes_[open_.back().index].kind == FlatJson::Kind::kObject;
      if (c == (object ? '}' : ']')) {
        open_.pop_back();
        continue;
      }
      if (c != ',') return false;
      if (object && !Key()) return false;
      if (!Value()) return false;
    }
    SkipSpace();
    return i_ == s_.size();
  }

 private:
  // Objects with more members than this look names up in a map: a linear scan per member would
  // make a 1 MiB body of 100k members cost tens of seconds of an I/O thread.
  static constexpr uint32_t kScanLimit = 16;

  struct Open {
    uint32_t index;
    uint32_t last = FlatJson::kNone;
    uint32_t members = 0;                                                     // live or replaced
    std::unique_ptr<std::unordered_map<std::string, uint32_t>> live_by_name;  // past kScanLimit
  };

  void SkipSpace() {
    while (i_ < s_.size() && IsSpace(s_[i_])) ++i_;
  }

  // A value. At a container's opening, its first element (or its end) is read too, one level
  // at a time in this loop.
  bool Value() {
    for (;;) {
      SkipSpace();
      if (i_ >= s_.size()) return false;
      // Every pass of this loop adds exactly one node.
      if (nodes_.size() >= bounds_.max_values) return Refuse(FlatJson::Error::kTooManyValues);
      const char c = s_[i_];
      switch (c) {
        case '{':
        case '[': {
          if (open_.size() >= bounds_.max_depth) return Refuse(FlatJson::Error::kTooDeep);
          ++i_;
          const bool object = c == '{';
          open_.push_back({Add(object ? FlatJson::Kind::kObject : FlatJson::Kind::kArray),
                           FlatJson::kNone, 0, nullptr});
          SkipSpace();
          if (i_ < s_.size() && s_[i_] == (object ? '}' : ']')) {
            ++i_;
            open_.pop_back();
            return true;
          }
          if (object && !Key()) return false;
          continue;
        }
        case '"': {
          const uint32_t index = Add(FlatJson::Kind::kString);
          return String(nodes_[index].text);
        }
        case 't':
          return Literal("true", FlatJson::Kind::kBool);
        case 'f':
          return Literal("false", FlatJson::Kind::kBool);
        case 'n':
          return Literal("null", FlatJson::Kind::kNull);
        default:
          return Number();
      }
    }
  }

  bool Refuse(FlatJson::Error error) {
    error_ = error;
    return false;
  }

  // `"name" :` inside an object; a repeated name replaces the earlier member.
  bool Key() {
    SkipSpace();
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    if (!String(name_)) return false;
    SkipSpace();
    if (i_ >= s_.size() || s_[i_] != ':') return false;
    ++i_;
    Open& open = open_.back();
    FlatJson::Node& object = nodes_[open.index];
    if (open.live_by_name == nullptr && open.members >= kScanLimit) {
      open.live_by_name = std::make_unique<std::unordered_map<std::string, uint32_t>>();
      for (uint32_t c = object.first; c != FlatJson::kNone; c = nodes_[c].next) {
        if (nodes_[c].live) (*open.live_by_name)[nodes_[c].name] = c;
      }
    }
    uint32_t replaced = FlatJson::kNone;
    if (open.live_by_name != nullptr) {
      if (auto it = open.live_by_name->find(name_); it != open.live_by_name->end()) {
        replaced = it->second;
      }
    } else {
      for (uint32_t c = object.first; c != FlatJson::kNone; c = nodes_[c].next) {
        if (nodes_[c].live && nodes_[c].name == name_) {
          replaced = c;
          break;
        }
      }
    }
    if (replaced != FlatJson::kNone) {
      nodes_[replaced].live = false;
      --object.size;
    }
    return true;
  }

  bool Literal(std::string_view word, FlatJson::Kind kind) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    nodes_[Add(kind)].integer = word == "true" ? 1 : 0;  // a kBool's value
    return true;
  }

  // At the opening quote; leaves i_ after the closing one.
  bool String(std::string& out) {
    ++i_;
    out.clear();
    size_t run = i_;  // the start of the bytes not yet copied
    for (;;) {
      if (i_ >= s_.size()) return false;
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        out.append(s_.substr(run, i_ - run));
        ++i_;
        return true;
      }
      if (c < 0x20) return false;
      if (c >= 0x80) {
        const size_t n = util::Utf8SequenceLength(s_, i_);
        if (n == 0) return false;
        i_ += n;
        continue;
      }
      if (c != '\\') {
        ++i_;
        continue;
      }
      out.append(s_.substr(run, i_ - run));
      if (++i_ >= s_.size()) return false;
      switch (s_[i_++]) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          int32_t cp = Hex4();
          if (cp < 0) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return false;  // a low surrogate first
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.substr(i_, 2) != "\\u") return false;
            i_ += 2;
            const int32_t low = Hex4();
            if (low < 0xDC00 || low > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          util::AppendUtf8(out, static_cast<char32_t>(cp));
          break;
        }
        default:
          return false;
      }
      run = i_;
    }
  }

  int32_t Hex4() {
    if (s_.size() - i_ < 4) return -1;
    int32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const int h = util::HexValue(s_[i_ + static_cast<size_t>(k)]);
      if (h < 0) return -1;
      v = v * 16 + h;
    }
    i_ += 4;
    return v;
  }

  // RFC 8259 numbers, classified as nlohmann::json does: without a fraction or exponent, an
  // unsigned (non-negative) or integer (negative) when it fits 64 bits, else a float; a float
  // beyond a double's range is an error (underflow is not).
  bool Number() {
    const size_t start = i_;
    const bool negative = i_ < s_.size() && s_[i_] == '-';
    if (negative) ++i_;
    if (i_ >= s_.size() || !IsDigit(s_[i_])) return false;
    if (s_[i_] == '0') {
      ++i_;
    } else {
      while (i_ < s_.size() && IsDigit(s_[i_])) ++i_;
    }
    const size_t int_end = i_;
    bool is_float = false;
    if (i_ < s_.size() && s_[i_] == '.') {
      is_float = true;
      ++i_;
      if (i_ >= s_.size() || !IsDigit(s_[i_])) return false;
      while (i_ < s_.size() && IsDigit(s_[i_])) ++i_;
    }
    size_t exp_at = std::string_view::npos;
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      is_float = true;
      exp_at = i_;
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (i_ >= s_.size() || !IsDigit(s_[i_])) return false;
      while (i_ < s_.size() && IsDigit(s_[i_])) ++i_;
    }
    const char* first = s_.data() + start;
    const char* last = s_.data() + i_;
    if (!is_float) {
      if (negative) {
        int64_t v = 0;
        if (std::from_chars(first, last, v).ec == std::errc()) {
          nodes_[Add(FlatJson::Kind::kInteger)].integer = v;
          return true;
        }
      } else {
        uint64_t v = 0;
        if (std::from_chars(first, last, v).ec == std::errc()) {
          nodes_[Add(FlatJson::Kind::kUnsigned)].unsigned_integer = v;
          return true;
        }
      }
    }
    double v = 0;
    const auto r = std::from_chars(first, last, v);
    if (r.ec == std::errc::result_out_of_range &&
        Magnitude(start + negative, int_end, exp_at) >= 0) {
      return false;  // overflow: not a finite double
    }
    if (r.ec != std::errc() && r.ec != std::errc::result_out_of_range) return false;
    Add(FlatJson::Kind::kFloat);
    return true;
  }

  // The decimal exponent of the number's leading digit (>= 0: at least 1), saturated.
  int64_t Magnitude(size_t digits, size_t int_end, size_t exp_at) const {
    int64_t e = 0;
    size_t k = digits;
    if (s_[k] != '0') {
      e = static_cast<int64_t>(int_end - k) - 1;
    } else {
      k = int_end + 1;  // after the point
      int64_t zeros = 1;
      while (k < s_.size() && s_[k] == '0') {
        ++k;
        ++zeros;
      }
      e = -zeros;
    }
    if (exp_at != std::string_view::npos) {
      size_t j = exp_at + 1;
      const bool minus = s_[j] == '-';
      if (s_[j] == '+' || s_[j] == '-') ++j;
      int64_t x = 0;
      while (j < s_.size() && IsDigit(s_[j])) {
        x = x > 100'000'000 ? x : x * 10 + (s_[j] - '0');
        ++j;
      }
      e += minus ? -x : x;
    }
    return e;
  }

  // A node for the next value, linked into the open container.
  uint32_t Add(FlatJson::Kind kind) {
    const auto index = static_cast<uint32_t>(nodes_.size());
    FlatJson::Node& node = nodes_.emplace_back();
    node.kind = kind;
    if (!open_.empty()) {
      Open& parent = open_.back();
      FlatJson::Node& p = nodes_[parent.index];
      if (p.kind == FlatJson::Kind::kObject) {
        ++parent.members;
        if (parent.live_by_name != nullptr) (*parent.live_by_name)[name_] = index;
        node.name = std::move(name_);
      }
      if (parent.last == FlatJson::kNone) {
        p.first = index;
      } else {
        nodes_[parent.last].next = index;
      }
      parent.last = index;
      ++p.size;
    }
    return index;
  }

  std::string_view s_;
  size_t i_ = 0;
  FlatJson::Bounds bounds_;
  FlatJson::Error error_ = FlatJson::Error::kNone;
  std::vector<FlatJson::Node>& nodes_;
  std::vector<Open> open_;
  std::string name_;  // the member name the next value takes
};

}  // namespace

bool FlatJson::Parse(std::string_view text, Bounds bounds) {
  nodes_.clear();
  Reader reader(text, bounds, nodes_);
  const bool ok = reader.Document() && !nodes_.empty();
  error_ = ok ? Error::kNone : (reader.error() == Error::kNone ? Error::kSyntax : reader.error());
  return ok;
}

bool FlatJson::Parse(std::string_view text) { return Parse(text, Bounds{}); }

const FlatJson::Node* FlatJson::Find(const Node& object, std::string_view name) const {
  for (const Node* c = First(object); c != nullptr; c = Next(*c)) {
    if (c->name == name) return c;
  }
  return nullptr;
}

const FlatJson::Node* FlatJson::Live(uint32_t index) const {
  while (index != kNone && !nodes_[index].live) index = nodes_[index].next;
  return index == kNone ? nullptr : &nodes_[index];
}

}  // namespace sluice::server
