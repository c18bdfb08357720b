// --set key=value overrides: each input line is one assignment, applied in
// order to the default config; then validation and the resolved config.toml,
// which must read back as the same config.
#include <cstdint>
#include <sstream>
#include <string>

#include "config_round_trip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  tcv::train::Config c;
  std::string line;
  while (std::getline(in, line)) {
    // Command-line values are short; long lines only slow the search for the
    // closest known key down (an edit distance against every key).
    if (line.size() > 256) continue;
    try {
      c.set_override(line);
    } catch (const tcv::Error&) {
    }
  }
  expect_resolved_config_reads_back(c);
  return 0;
}
