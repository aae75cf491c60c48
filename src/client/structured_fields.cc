#include "client/structured_fields.h"

#include <charconv>

namespace sluice::client::sf {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLcAlpha(char c) { return c >= 'a' && c <= 'z'; }
bool IsAlpha(char c) { return IsLcAlpha(c) || (c >= 'A' && c <= 'Z'); }
// tchar (RFC 9110 §5.6.2) plus ':' and '/', the rest of a Token (§3.3.4).
bool IsTokenChar(char c) {
  if (IsAlpha(c) || IsDigit(c)) return true;
  constexpr std::string_view kExtra = "!#$%&'*+-.^_`|~:/";
  return kExtra.find(c) != std::string_view::npos;
}
bool IsBase64(char c) { return IsAlpha(c) || IsDigit(c) || c == '+' || c == '/' || c == '='; }

class Parser {
 public:
  explicit Parser(std::string_view in) : in_(in) {}

  std::optional<std::vector<Member>> List() {
    SkipSp();
    std::vector<Member> members;
    while (!AtEnd()) {
      Member m;
      if (!ItemOrInnerList(m)) return std::nullopt;
      members.push_back(std::move(m));
      SkipOws();
      if (AtEnd()) return members;
      if (Peek() != ',') return std::nullopt;
      ++pos_;
      SkipOws();
      if (AtEnd()) return std::nullopt;  // a trailing comma
    }
    return members;
  }

 private:
  bool AtEnd() const { return pos_ >= in_.size(); }
  char Peek() const { return in_[pos_]; }
  void SkipSp() {
    while (!AtEnd() && Peek() == ' ') ++pos_;
  }
  void SkipOws() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t')) ++pos_;
  }

  bool ItemOrInnerList(Member& m) {
    if (Peek() == '(') {
      m.inner_list = true;
      ++pos_;
      while (true) {
        SkipSp();
        if (AtEnd()) return false;
        if (Peek() == ')') {
          ++pos_;
          break;
        }
        BareItem item;
        Parameters ignored;
        if (!Bare(item) || !Params(ignored)) return false;
        m.inner.push_back(std::move(item));
        if (AtEnd() || (Peek() != ' ' && Peek() != ')')) return false;
      }
      return Params(m.params);
    }
    return Bare(m.item) && Params(m.params);
  }

  bool Params(Parameters& params) {
    while (!AtEnd() && Peek() == ';') {
      ++pos_;
      SkipSp();
      std::string key;
      if (!Key(key)) return false;
      BareItem value;
      value.kind = BareItem::Kind::kBoolean;
      value.integer = 1;
      if (!AtEnd() && Peek() == '=') {
        ++pos_;
        if (!Bare(value)) return false;
      }
      params.emplace_back(std::move(key), std::move(value));
    }
    return true;
  }

  bool Key(std::string& key) {
    if (AtEnd() || !(IsLcAlpha(Peek()) || Peek() == '*')) return false;
    while (!AtEnd()) {
      const char c = Peek();
      if (!(IsLcAlpha(c) || IsDigit(c) || c == '_' || c == '-' || c == '.' || c == '*')) break;
      key.push_back(c);
      ++pos_;
    }
    return true;
  }

  bool Bare(BareItem& item) {
    if (AtEnd()) return false;
    const char c = Peek();
    if (c == '-' || IsDigit(c)) return Number(item);
    if (c == '"') return String(item);
    if (c == '*' || IsAlpha(c)) return Token(item);
    if (c == ':') return Bytes(item);
    if (c == '?') return Boolean(item);
    if (c == '@') {
      ++pos_;
      if (!Number(item) || item.kind != BareItem::Kind::kInteger) return false;
      item.kind = BareItem::Kind::kDate;
      return true;
    }
    if (c == '%') return Display(item);
    return false;
  }

  // §4.2.4: at most 15 digits for an Integer; 12 before and 1 to 3 after the point of a Decimal.
  bool Number(BareItem& item) {
    bool negative = false;
    if (Peek() == '-') {
      negative = true;
      ++pos_;
    }
    if (AtEnd() || !IsDigit(Peek())) return false;
    std::string digits;
    bool decimal = false;
    size_t int_digits = 0;
    while (!AtEnd()) {
      const char c = Peek();
      if (IsDigit(c)) {
        digits.push_back(c);
      } else if (c == '.' && !decimal) {
        if (digits.size() > 12) return false;
        decimal = true;
        int_digits = digits.size();
        digits.push_back(c);
      } else {
        break;
      }
      ++pos_;
      if (!decimal && digits.size() > 15) return false;
      if (decimal && digits.size() > 16) return false;
    }
    if (decimal) {
      const size_t frac = digits.size() - int_digits - 1;
      if (frac == 0 || frac > 3) return false;
      // from_chars, not stod: no exception and no locale (a decimal comma would misread it).
      item.kind = BareItem::Kind::kDecimal;
      std::from_chars(digits.data(), digits.data() + digits.size(), item.decimal);
      if (negative) item.decimal = -item.decimal;
      return true;
    }
    item.kind = BareItem::Kind::kInteger;
    std::from_chars(digits.data(), digits.data() + digits.size(), item.integer);
    if (negative) item.integer = -item.integer;
    return true;
  }

  bool String(BareItem& item) {
    item.kind = BareItem::Kind::kString;
    ++pos_;
    while (!AtEnd()) {
      const char c = Peek();
      ++pos_;
      if (c == '"') return true;
      if (c == '\\') {
        if (AtEnd() || (Peek() != '"' && Peek() != '\\')) return false;
        item.text.push_back(Peek());
        ++pos_;
        continue;
      }
      if (c < 0x20 || c == 0x7f) return false;
      item.text.push_back(c);
    }
    return false;  // unterminated
  }

  bool Token(BareItem& item) {
    item.kind = BareItem::Kind::kToken;
    while (!AtEnd() && IsTokenChar(Peek())) item.text.push_back(in_[pos_++]);
    return true;
  }

  bool Bytes(BareItem& item) {
    item.kind = BareItem::Kind::kBytes;
    ++pos_;
    while (!AtEnd() && Peek() != ':') {
      if (!IsBase64(Peek())) return false;
      item.text.push_back(in_[pos_++]);
    }
    if (AtEnd()) return false;
    ++pos_;
    return true;
  }

  bool Boolean(BareItem& item) {
    item.kind = BareItem::Kind::kBoolean;
    ++pos_;
    if (AtEnd() || (Peek() != '0' && Peek() != '1')) return false;
    item.integer = Peek() == '1' ? 1 : 0;
    ++pos_;
    return true;
  }

  // RFC 9651 §4.2.10: %"..." with lowercase %xx escapes; kept as its raw octets.
  bool Display(BareItem& item) {
    item.kind = BareItem::Kind::kDisplay;
    ++pos_;
    if (AtEnd() || Peek() != '"') return false;
    ++pos_;
    auto hex = [](char c) -> int {
      if (IsDigit(c)) return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    while (!AtEnd()) {
      const char c = in_[pos_++];
      if (c == '"') return true;
      if (c < 0x20 || c > 0x7e) return false;
      if (c != '%') {
        item.text.push_back(c);
        continue;
      }
      if (pos_ + 2 > in_.size()) return false;
      const int hi = hex(in_[pos_]), lo = hex(in_[pos_ + 1]);
      if (hi < 0 || lo < 0) return false;
      item.text.push_back(static_cast<char>(hi * 16 + lo));
      pos_ += 2;
    }
    return false;
  }

  std::string_view in_;
  size_t pos_ = 0;
};

}  // namespace

const BareItem* Member::Param(std::string_view key) const {
  const BareItem* found = nullptr;
  for (const auto& [k, v] : params) {
    if (k == key) found = &v;
  }
  return found;
}

std::optional<std::vector<Member>> ParseList(std::string_view field) {
  // Trailing SP is not part of a field value (the HTTP parser strips OWS around it).
  while (!field.empty() && (field.back() == ' ' || field.back() == '\t')) field.remove_suffix(1);
  return Parser(field).List();
}

}  // namespace sluice::client::sf
