// Image decode (JPEG, PNG, BMP, ... through stb_image). The first input byte
// picks the mode (keep, gray, rgb); the rest is the file.
#include <cstdint>
#include <string>

#include "data/image.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  using tcv::data::ImageMode;
  const ImageMode modes[] = {ImageMode::keep, ImageMode::gray, ImageMode::rgb};
  const ImageMode mode = modes[data[0] % 3];
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  tcv::Tensor img;
  try {
    img = tcv::data::decode_image(bytes, "fuzz-image", mode);
  } catch (const tcv::Error&) {
    return 0;
  }
  TCV_FUZZ_EXPECT(img.dim() == 3 && img.size(1) > 0 && img.size(2) > 0);
  TCV_FUZZ_EXPECT(mode == ImageMode::gray  ? img.size(0) == 1
                  : mode == ImageMode::rgb ? img.size(0) == 3
                                           : (img.size(0) == 1 || img.size(0) == 3));
  return 0;
}
