// COCO run-length masks and polygons painted onto an image
// (data/pose/dataset.h): compressed RLE strings (decode_coco_rle), uncompressed
// run lengths (any int64, the issue-25 wrap-arounds included) and polygons of
// any doubles. A mask paints inside its image or is a tcv::Error; a run-length
// mask that paints sets exactly the pixels of its odd runs.
//
// Input: byte 0 picks the kind (0 compressed, 1 uncompressed, 2 polygons),
// bytes 1 and 2 the image's height and width (1..64), the rest is the payload:
// the string, little-endian int64 runs, or little-endian doubles (byte 3: the
// number of polygons to cut them into).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "data/pose/dataset.h"
#include "fuzz_support.h"

using namespace tcv::data;

namespace {

// Paints `seg` on a fresh image with guard bytes on both sides; returns the
// pixels set, or -1 for a tcv::Error.
int64_t painted(const Segmentation& seg, int64_t H, int64_t W) {
  constexpr size_t kGuard = 64;
  std::vector<uint8_t> buf(static_cast<size_t>(H * W) + 2 * kGuard, 0);
  try {
    paint_segmentation(seg, buf.data() + kGuard, H, W, 1, "fuzz");
  } catch (const tcv::Error&) {
    return -1;
  }
  for (size_t k = 0; k < kGuard; ++k) TCV_FUZZ_EXPECT(buf[k] == 0 && buf[buf.size() - 1 - k] == 0);
  int64_t n = 0;
  for (size_t k = kGuard; k < buf.size() - kGuard; ++k) n += buf[k];
  return n;
}

void check_runs(const Segmentation& seg, int64_t H, int64_t W) {
  const int64_t n = painted(seg, H, W);
  if (n < 0) return;
  // Painted: the runs fit the image, and their odd ones are the pixels set.
  int64_t total = 0, on = 0;
  for (size_t k = 0; k < seg.rle.size(); ++k) {
    TCV_FUZZ_EXPECT(seg.rle[k] >= 0 && seg.rle[k] <= H * W - total);
    total += seg.rle[k];
    if (k % 2 == 1) on += seg.rle[k];
  }
  TCV_FUZZ_EXPECT(n == on);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const int kind = data[0] % 3;
  const int64_t H = 1 + data[1] % 64, W = 1 + data[2] % 64;
  const uint8_t* p = data + 3;
  const size_t n = size - 3;
  Segmentation seg;
  seg.rle_height = H;
  seg.rle_width = W;
  if (kind == 0) {
    try {
      seg.rle = decode_coco_rle(std::string(reinterpret_cast<const char*>(p), n), "fuzz");
    } catch (const tcv::Error&) {
      return 0;
    }
    for (int64_t run : seg.rle) TCV_FUZZ_EXPECT(run >= 0);
    if (!seg.rle.empty()) check_runs(seg, H, W);
  } else if (kind == 1) {
    for (size_t k = 0; k + 8 <= n; k += 8) {
      int64_t v;
      std::memcpy(&v, p + k, 8);
      seg.rle.push_back(v);
    }
    if (!seg.rle.empty()) check_runs(seg, H, W);
  } else {
    const size_t polys = 1 + (n > 0 ? p[0] % 4 : 0);
    std::vector<double> xy;
    for (size_t k = 1; k + 8 <= n; k += 8) {
      double v;
      std::memcpy(&v, p + k, 8);
      xy.push_back(v);
    }
    const size_t per = xy.size() / polys;
    for (size_t q = 0; q < polys && per > 0; ++q)
      seg.polygons.emplace_back(xy.begin() + static_cast<std::ptrdiff_t>(q * per),
                                xy.begin() + static_cast<std::ptrdiff_t>((q + 1) * per));
    const int64_t set = painted(seg, H, W);
    TCV_FUZZ_EXPECT(set <= H * W);
  }
  return 0;
}
