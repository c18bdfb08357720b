// Drawing primitives of the pictures tcv-predict writes and report.html shows:
// segments with round ends (blended or opaque) and filled discs.
#include <gtest/gtest.h>

#include <cmath>

#include "data/draw.h"
#include "engine/tensor.h"

using namespace tcv;

namespace {

// The RGB of pixel (x, y) of a u8 (3, H, W) image.
std::array<int, 3> at(const Tensor& img, int64_t x, int64_t y) {
  const auto* p = static_cast<const uint8_t*>(img.data_ptr());
  const int64_t H = img.size(1), W = img.size(2);
  return {p[y * W + x], p[(H + y) * W + x], p[(2 * H + y) * W + x]};
}

int64_t count_color(const Tensor& img, std::array<int, 3> c) {
  int64_t n = 0;
  for (int64_t y = 0; y < img.size(1); ++y)
    for (int64_t x = 0; x < img.size(2); ++x) n += at(img, x, y) == c;
  return n;
}

}  // namespace

TEST(Draw, LineCoversThePixelsWithinHalfItsWidth) {
  Tensor img = zeros({3, 20, 30}, {.dtype = DType::u8});
  // Horizontal, 3 wide, through the centres of row 10: rows 9, 10, 11
  // (centres 9.5..11.5 lie within 1.5 of y = 10.5), columns 5..24 plus the
  // round ends (distance of pixel centres to the end points <= 1.5).
  data::draw_line(img, 5.5, 10.5, 24.5, 10.5, {255, 0, 0}, 3);
  for (int64_t x = 5; x <= 24; ++x)
    for (int64_t y = 9; y <= 11; ++y) EXPECT_EQ(at(img, x, y), (std::array<int, 3>{255, 0, 0}));
  EXPECT_EQ(at(img, 5, 8), (std::array<int, 3>{0, 0, 0}));
  EXPECT_EQ(at(img, 15, 12), (std::array<int, 3>{0, 0, 0}));
  // Round ends: the column beyond each end (centres within 1 and sqrt(2) of
  // the end point), not two columns beyond.
  EXPECT_EQ(at(img, 4, 10), (std::array<int, 3>{255, 0, 0}));
  EXPECT_EQ(at(img, 4, 9), (std::array<int, 3>{255, 0, 0}));
  EXPECT_EQ(at(img, 25, 11), (std::array<int, 3>{255, 0, 0}));
  EXPECT_EQ(at(img, 4, 8), (std::array<int, 3>{0, 0, 0}));
  EXPECT_EQ(at(img, 3, 10), (std::array<int, 3>{0, 0, 0}));
  EXPECT_EQ(count_color(img, {255, 0, 0}), 22 * 3);
}

TEST(Draw, BlendedLineMixesWithThePixels) {
  Tensor img = full({3, 8, 8}, 100, {.dtype = DType::u8});
  data::draw_line(img, 0, 4, 8, 4, {200, 0, 50}, 2, 0.6);
  // 0.6 * colour + 0.4 * 100, rounded.
  EXPECT_EQ(at(img, 3, 4), (std::array<int, 3>{160, 40, 70}));
  EXPECT_EQ(at(img, 3, 1), (std::array<int, 3>{100, 100, 100}));
}

TEST(Draw, DiscAndClipping) {
  Tensor img = zeros({3, 10, 10}, {.dtype = DType::u8});
  // Radius 2 around the centre of pixel (4, 4): 13 pixel centres within 2.
  data::draw_disc(img, 4.5, 4.5, 2, {0, 255, 0});
  EXPECT_EQ(count_color(img, {0, 255, 0}), 13);
  EXPECT_EQ(at(img, 4, 2), (std::array<int, 3>{0, 255, 0}));
  EXPECT_EQ(at(img, 3, 3), (std::array<int, 3>{0, 255, 0}));
  EXPECT_EQ(at(img, 2, 2), (std::array<int, 3>{0, 0, 0}));
  // Outside the image or not finite: nothing drawn, no crash.
  Tensor other = zeros({3, 10, 10}, {.dtype = DType::u8});
  data::draw_disc(other, -50, -50, 3, {0, 255, 0});
  data::draw_line(other, NAN, 0, 5, 5, {0, 255, 0}, 2);
  EXPECT_EQ(count_color(other, {0, 255, 0}), 0);
  // A line leaving the image is clipped.
  data::draw_line(other, -5, 5.5, 50, 5.5, {0, 0, 255}, 1);
  EXPECT_EQ(count_color(other, {0, 0, 255}), 10);
}
