// Errors as values. Every fallible call in libsluice returns Result<T>: either the value or an
// Error whose message is written for the operator who has to fix the input.
#ifndef SLUICE_STATUS_H_
#define SLUICE_STATUS_H_

#include <expected>
#include <string>
#include <utility>

namespace sluice {

struct Error {
  std::string message;
};

template <typename T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> MakeError(std::string message) {
  return std::unexpected<Error>(Error{std::move(message)});
}

}  // namespace sluice

#endif  // SLUICE_STATUS_H_
