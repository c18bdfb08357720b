// Segmentation inference with toy models whose answers are known: a per-pixel
// linear map (any window or scale gives the same logits), a model that adds
// each window's mean (the sliding grid and its averaging show), one that adds
// the column index (flips show), one that reports the size it was given
// (scales show).
#include <gtest/gtest.h>

#include <cmath>

#include "engine/ops.h"
#include "support/gradcheck.h"
#include "train/seg_infer.h"

using namespace tcv;
using namespace tcv::train;

namespace {

// Seeded values in [-2, 2) (integers in [-8, 8) when `whole`).
Tensor random_images(const Shape& shape, uint64_t seed, bool whole = false) {
  Tensor t = empty(shape);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t k = 0; k < t.numel(); ++k) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = double(s >> 11) / double(1ull << 53);
    t.data<float>()[k] = whole ? float(std::floor(16 * u) - 8) : float(4 * u - 2);
  }
  return t;
}

// logits = W x + b per pixel, K = 4 classes from C = 3 channels.
SegForward linear_model() {
  const Tensor w = random_images({4, 3, 1, 1}, 7), b = random_images({4}, 8);
  return [w, b](const Tensor& x) { return ops::conv2d(x, w, b); };
}

// logits = x + the mean of x over the window it was given (per image and channel).
Tensor plus_window_mean(const Tensor& x) {
  return ops::add(x, ops::mean(x, {2, 3}, true));
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const auto x = a.contiguous().to_vector<float>(), y = b.contiguous().to_vector<float>();
  double m = 0;
  for (size_t k = 0; k < x.size(); ++k) m = std::max(m, std::abs(double(x[k]) - double(y[k])));
  return m;
}

bool equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         a.contiguous().to_vector<float>() == b.contiguous().to_vector<float>();
}

constexpr double kU = 1.0 / (1 << 24);  // f32 unit roundoff

}  // namespace

TEST(SegInfer, SlideWindowsFollowTheGrid) {
  // 10 x 9, crop (6, 4), stride (4, 3): rows [0, 6), [4, 10); columns
  // [0, 4), [3, 7) and the last moved back from [6, 9) to [5, 9).
  const auto w = slide_windows(10, 9, {6, 4}, {4, 3});
  const std::vector<SlideWindow> expected{{0, 6, 0, 4},  {0, 6, 3, 7},  {0, 6, 5, 9},
                                          {4, 10, 0, 4}, {4, 10, 3, 7}, {4, 10, 5, 9}};
  EXPECT_EQ(w, expected);
  // An image smaller than the crop: one window, the image.
  EXPECT_EQ(slide_windows(5, 3, {6, 4}, {4, 3}), (std::vector<SlideWindow>{{0, 5, 0, 3}}));
  // Cityscapes at mmsegmentation's (769, 769) / (513, 513): 2 x 4 windows.
  EXPECT_EQ(slide_windows(1024, 2048, {769, 769}, {513, 513}).size(), 8u);
  EXPECT_NE(tcv::testing::error_of([] {
              slide_windows(10, 10, {4, 4}, {5, 4});
            }).find("would leave pixels no window covers"),
            std::string::npos);
}

TEST(SegInfer, WholeAndSlideOfALocalModel) {
  const SegForward f = linear_model();
  const Tensor x = random_images({2, 3, 10, 9}, 1);
  const Tensor ref = f(x);
  // Whole image: the model's logits, unchanged.
  EXPECT_TRUE(equal(seg_logits(f, x, {}), ref));
  // A crop as large as the image (or larger): exactly whole-image inference.
  for (const std::array<int64_t, 2> crop : {std::array<int64_t, 2>{10, 9}, {16, 16}})
    EXPECT_TRUE(equal(
        seg_logits(f, x, {.mode = SegInferMode::slide, .crop = crop, .stride = {4, 3}}), ref));
  // Overlapping windows of a per-pixel model: the same logits, up to the
  // rounding of averaging n <= 4 equal values (n u |v| each way).
  const Tensor slid =
      seg_logits(f, x, {.mode = SegInferMode::slide, .crop = {6, 4}, .stride = {4, 3}});
  double bound = 0;
  for (float v : ref.to_vector<float>()) bound = std::max(bound, 8 * kU * std::abs(double(v)));
  EXPECT_LE(max_abs_diff(slid, ref), bound);
}

TEST(SegInfer, SlideAveragesOverlappingWindows) {
  // Each pixel gets x + the average, over the windows covering it, of their means.
  const Tensor x = random_images({1, 2, 10, 9}, 2);
  const Tensor got = seg_logits(plus_window_mean, x,
                                {.mode = SegInferMode::slide, .crop = {6, 4}, .stride = {4, 3}});
  const auto windows = slide_windows(10, 9, {6, 4}, {4, 3});
  const auto v = x.to_vector<float>();
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t y = 0; y < 10; ++y)
      for (int64_t xx = 0; xx < 9; ++xx) {
        double sum = 0;
        int n = 0;
        for (const auto& w : windows) {
          if (y < w.y1 || y >= w.y2 || xx < w.x1 || xx >= w.x2) continue;
          double m = 0;
          for (int64_t a = w.y1; a < w.y2; ++a)
            for (int64_t b = w.x1; b < w.x2; ++b) m += v[size_t((c * 10 + a) * 9 + b)];
          sum += v[size_t((c * 10 + y) * 9 + xx)] + m / double((w.y2 - w.y1) * (w.x2 - w.x1));
          ++n;
        }
        ASSERT_GT(n, 0);
        const double expect = sum / n;
        ASSERT_NEAR(got.select(1, c).select(1, y).select(1, xx).item<float>(), expect, 1e-5)
            << c << " " << y << " " << xx << " (" << n << " windows)";
      }
}

TEST(SegInfer, FlipAveragesTheMirroredPass) {
  // logits = x + column index: the mirrored pass gives x + (W - 1 - column),
  // so the average is x + (W - 1) / 2 everywhere (exact on whole numbers).
  const SegForward f = [](const Tensor& x) {
    const int64_t W = x.size(3);
    return ops::add(x, arange(0.0, double(W), 1.0, {.dtype = DType::f32}).view({1, 1, 1, W}));
  };
  const Tensor x = random_images({2, 3, 5, 8}, 3, true);
  const Tensor got = seg_logits(f, x, {.flip = FlipTest::on});
  EXPECT_TRUE(equal(got, ops::add(x, 3.5)));
  // The same through sliding windows (each window's columns count from its left).
  const Tensor slid = seg_logits(
      f, x, {.mode = SegInferMode::slide, .crop = {5, 8}, .stride = {5, 8}, .flip = FlipTest::on});
  EXPECT_TRUE(equal(slid, ops::add(x, 3.5)));
}

// SegAverage::probabilities averages each pass's softmax and returns its log
// (mmsegmentation's aug_test); logits (TorchCV's) averages the logits. With
// the column model the two passes' logits are x + c and x + (W - 1 - c).
TEST(SegInfer, FlipAveragesProbabilitiesWhenAsked) {
  const SegForward f = [](const Tensor& x) {
    const int64_t W = x.size(3);
    return ops::add(x, arange(0.0, double(W), 1.0, {.dtype = DType::f32}).view({1, 1, 1, W}));
  };
  const Tensor x = random_images({1, 3, 2, 4}, 5);
  const Tensor got = seg_logits(f, x, {.flip = FlipTest::on, .average = SegAverage::probabilities});
  const Tensor col = arange(0.0, 4.0, 1.0, {.dtype = DType::f32}).view({1, 1, 1, 4});
  const Tensor p1 = ops::softmax(ops::add(x, col), 1);
  const Tensor p2 = ops::softmax(ops::add(x, ops::add(ops::mul(col, -1.0), 3.0)), 1);
  const Tensor want = ops::log(ops::mul(ops::add(p1, p2), 0.5));
  // The same operations in the same order: a few roundings of values near 1.
  EXPECT_LE(max_abs_diff(got, want), 8 * kU);
  // The column shift is the same for every class: softmax over the classes
  // ignores it, so both passes' probabilities are softmax(x), up to rounding,
  // and the result is log_softmax(x).
  EXPECT_LE(max_abs_diff(got, ops::log_softmax(x, 1)), 64 * kU);
  // One pass: the model's logits, whatever the average.
  EXPECT_TRUE(equal(seg_logits(f, x, {.average = SegAverage::probabilities}), f(x)));
}

TEST(SegInfer, MultiScaleResizesEachPassBack) {
  // The model answers with the height it was given, so the average over scales
  // 0.5, 1, 2 of a 7 x 5 image is (4 + 7 + 14) / 3; the sizes it saw are
  // int(side * s + 0.5).
  std::vector<std::array<int64_t, 2>> seen;
  const SegForward f = [&seen](const Tensor& x) {
    seen.push_back({x.size(2), x.size(3)});
    return full({x.size(0), 2, x.size(2), x.size(3)}, double(x.size(2)));
  };
  const Tensor x = random_images({1, 3, 7, 5}, 4);
  const Tensor got = seg_logits(f, x, {.scales = {0.5, 1.0, 2.0}, .flip = FlipTest::on});
  EXPECT_EQ(got.shape(), (Shape{1, 2, 7, 5}));
  EXPECT_EQ(seen, (std::vector<std::array<int64_t, 2>>{
                      {4, 3}, {4, 3}, {7, 5}, {7, 5}, {14, 10}, {14, 10}}));
  for (float v : got.to_vector<float>()) EXPECT_NEAR(v, 25.0 / 3.0, 1e-5);
  // Logits at another size (labels kept at the original size of a resized image).
  seen.clear();
  const Tensor at = seg_logits(f, x, {.scales = {1.0}}, {21, 15});
  EXPECT_EQ(at.shape(), (Shape{1, 2, 21, 15}));
  for (float v : at.to_vector<float>()) EXPECT_EQ(v, 7.0f);
  // One scale of 1 without flip is whole-image inference: the model's tensor.
  const SegForward g = linear_model();
  EXPECT_TRUE(equal(seg_logits(g, x, {.scales = {1.0}}), g(x)));
}

TEST(SegInfer, LowResolutionLogitsAreResizedToTheInput) {
  // A model at output stride 2: its logits come back at the input size, bilinearly.
  const SegForward f = [](const Tensor& x) { return ops::avg_pool2d(x, {}); };
  const Tensor x = random_images({1, 3, 8, 6}, 5);
  const Tensor got = seg_logits(f, x, {});
  EXPECT_EQ(got.shape(), (Shape{1, 3, 8, 6}));
  EXPECT_TRUE(equal(got, ops::upsample(f(x), {8, 6}, {.mode = ops::InterpMode::bilinear})));
  EXPECT_EQ(seg_predict(got).shape(), (Shape{1, 8, 6}));
}

TEST(SegInfer, BatchOfUnequalImagesInfersEachOnItsOwn) {
  // Two images padded into one batch: each sample's logits are those of the
  // image alone (the model sees no padding), placed at the label's size.
  const Tensor a = random_images({1, 3, 6, 5}, 6), b = random_images({1, 3, 4, 7}, 7);
  data::SegBatch batch;
  batch.images = zeros({2, 3, 6, 7});
  batch.images.narrow(0, 0, 1).narrow(2, 0, 6).narrow(3, 0, 5).copy_(a);
  batch.images.narrow(0, 1, 1).narrow(2, 0, 4).narrow(3, 0, 7).copy_(b);
  batch.indices = {0, 1};
  batch.sizes = {{6, 5}, {4, 7}};
  batch.labels = full({2, 8, 7}, 255.0, {.dtype = DType::i64});
  batch.label_sizes = {{8, 5}, {4, 7}};  // the first kept at a larger original size
  const SegInferOptions o{.mode = SegInferMode::slide, .crop = {4, 4}, .stride = {2, 3}};
  const Tensor got = seg_batch_logits(plus_window_mean, batch.images, batch, o);
  EXPECT_EQ(got.shape(), (Shape{2, 3, 8, 7}));
  EXPECT_TRUE(equal(got.narrow(0, 0, 1).narrow(2, 0, 8).narrow(3, 0, 5),
                    seg_logits(plus_window_mean, a, o, {8, 5})));
  EXPECT_TRUE(equal(got.narrow(0, 1, 1).narrow(2, 0, 4), seg_logits(plus_window_mean, b, o)));
  for (float v : got.narrow(0, 1, 1).narrow(2, 4, 4).contiguous().to_vector<float>())
    EXPECT_EQ(v, 0.0f);
  // A uniform batch goes through in one call: the same as per image.
  data::SegBatch even;
  even.images = ops::cat({a, random_images({1, 3, 6, 5}, 8)}, 0);
  even.indices = {0, 1};
  even.sizes = {{6, 5}, {6, 5}};
  const Tensor both = seg_batch_logits(plus_window_mean, even.images, even, o);
  EXPECT_TRUE(equal(both.narrow(0, 0, 1), seg_logits(plus_window_mean, a, o)));
}

TEST(SegInfer, Argmax) {
  Tensor l = zeros({1, 3, 1, 2});
  l.data<float>()[2] = 1.0f;  // class 1 at pixel 0
  l.data<float>()[5] = 2.0f;  // class 2 at pixel 1
  EXPECT_EQ(seg_predict(l).to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
}
