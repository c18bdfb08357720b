// TOML configs: parse, validate, and write the resolved config.toml, which must
// read back as the same config (a run directory's config is read again).
#include <cstdint>
#include <string>

#include "config_round_trip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tcv::train::Config c;
  try {
    c = tcv::train::Config::from_string(text, "fuzz.toml");
  } catch (const tcv::Error&) {
    return 0;
  }
  expect_resolved_config_reads_back(c);
  return 0;
}
