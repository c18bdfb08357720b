// TOML configs: parse, validate, and write the resolved config.toml, which must
// read back as the same config (a run directory's config is read again).
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "train/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tcv::train::Config c;
  try {
    c = tcv::train::Config::from_string(text, "fuzz.toml");
  } catch (const tcv::Error&) {
    return 0;
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
