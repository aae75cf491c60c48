// A byte count as operators write it: a plain integer, or one with a binary suffix (Ki, Mi, Gi,
// Ti: 1024, 1024^2, ...), as Kubernetes writes memory sizes: "67108864", "64Mi", "1Gi".
#ifndef SLUICE_UTIL_BYTE_SIZE_H_
#define SLUICE_UTIL_BYTE_SIZE_H_

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

namespace sluice::util {

// The number of bytes `text` names, or why it names none (the message quotes the text). No
// sign, spaces, fractions or decimal suffixes ("64M" is refused rather than guessed at).
std::expected<uint64_t, std::string> ParseByteSize(std::string_view text);

}  // namespace sluice::util

#endif  // SLUICE_UTIL_BYTE_SIZE_H_
