// Detection transforms: boxes move exactly with the image. The test image has
// solid rectangles of known colours on black; after each transform, every box
// must still frame exactly its colour.
#include <gtest/gtest.h>

#include <cmath>

#include "data/det/transforms.h"
#include "support/gradcheck.h"

using namespace tcv;
using namespace tcv::data;

namespace {

constexpr int64_t kH = 60, kW = 80;
const std::array<uint8_t, 3> kColours[3] = {{200, 0, 0}, {0, 200, 0}, {0, 0, 200}};

// Objects: A [10, 10, 30, 40) red, B [50, 20, 70, 50) green, C [36, 44, 44, 58) blue (difficult).
DetSample sample() {
  DetSample s;
  s.image = zeros({3, kH, kW}, {.dtype = DType::u8});
  const Box boxes[3] = {{10, 10, 30, 40}, {50, 20, 70, 50}, {36, 44, 44, 58}};
  uint8_t* p = s.image.data<uint8_t>();
  for (int k = 0; k < 3; ++k) {
    for (int64_t y = int64_t(boxes[k][1]); y < int64_t(boxes[k][3]); ++y)
      for (int64_t x = int64_t(boxes[k][0]); x < int64_t(boxes[k][2]); ++x)
        for (int c = 0; c < 3; ++c) p[(c * kH + y) * kW + x] = kColours[k][c];
    s.target.add(boxes[k], k + 1, k == 2, false);
  }
  s.orig_height = kH;
  s.orig_width = kW;
  return s;
}

std::array<uint8_t, 3> pixel(const Tensor& img, int64_t y, int64_t x) {
  const int64_t H = img.size(1), W = img.size(2);
  const uint8_t* p = img.contiguous().data<uint8_t>();
  return {p[y * W + x], p[(H + y) * W + x], p[(2 * H + y) * W + x]};
}

// Every box frames its object's colour exactly: all pixels inside (shrunk by
// `margin`) have it, and (margin 0 only) none of the rows and columns just
// outside the box does. Boxes must have integer corners when margin is 0.
void expect_boxes_frame_colours(const DetSample& s, int64_t margin, const std::string& what) {
  const int64_t H = s.image.size(1), W = s.image.size(2);
  for (int64_t k = 0; k < s.target.size(); ++k) {
    const Box& b = s.target.boxes[static_cast<size_t>(k)];
    const auto colour = kColours[s.target.labels[static_cast<size_t>(k)] - 1];
    if (margin == 0) {
      for (double v : b) ASSERT_EQ(v, std::floor(v)) << what << ": box corner " << v;
    }
    const auto x1 = int64_t(std::ceil(b[0])) + margin, y1 = int64_t(std::ceil(b[1])) + margin;
    const auto x2 = int64_t(std::floor(b[2])) - margin, y2 = int64_t(std::floor(b[3])) - margin;
    ASSERT_GE(b[0], 0) << what;
    ASSERT_GE(b[1], 0) << what;
    ASSERT_LE(b[2], double(W)) << what;
    ASSERT_LE(b[3], double(H)) << what;
    for (int64_t y = y1; y < y2; ++y)
      for (int64_t x = x1; x < x2; ++x)
        ASSERT_EQ(pixel(s.image, y, x), colour)
            << what << ": object " << k << " at " << x << "," << y;
    if (margin > 0) continue;
    for (int64_t y = y1; y < y2; ++y) {
      if (x1 > 0) {
        ASSERT_NE(pixel(s.image, y, x1 - 1), colour) << what << ": box not tight (left)";
      }
      if (x2 < W) {
        ASSERT_NE(pixel(s.image, y, x2), colour) << what << ": box not tight (right)";
      }
    }
    for (int64_t x = x1; x < x2; ++x) {
      if (y1 > 0) {
        ASSERT_NE(pixel(s.image, y1 - 1, x), colour) << what << ": box not tight (top)";
      }
      if (y2 < H) {
        ASSERT_NE(pixel(s.image, y2, x), colour) << what << ": box not tight (bottom)";
      }
    }
  }
}

}  // namespace

TEST(DetTransforms, FlipExpandCropResizeMoveBoxesWithTheImage) {
  DetSample s = sample();
  expect_boxes_frame_colours(s, 0, "original");

  DetSample f = sample();
  det_hflip(f);
  EXPECT_EQ(f.target.boxes[0], (Box{50, 10, 70, 40}));
  expect_boxes_frame_colours(f, 0, "flip");
  det_hflip(f);
  EXPECT_EQ(f.image.to_vector<uint8_t>(), s.image.to_vector<uint8_t>());

  DetSample e = sample();
  det_expand(e, 7, 13, 100, 120, {1, 2, 3});
  EXPECT_EQ(e.image.shape(), (Shape{3, 100, 120}));
  EXPECT_EQ(e.target.boxes[1], (Box{63, 27, 83, 57}));
  EXPECT_EQ(pixel(e.image, 0, 0), (std::array<uint8_t, 3>{1, 2, 3}));
  EXPECT_EQ(pixel(e.image, 7 + kH, 13), (std::array<uint8_t, 3>{1, 2, 3}));
  EXPECT_EQ(pixel(e.image, 7, 13 + kW), (std::array<uint8_t, 3>{1, 2, 3}));
  EXPECT_EQ(pixel(e.image, 7, 13), (std::array<uint8_t, 3>{0, 0, 0}));
  expect_boxes_frame_colours(e, 0, "expand");

  // Crop [15, 5) - (60, 45): A's centre (20, 25) and B's (60, 35)... B's lies on
  // the right edge (not strictly inside): dropped. C's centre (40, 51) is below.
  DetSample c = sample();
  det_crop(c, 15, 5, 60, 45);
  EXPECT_EQ(c.image.shape(), (Shape{3, 40, 45}));
  ASSERT_EQ(c.target.size(), 1);
  EXPECT_EQ(c.target.boxes[0], (Box{0, 5, 15, 35}));  // clipped to the window
  expect_boxes_frame_colours(c, 0, "crop");
  DetSample c2 = sample();
  det_crop(c2, 15, 5, 61, 55);  // now B's and C's centres are inside
  EXPECT_EQ(c2.target.labels, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(c2.target.difficult, (std::vector<uint8_t>{0, 0, 1}));
  EXPECT_EQ(c2.target.boxes[1], (Box{35, 15, 46, 45}));
  expect_boxes_frame_colours(c2, 0, "crop 2");
  EXPECT_NE(tcv::testing::error_of([&] { det_crop(c2, 0, 0, 47, 10); }).find("outside the 46x50"),
            std::string::npos);

  // Resize by 2 and by 1/2: boxes scale; inside them (away from the blended
  // edge pixels) the colour is exact.
  DetSample r = sample();
  det_resize(r, 120, 160);
  EXPECT_EQ(r.target.boxes[0], (Box{20, 20, 60, 80}));
  expect_boxes_frame_colours(r, 1, "resize x2");
  DetSample q = sample();
  det_resize(q, 30, 40);
  EXPECT_EQ(q.target.boxes[1], (Box{25, 10, 35, 25}));
  expect_boxes_frame_colours(q, 1, "resize /2");
  // Any size: boxes scale by (out / in) per axis.
  DetSample t = sample();
  det_resize(t, 300, 300);
  EXPECT_EQ(t.target.boxes[0], (Box{10 * 3.75, 10 * 5.0, 30 * 3.75, 40 * 5.0}));
  expect_boxes_frame_colours(t, 3, "resize to 300");
}

TEST(DetTransforms, RandomFlipExpandCropKeepBoxesExact) {
  const std::vector<DetTransform> steps = {DetRandomFlip{}, DetRandomExpand{.fill = {7, 7, 7}},
                                           DetRandomIouCrop{}};
  int64_t changed = 0, dropped = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    DetSample s = sample();
    Rng rng(seed, 1);
    for (const auto& t : steps) t(s, rng);
    expect_boxes_frame_colours(s, 0, "seed " + std::to_string(seed));
    ASSERT_GE(s.target.size(), 1);  // a crop keeps at least one box centre
    changed += s.image.size(1) != kH || s.image.size(2) != kW;
    dropped += s.target.size() < 3;
    // The same stream gives the same result.
    DetSample again = sample();
    Rng rng2(seed, 1);
    for (const auto& t : steps) t(again, rng2);
    ASSERT_EQ(again.target.boxes, s.target.boxes);
    ASSERT_EQ(again.image.to_vector<uint8_t>(), s.image.to_vector<uint8_t>());
  }
  EXPECT_GT(changed, 200);
  EXPECT_GT(dropped, 30);
}

TEST(DetTransforms, IouCropWindowMeetsItsConstraints) {
  const std::vector<Box> boxes = {{10, 10, 30, 40}, {50, 20, 70, 50}};
  for (double min_iou : {0.1, 0.3, 0.5}) {
    int found = 0;
    for (uint64_t seed = 0; seed < 200; ++seed) {
      Rng rng(seed, 9);
      const auto w = iou_crop_window(boxes, kH, kW, min_iou, 0.3, 50, rng);
      if (!w) continue;
      ++found;
      const auto [x1, y1, x2, y2] = *w;
      ASSERT_TRUE(x1 >= 0 && y1 >= 0 && x2 <= kW && y2 <= kH && x1 < x2 && y1 < y2);
      const auto iou = box_iou_with(boxes, {double(x1), double(y1), double(x2), double(y2)});
      ASSERT_GE(std::max(iou[0], iou[1]), min_iou);
      bool centre = false;
      for (const Box& b : boxes) {
        const double cx = (b[0] + b[2]) / 2, cy = (b[1] + b[3]) / 2;
        centre = centre || (x1 < cx && cx < x2 && y1 < cy && cy < y2);
      }
      ASSERT_TRUE(centre);
      // scale >= 0.3 and aspect in [1/2, 2]: each side at least 0.3 / sqrt(2) of the image.
      ASSERT_GE(double(x2 - x1), std::floor(0.3 / std::sqrt(2.0) * kW));
      ASSERT_GE(double(y2 - y1), std::floor(0.3 / std::sqrt(2.0) * kH));
    }
    EXPECT_GT(found, 50) << min_iou;
  }
  Rng rng(1, 1);
  EXPECT_FALSE(iou_crop_window(boxes, kH, kW, 1.01, 0.3, 50, rng).has_value());
  EXPECT_EQ(box_iou_with(boxes, {10, 10, 30, 40})[0], 1.0);
  EXPECT_EQ(box_iou_with(boxes, {10, 10, 20, 40})[0], 0.5);
}

TEST(DetTransforms, PhotometricOps) {
  Tensor img = from_vector<uint8_t>({0, 100, 255, 10, 20, 30, 250, 5, 128}, {3, 1, 3});
  Tensor a = img.clone();
  scale_intensity(a, 1.5);  // truncated after clipping: 150, 255, 15 ...
  EXPECT_EQ(a.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 150, 255, 15, 30, 45, 255, 7, 192}));
  Tensor b = img.clone();
  shift_intensity(b, -20);
  EXPECT_EQ(b.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 80, 235, 0, 0, 10, 230, 0, 108}));
  Tensor p = img.clone();
  permute_channels(p, {2, 0, 1});
  EXPECT_EQ(p.to_vector<uint8_t>(), (std::vector<uint8_t>{250, 5, 128, 0, 100, 255, 10, 20, 30}));
  // OpenCV's float HSV: pure red shifted by 120 degrees is pure green; by 240, blue.
  Tensor red = from_vector<uint8_t>({255, 0, 0}, {3, 1, 1});
  Tensor g = red.clone();
  shift_hue(g, 120);
  EXPECT_EQ(g.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 255, 0}));
  Tensor bl = red.clone();
  shift_hue(bl, -120);
  EXPECT_EQ(bl.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0, 255}));
  // Saturation 0 leaves the value (the largest channel) in every channel; 0.5
  // moves the others half way to it.
  Tensor grey = from_vector<uint8_t>({200, 100, 50}, {3, 1, 1});
  scale_saturation(grey, 0.0);
  EXPECT_EQ(grey.to_vector<uint8_t>(), (std::vector<uint8_t>{200, 200, 200}));
  Tensor half = from_vector<uint8_t>({200, 100, 0}, {3, 1, 1});
  scale_saturation(half, 0.5);
  const auto h = half.to_vector<uint8_t>();
  EXPECT_EQ(h[0], 200);
  EXPECT_NEAR(h[1], 150, 1);
  EXPECT_NEAR(h[2], 100, 1);
  // The distortion moves no box, draws only from its stream, and with p = 0 does nothing.
  DetSample s = sample();
  const Tensor before = s.image.clone();
  Rng r0(3, 3);
  PhotometricDistort{.p = 0}(s, r0);
  EXPECT_EQ(s.image.to_vector<uint8_t>(), before.to_vector<uint8_t>());
  DetSample d1 = sample(), d2 = sample();
  Rng r1(4, 4), r2(4, 4);
  PhotometricDistort{.p = 1}(d1, r1);
  PhotometricDistort{.p = 1}(d2, r2);
  EXPECT_EQ(d1.image.to_vector<uint8_t>(), d2.image.to_vector<uint8_t>());
  EXPECT_NE(d1.image.to_vector<uint8_t>(), before.to_vector<uint8_t>());
  EXPECT_EQ(d1.target.boxes, sample().target.boxes);
}

TEST(DetTransforms, SsdPipelineAndEvalTransform) {
  for (uint64_t seed = 0; seed < 40; ++seed) {
    DetSample s = sample();
    s.target.iscrowd[1] = 1;  // B is a crowd region: not trained on
    Rng rng(seed, 0);
    ssd_train_transform({.size = 300})(s, rng);
    ASSERT_EQ(s.image.shape(), (Shape{3, 300, 300}));
    for (int64_t k = 0; k < s.target.size(); ++k) {
      EXPECT_EQ(s.target.labels[static_cast<size_t>(k)], 1);  // C difficult, B crowd: dropped
      const Box& b = s.target.boxes[static_cast<size_t>(k)];
      EXPECT_TRUE(b[0] >= 0 && b[1] >= 0 && b[2] <= 300 && b[3] <= 300 && b[0] < b[2] &&
                  b[1] < b[3]);
    }
  }
  DetSample k = sample();
  Rng rng(1, 0);
  ssd_train_transform({.size = 100, .photometric = false, .keep_difficult = true})(k, rng);
  EXPECT_EQ(k.image.shape(), (Shape{3, 100, 100}));
  DetSample e = sample();
  det_eval_transform(120)(e, rng);
  EXPECT_EQ(e.target.size(), 3);  // evaluation keeps everything
  EXPECT_EQ(e.target.boxes[2], (Box{36 * 1.5, 44 * 2.0, 44 * 1.5, 58 * 2.0}));
  DetSample z = sample();
  z.target = {};
  DetRandomIouCrop{}(z, rng);  // no boxes: left as it is
  EXPECT_EQ(z.image.shape(), (Shape{3, kH, kW}));
}

// Issue 25, item 3: SSD's zoom out multiplies an image's pixels by up to 16;
// the canvas stays within max_pixels (data.max_pixels), and an image already
// above it is left as it is.
TEST(DetTransforms, ExpandStaysWithinMaxPixels) {
  const DetRandomExpand plain{.p = 1.0};
  const DetRandomExpand bounded{.p = 1.0, .max_pixels = 3 * kH * kW};
  int64_t largest = 0, largest_plain = 0;
  for (uint64_t k = 0; k < 200; ++k) {
    DetSample a = sample(), b = sample();
    Rng ra(7, k), rb(7, k);
    plain(a, ra);
    bounded(b, rb);
    largest_plain = std::max(largest_plain, a.image.size(1) * a.image.size(2));
    const int64_t px = b.image.size(1) * b.image.size(2);
    largest = std::max(largest, px);
    ASSERT_LE(px, 3 * kH * kW);
    ASSERT_GE(b.image.size(1), kH);
    ASSERT_GE(b.image.size(2), kW);
    expect_boxes_frame_colours(b, 0, "bounded expand " + std::to_string(k));
  }
  EXPECT_GT(largest_plain, 3 * kH * kW);  // the bound was needed
  EXPECT_GT(largest, 2 * kH * kW);        // and still lets the canvas grow
  DetSample s = sample();
  Rng r(7, 0);
  DetRandomExpand{.p = 1.0, .max_pixels = kH * kW - 1}(s, r);
  EXPECT_EQ(s.image.shape(), (Shape{3, kH, kW}));
}
