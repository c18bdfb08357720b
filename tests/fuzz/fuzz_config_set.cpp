// --set key=value overrides: each input line is one assignment, applied in
// order to the default config; then validation and the resolved config.toml,
// which must read back as the same config.
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz_support.h"
#include "train/config.h"

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
  try {
    c.validate();
  } catch (const tcv::Error&) {
  }
  const std::string resolved = c.to_toml();
  tcv::train::Config again;
  try {
    again = tcv::train::Config::from_string(resolved, "config.toml");
  } catch (const tcv::Error& e) {
    std::fprintf(stderr, "the resolved config does not read back: %s\n%s\n", e.what(),
                 resolved.c_str());
    std::abort();
  }
  // The same values (the first line is a comment naming the file read).
  const auto body = [](const std::string& t) { return t.substr(t.find('\n')); };
  TCV_FUZZ_EXPECT(body(again.to_toml()) == body(resolved));
  return 0;
}
