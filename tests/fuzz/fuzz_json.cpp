// json_parse (safetensors headers, trainer state, metrics lines): any bytes give
// a value or a tcv::Error, and what json_dump writes reads back as the same value.
#include <cstdint>
#include <string>

#include "engine/json.h"
#include "fuzz_support.h"
#include "kernels/base.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tcv::Json j;
  try {
    j = tcv::json_parse(text);
  } catch (const tcv::Error&) {
    return 0;
  }
  const std::string compact = tcv::json_dump(j);
  const std::string indented = tcv::json_dump(j, 2);
  TCV_FUZZ_EXPECT(tcv::json_parse(compact) == j);
  TCV_FUZZ_EXPECT(tcv::json_parse(indented) == j);
  TCV_FUZZ_EXPECT(tcv::json_dump(tcv::json_parse(compact)) == compact);
  return 0;
}
