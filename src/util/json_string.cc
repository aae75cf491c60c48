#include "util/json_string.h"

#include "util/hex.h"
#include "util/utf8.h"

namespace sluice::util {
namespace {

// The two ways the writers in json_string.h differ.
enum class NonAscii { kCopy, kReplaceInvalidUtf8 };
enum class BackspaceFormFeed { kShort /* \b \f */, kHex /* \u0008 \u000c */ };

template <NonAscii kNonAscii, BackspaceFormFeed kBackspaceFormFeed>
void AppendJsonStringWith(std::string& out, std::string_view s) {
  out.push_back('"');
  size_t run = 0;  // the start of the pending bytes that are copied as they are
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      if constexpr (kNonAscii == NonAscii::kReplaceInvalidUtf8) {
        const size_t n = Utf8SequenceLength(s, i);
        if (n == 0) {
          out.append(s.data() + run, i - run);
          out += kReplacementCharacter;
          run = ++i;
        } else {
          i += n;
        }
      } else {
        ++i;
      }
      continue;
    }
    if (c >= 0x20 && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    out.append(s.data() + run, i - run);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += kBackspaceFormFeed == BackspaceFormFeed::kShort ? "\\b" : "\\u0008";
        break;
      case '\f':
        out += kBackspaceFormFeed == BackspaceFormFeed::kShort ? "\\f" : "\\u000c";
        break;
      default:
        out += "\\u00";
        AppendHexByte(out, c, HexCase::kLower);
    }
    run = ++i;
  }
  out.append(s.data() + run, s.size() - run);
  out.push_back('"');
}

}  // namespace

void AppendJsonStringOfUtf8(std::string& out, std::string_view s) {
  AppendJsonStringWith<NonAscii::kCopy, BackspaceFormFeed::kShort>(out, s);
}

void AppendJsonStringOfBytes(std::string& out, std::string_view s) {
  AppendJsonStringWith<NonAscii::kReplaceInvalidUtf8, BackspaceFormFeed::kHex>(out, s);
}

}  // namespace sluice::util
