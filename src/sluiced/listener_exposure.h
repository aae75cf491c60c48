// Whether a listener is open to anyone who can reach it: sluiced warns at start about one that
// binds a non-loopback address while nothing identifies its callers.
#ifndef SLUICE_SLUICED_LISTENER_EXPOSURE_H_
#define SLUICE_SLUICED_LISTENER_EXPOSURE_H_

#include <string>
#include <string_view>
#include <vector>

#include "sluiced/flags.h"

namespace sluice::server {

enum class ListenerKind { kHttp, kForwardAuth, kGrpc };

// Whether `address` ("host:port", "[v6]:port") binds only a loopback address (127.0.0.0/8,
// ::1). An address that is no IP (a Unix socket) is not reachable over the network: true.
bool IsLoopbackAddress(std::string_view address);

// Whether callers of this listener must prove who they are: --api-tokens is on.
bool ListenerIsProtected(const Settings& settings, ListenerKind listener);

// One warning line per listener on and bound beyond loopback that is not protected.
std::vector<std::string> UnprotectedListenerWarnings(const Settings& settings);

}  // namespace sluice::server

#endif  // SLUICE_SLUICED_LISTENER_EXPOSURE_H_
