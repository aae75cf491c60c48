// HTTP-date (RFC 9110 §5.6.7): IMF-fixdate, and the obsolete RFC 850 and asctime forms that a
// recipient must still accept. Strict: anything else, or an impossible date, is nullopt.
#ifndef SLUICE_CLIENT_HTTP_DATE_H_
#define SLUICE_CLIENT_HTTP_DATE_H_

#include <optional>
#include <string_view>

#include "sluice/time.h"

namespace sluice::client {

// `now` resolves RFC 850's two-digit years: one that would lie more than 50 years ahead of
// `now` is the most recent past year with those digits.
std::optional<Timestamp> ParseHttpDate(std::string_view text, Timestamp now);

}  // namespace sluice::client

#endif  // SLUICE_CLIENT_HTTP_DATE_H_
