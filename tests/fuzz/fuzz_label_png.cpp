// Label maps as PNGs (libspng): any bytes give a u8 (H, W) map of class indices
// or a tcv::Error.
#include <cstdint>
#include <string>

#include "data/label_png.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  tcv::data::LabelPng p;
  try {
    p = tcv::data::decode_label_png(bytes, "fuzz.png");
  } catch (const tcv::Error&) {
    return 0;
  }
  const tcv::Tensor& t = p.labels;
  TCV_FUZZ_EXPECT(t.dim() == 2 && t.size(0) > 0 && t.size(1) > 0 &&
                  t.dtype() == tcv::DType::u8 && t.is_contiguous());
  const int d = p.bit_depth;
  TCV_FUZZ_EXPECT(d == 1 || d == 2 || d == 4 || d == 8 ||
                  (d == 16 && p.kind == tcv::data::LabelPngKind::gray));
  if (d < 8) {
    const uint8_t* v = t.data<uint8_t>();
    for (int64_t i = 0; i < t.numel(); ++i) TCV_FUZZ_EXPECT(v[i] < (1 << d));
  }
  return 0;
}
