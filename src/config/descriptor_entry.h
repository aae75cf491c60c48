// One key/value pair of a request descriptor, as Envoy sends them: [("path", "/pay"), ...].
#ifndef SLUICE_CONFIG_DESCRIPTOR_ENTRY_H_
#define SLUICE_CONFIG_DESCRIPTOR_ENTRY_H_

#include <string_view>

namespace sluice::server {

struct DescriptorEntry {
  std::string_view key;
  std::string_view value;
};

}  // namespace sluice::server

#endif  // SLUICE_CONFIG_DESCRIPTOR_ENTRY_H_
