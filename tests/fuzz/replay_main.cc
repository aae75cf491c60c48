// The plain driver of the fuzz targets: runs LLVMFuzzerTestOneInput once on every file named,
// and on every regular file in every directory named (sorted, so a failure names the same
// input each time). `make test` runs each target over its corpus this way, under ASan+UBSan;
// `make fuzz` links the same targets with AFL++'s driver instead (scripts/fuzz).
//
//   fuzz_http_request_replay --min-inputs 20 tests/fuzz/corpus/http_request
//   fuzz_http_request_replay crash-file          # reproduce one input
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
  size_t min_inputs = 0;
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--min-inputs" && i + 1 < argc) {
      min_inputs = std::strtoul(argv[++i], nullptr, 10);
    } else if (std::filesystem::is_directory(arg)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      inputs.insert(inputs.end(), files.begin(), files.end());
    } else if (std::filesystem::is_regular_file(arg)) {
      inputs.emplace_back(arg);
    } else {
      std::fprintf(stderr, "fuzz replay: %s: not a file or directory\n", argv[i]);
      return 2;
    }
  }
  for (const auto& path : inputs) {
    // A failing input is named before it runs: a crash leaves its name last in the log.
    std::fprintf(stderr, "fuzz replay: %s\n", path.c_str());
    const std::string bytes = ReadFile(path);
    // A copy of exactly `size` bytes, so that ASan sees a read past the end.
    std::vector<uint8_t> data(bytes.begin(), bytes.end());
    LLVMFuzzerTestOneInput(data.data(), data.size());
  }
  std::printf("fuzz replay: %zu inputs, no failure\n", inputs.size());
  if (inputs.size() < min_inputs) {
    std::fprintf(stderr, "fuzz replay: %zu inputs, fewer than the %zu expected\n", inputs.size(),
                 min_inputs);
    return 1;
  }
  return 0;
}
