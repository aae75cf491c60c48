// `sluice demo`: the seed's worked example through every algorithm, printed as a short story.
#ifndef SLUICE_CLI_DEMO_H_
#define SLUICE_CLI_DEMO_H_

#include <cstdio>

namespace sluice::cli {

int RunDemo(std::FILE* out);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_DEMO_H_
