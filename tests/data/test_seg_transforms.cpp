// Segmentation transforms: the label map moves exactly with the image. The
// images here encode where each pixel came from in its colour, and the labels
// are a function of that colour, so after any crop, flip, padding or scaling
// the label of a pixel can be checked against the image alone.
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "data/seg/transforms.h"
#include "support/gradcheck.h"

using namespace tcv;
using namespace tcv::data;

namespace {

constexpr uint8_t kReal = 200, kPad = 7;  // blue of image pixels, of padding
const std::array<uint8_t, 3> kFill{0, 0, kPad};

// Pixel (y, x) = (y, x, 200); its label (7 y + 3 x) mod 20, or 255 where that is 19.
int coord_label(int r, int g) {
  const int v = (7 * r + 3 * g) % 20;
  return v == 19 ? 255 : v;
}

// An H x W sample whose pixel (y, x) is (r, g, kReal) with label l, where
// {r, g, l} = px(y, x).
template <typename F>
SegSample sample_of(int64_t H, int64_t W, F px) {
  SegSample s;
  s.image = empty({3, H, W}, {.dtype = DType::u8});
  s.label = empty({H, W}, {.dtype = DType::u8});
  uint8_t* p = s.image.data<uint8_t>();
  uint8_t* l = s.label.data<uint8_t>();
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      const std::array<int, 3> v = px(static_cast<int>(y), static_cast<int>(x));
      p[y * W + x] = static_cast<uint8_t>(v[0]);
      p[H * W + y * W + x] = static_cast<uint8_t>(v[1]);
      p[2 * H * W + y * W + x] = kReal;
      l[y * W + x] = static_cast<uint8_t>(v[2]);
    }
  return s;
}

SegSample coord_sample(int64_t H, int64_t W) {
  SegSample s = sample_of(H, W, [](int y, int x) { return std::array{y, x, coord_label(y, x)}; });
  s.orig_height = H;
  s.orig_width = W;
  return s;
}

// Blocks of 8 x 8 pixels: block (by, bx) is (30 by, 30 bx, 200), its label
// (by * 8 + bx) mod 19.
constexpr int kBlock = 8;
int block_label(int by, int bx) {
  return (by * 8 + bx) % 19;
}

SegSample block_sample(int64_t H, int64_t W) {
  return sample_of(H, W, [](int y, int x) {
    const int by = y / kBlock, bx = x / kBlock;
    return std::array{30 * by, 30 * bx, block_label(by, bx)};
  });
}

struct Px {
  int r, g, b, label;
};

Px at(const SegSample& s, int64_t y, int64_t x) {
  const int64_t H = s.image.size(1), W = s.image.size(2);
  const uint8_t* p = s.image.data<uint8_t>();
  return {p[y * W + x], p[H * W + y * W + x], p[2 * H * W + y * W + x],
          s.label.data<uint8_t>()[y * W + x]};
}

// Every pixel of a coordinate image: padding is labelled 255, image pixels carry
// the label of the pixel their colour names. Returns the number of image pixels.
int64_t check_coords(const SegSample& s) {
  EXPECT_EQ(s.label.size(0), s.image.size(1));
  EXPECT_EQ(s.label.size(1), s.image.size(2));
  int64_t real = 0;
  for (int64_t y = 0; y < s.image.size(1); ++y)
    for (int64_t x = 0; x < s.image.size(2); ++x) {
      const Px p = at(s, y, x);
      if (p.b == kPad) {
        EXPECT_EQ(p.r, 0);
        EXPECT_EQ(p.label, 255) << "padding at (" << y << ", " << x << ")";
      } else {
        EXPECT_EQ(p.b, kReal);
        EXPECT_EQ(p.label, coord_label(p.r, p.g)) << "at (" << y << ", " << x << ")";
        ++real;
      }
      if (::testing::Test::HasFailure()) return real;
    }
  return real;
}

}  // namespace

TEST(SegTransforms, CropFlipAndPaddingMoveTheLabelWithTheImage) {
  const SegSample src = coord_sample(30, 40);
  // Inside, across every border, and larger than the image.
  const std::vector<std::array<int64_t, 4>> windows{
      {5, 7, 10, 12}, {-4, -6, 10, 12}, {25, 35, 10, 12}, {-3, -2, 36, 45}, {0, 0, 30, 40}};
  for (const auto& w : windows) {
    SegSample s = src;
    seg_crop(s, w[0], w[1], w[2], w[3], kFill);
    EXPECT_EQ(s.image.shape(), (Shape{3, w[2], w[3]}));
    // The window's pixel (y, x) is the source's (top + y, left + x) when inside.
    for (int64_t y = 0; y < w[2]; ++y)
      for (int64_t x = 0; x < w[3]; ++x) {
        const int64_t sy = w[0] + y, sx = w[1] + x;
        const bool inside = sy >= 0 && sy < 30 && sx >= 0 && sx < 40;
        const Px p = at(s, y, x);
        ASSERT_EQ(p.b, inside ? kReal : kPad);
        if (inside) {
          ASSERT_EQ(p.r, sy);
          ASSERT_EQ(p.g, sx);
        }
      }
    check_coords(s);
    seg_hflip(s);
    for (int64_t y = 0; y < w[2]; ++y) {
      const Px p = at(s, y, w[3] - 1);
      if (p.b == kReal) {
        EXPECT_EQ(p.g, w[1]);  // the first column is now the last
      }
    }
    check_coords(s);
  }
}

TEST(SegTransforms, NearestNeighbourLabelsFollowTheBilinearImage) {
  // Down and up, by factors that do and do not divide the size.
  for (const auto& hw : std::vector<std::array<int64_t, 2>>{
           {24, 32}, {17, 45}, {48, 64}, {96, 128}, {101, 77}, {48, 64}}) {
    SegSample s = block_sample(48, 64);
    seg_resize(s, hw[0], hw[1]);
    ASSERT_EQ(s.image.shape(), (Shape{3, hw[0], hw[1]}));
    ASSERT_EQ(s.label.shape(), (Shape{hw[0], hw[1]}));
    int64_t pure = 0;
    for (int64_t y = 0; y < hw[0]; ++y)
      for (int64_t x = 0; x < hw[1]; ++x) {
        // The label is that of the source pixel whose centre is nearest to the
        // point the bilinear resize samples: floor((o + 0.5) * in / out).
        const auto sy = static_cast<int64_t>(std::floor((y + 0.5) * 48.0 / double(hw[0])));
        const auto sx = static_cast<int64_t>(std::floor((x + 0.5) * 64.0 / double(hw[1])));
        const Px p = at(s, y, x);
        ASSERT_EQ(p.label, block_label(int(sy) / kBlock, int(sx) / kBlock)) << y << ", " << x;
        // Where the image shows one block's colour, that block's label.
        if (p.r % 30 == 0 && p.g % 30 == 0) {
          ASSERT_EQ(p.label, block_label(p.r / 30, p.g / 30)) << y << ", " << x;
          ++pure;
        }
      }
    EXPECT_GT(pure, hw[0] * hw[1] / 2);
  }
  // The nearest-neighbour index rule on its own.
  Tensor l = empty({1, 4}, {.dtype = DType::u8});
  for (int k = 0; k < 4; ++k) l.data<uint8_t>()[k] = static_cast<uint8_t>(10 + k);
  EXPECT_EQ(resize_labels(l, 1, 2).to_vector<uint8_t>(), (std::vector<uint8_t>{11, 13}));
  EXPECT_EQ(resize_labels(l, 1, 8).to_vector<uint8_t>(),
            (std::vector<uint8_t>{10, 10, 11, 11, 12, 12, 13, 13}));
}

TEST(SegTransforms, TrainPipelineKeepsLabelsOnTheirPixels) {
  // Scale 0.5-2, crop (with padding when the scaled image is smaller), flip.
  const SegTransform t =
      seg_train_transform({.crop = {40, 56}, .photometric = Photometric::off, .fill = kFill});
  int64_t padded = 0, flipped_checks = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    SegSample s = block_sample(48, 64);
    Rng rng(3, seed);
    t(s, rng);
    ASSERT_EQ(s.image.shape(), (Shape{3, 40, 56}));
    ASSERT_EQ(s.label.shape(), (Shape{40, 56}));
    for (int64_t y = 0; y < 40; ++y)
      for (int64_t x = 0; x < 56; ++x) {
        const Px p = at(s, y, x);
        if (p.b == kPad) {
          ASSERT_EQ(p.label, 255);
          ++padded;
        } else if (p.r % 30 == 0 && p.g % 30 == 0) {
          ASSERT_EQ(p.label, block_label(p.r / 30, p.g / 30)) << "seed " << seed;
          ++flipped_checks;
        }
      }
  }
  EXPECT_GT(padded, 0);  // some draws scaled below the crop size
  EXPECT_GT(flipped_checks, 40 * 40 * 56 / 3);
  // The same draws give the same sample.
  SegSample a = block_sample(48, 64), b = block_sample(48, 64);
  Rng ra(9, 1), rb(9, 1);
  t(a, ra);
  t(b, rb);
  EXPECT_EQ(a.image.to_vector<uint8_t>(), b.image.to_vector<uint8_t>());
  EXPECT_EQ(a.label.to_vector<uint8_t>(), b.label.to_vector<uint8_t>());
}

TEST(SegTransforms, RandomScaleSizes) {
  int64_t lo = 1 << 20, hi = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SegSample s = coord_sample(20, 30);
    Rng rng(1, seed);
    RandomScale{}(s, rng);
    const int64_t h = s.image.size(1), w = s.image.size(2);
    EXPECT_EQ(s.label.size(0), h);
    // One factor for both sides: w / h stays 3 / 2 up to rounding.
    EXPECT_LE(std::abs(double(w) / double(h) - 1.5), 1.5 / double(h) + 1e-9);
    lo = std::min(lo, h);
    hi = std::max(hi, h);
  }
  EXPECT_GE(lo, 10);
  EXPECT_LE(hi, 40);
  EXPECT_LT(lo, 13);
  EXPECT_GT(hi, 37);
  // mmsegmentation's keep-ratio fit: Cityscapes into (2048, 1024), a VOC image into (2048, 512).
  EXPECT_EQ(fit_size(1024, 2048, {2048, 1024}), (std::array<int64_t, 2>{1024, 2048}));
  EXPECT_EQ(fit_size(375, 500, {2048, 512}), (std::array<int64_t, 2>{512, 683}));
  // With a base size: base * ratio, fitted.
  SegSample s = coord_sample(20, 40);
  Rng rng(0, 0);
  RandomScale{.ratio = {0.5, 0.5}, .base = {40, 10}}(s, rng);
  EXPECT_EQ(s.image.shape(), (Shape{3, 5, 10}));
}

TEST(SegTransforms, CatMaxRatioRedrawsCropsDominatedByOneClass) {
  // Class 1 on columns 0..24, class 2 on 25..39: a 20-wide crop at left l holds
  // both within the ratio for l in 11..19 (9 of 21 positions).
  SegSample src = coord_sample(20, 40);
  for (int64_t y = 0; y < 20; ++y)
    for (int64_t x = 0; x < 40; ++x) src.label.data<uint8_t>()[y * 40 + x] = x < 25 ? 1 : 2;
  auto balanced = [](const SegSample& s) {
    int64_t twos = 0;
    for (uint8_t v : s.label.to_vector<uint8_t>()) twos += v == 2;
    const double f = double(twos) / double(s.label.numel());
    return f > 0.25 && f < 0.75;
  };
  int64_t with = 0, without = 0;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    SegSample a = src, b = src;
    Rng ra(4, seed), rb(4, seed);
    RandomCropSeg{.size = {20, 20}, .cat_max_ratio = 0.75}(a, ra);
    RandomCropSeg{.size = {20, 20}}(b, rb);
    with += balanced(a);
    without += balanced(b);
  }
  EXPECT_GE(with, 95);  // 1 - (12/21)^10 = 0.996 per sample
  EXPECT_LE(without, 65);
  EXPECT_GE(without, 20);
}

TEST(SegTransforms, PhotometricDistortionLeavesLabelsAlone) {
  const SegSample src = coord_sample(16, 16);
  int64_t changed = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    SegSample s = src;
    Rng rng(2, seed);
    PhotoMetricDistortion{}(s, rng);
    EXPECT_EQ(s.label.to_vector<uint8_t>(), src.label.to_vector<uint8_t>());
    EXPECT_EQ(s.image.shape(), src.image.shape());
    changed += s.image.to_vector<uint8_t>() != src.image.to_vector<uint8_t>();
  }
  EXPECT_GE(changed, 15);  // each draw changes nothing with probability 1/16
}

TEST(SegTransforms, PhotometricOps) {
  // Brightness and contrast: x * alpha + beta, clipped, truncated.
  Tensor img = empty({3, 1, 2}, {.dtype = DType::u8});
  const std::vector<uint8_t> v{0, 100, 200, 250, 10, 255};
  std::copy(v.begin(), v.end(), img.data<uint8_t>());
  EXPECT_EQ(scale_shift_pixels(img, 1.0, 10.7).to_vector<uint8_t>(),
            (std::vector<uint8_t>{10, 110, 210, 255, 20, 255}));
  EXPECT_EQ(scale_shift_pixels(img, 1.5, -20).to_vector<uint8_t>(),
            (std::vector<uint8_t>{0, 130, 255, 255, 0, 255}));
  // HSV: no change is the identity on every colour of a grid, a full turn too.
  Tensor grid = empty({3, 16, 16}, {.dtype = DType::u8});
  for (int64_t k = 0; k < 256; ++k) {
    grid.data<uint8_t>()[k] = static_cast<uint8_t>(k);
    grid.data<uint8_t>()[256 + k] = static_cast<uint8_t>((k * 37) % 256);
    grid.data<uint8_t>()[512 + k] = static_cast<uint8_t>((k * 101 + 13) % 256);
  }
  EXPECT_EQ(adjust_hsv(grid, 1.0, 0.0).to_vector<uint8_t>(), grid.to_vector<uint8_t>());
  EXPECT_EQ(adjust_hsv(grid, 1.0, 360.0).to_vector<uint8_t>(), grid.to_vector<uint8_t>());
  // Red turned by 120 degrees is green; no saturation is grey at the value.
  Tensor red = empty({3, 1, 1}, {.dtype = DType::u8});
  red.data<uint8_t>()[0] = 255;
  red.data<uint8_t>()[1] = 0;
  red.data<uint8_t>()[2] = 0;
  EXPECT_EQ(adjust_hsv(red, 1.0, 120.0).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 255, 0}));
  EXPECT_EQ(adjust_hsv(red, 0.0, 0.0).to_vector<uint8_t>(), (std::vector<uint8_t>{255, 255, 255}));
}

TEST(SegTransforms, EvalResizeKeepsOrResizesTheLabel) {
  const SegSample src = coord_sample(30, 40);
  SegSample keep = src, both = src;
  Rng rng(0, 0);
  seg_eval_transform({.fit = {80, 15}})(keep, rng);
  EXPECT_EQ(keep.image.shape(), (Shape{3, 15, 20}));
  EXPECT_EQ(keep.label.shape(), (Shape{30, 40}));  // compared at the original size
  EXPECT_EQ(keep.label.to_vector<uint8_t>(), src.label.to_vector<uint8_t>());
  seg_eval_transform({.size = {60, 80}, .labels = EvalLabels::resize})(both, rng);
  EXPECT_EQ(both.label.shape(), (Shape{60, 80}));
  // Later steps leave a label map of another size than its image alone.
  seg_hflip(keep);
  EXPECT_EQ(keep.label.to_vector<uint8_t>(), src.label.to_vector<uint8_t>());
  EXPECT_EQ(mean_fill({0.485, 0.456, 0.406}, 255.0), (std::array<uint8_t, 3>{124, 116, 104}));
  EXPECT_EQ(mean_fill({123.675, 116.28, 103.53}, 1.0), (std::array<uint8_t, 3>{124, 116, 104}));
}
