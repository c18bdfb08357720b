// Pose parsing's dense ops against brute-force references: the Gaussian
// filter as a full 2-D sum over scipy's reflected extension (maps smaller than
// the filter included), and the peak mask as a direct 3x3 comparison on maps
// with plateaus.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

// scipy.ndimage's 'reflect' extension: d c b a | a b c d | d c b a, periodic.
int64_t reflect(int64_t i, int64_t n) {
  while (i < 0 || i >= n) i = i < 0 ? -i - 1 : 2 * n - 1 - i;
  return i;
}

// The filter of `x` (planes, h, w) as one 2-D sum per pixel, in f64.
std::vector<double> brute_filter(const std::vector<double>& x, int64_t planes, int64_t h, int64_t w,
                                 double sigma) {
  const int64_t r = static_cast<int64_t>(4.0 * sigma + 0.5);
  std::vector<double> k(static_cast<size_t>(2 * r + 1));
  double s = 0;
  for (int64_t t = -r; t <= r; ++t)
    s += k[static_cast<size_t>(t + r)] = std::exp(-0.5 * t * t / (sigma * sigma));
  for (double& v : k) v /= s;
  std::vector<double> out(x.size(), 0.0);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j) {
        double acc = 0;
        for (int64_t a = -r; a <= r; ++a)
          for (int64_t b = -r; b <= r; ++b)
            acc += k[static_cast<size_t>(a + r)] * k[static_cast<size_t>(b + r)] *
                   x[static_cast<size_t>((p * h + reflect(i + a, h)) * w + reflect(j + b, w))];
        out[static_cast<size_t>((p * h + i) * w + j)] = acc;
      }
  return out;
}

TEST(PoseOps, GaussianTapsAreScipys) {
  const auto t = ops::gaussian_taps(3.0);
  ASSERT_EQ(t.size(), 25u);  // radius int(4·3 + 0.5) = 12
  double s = 0;
  for (int k = -12; k <= 12; ++k) s += std::exp(-k * k / 18.0);
  EXPECT_DOUBLE_EQ(t[12], 1.0 / s);
  EXPECT_DOUBLE_EQ(t[0], std::exp(-144.0 / 18.0) / s);
  EXPECT_EQ(ops::gaussian_taps(1.0).size(), 9u);
  EXPECT_EQ(ops::gaussian_taps(0.1).size(), 1u);  // radius int(0.9) = 0
}

TEST(PoseOps, GaussianFilterEqualsTheFull2dSum) {
  struct Case {
    int64_t planes, h, w;
    double sigma;
  };
  // 5x7 and 3x4 maps are smaller than the 25-tap filter: reflected more than once.
  for (const Case c :
       {Case{2, 20, 31, 3.0}, Case{3, 5, 7, 3.0}, Case{1, 3, 4, 1.5}, Case{2, 16, 9, 0.8}}) {
    Generator g(static_cast<uint64_t>(c.h * 100 + c.w));
    const Tensor x = uniform({c.planes, c.h, c.w}, -1.0, 2.0, {.dtype = DType::f64}, &g);
    const auto want = brute_filter(x.to_vector<double>(), c.planes, c.h, c.w, c.sigma);
    const auto got64 = ops::gaussian_filter2d(x, c.sigma).to_vector<double>();
    const auto got32 = ops::gaussian_filter2d(x.to(DType::f32), c.sigma).to_vector<float>();
    const auto x32 = x.to(DType::f32).to(DType::f64).to_vector<double>();
    const auto want32 = brute_filter(x32, c.planes, c.h, c.w, c.sigma);
    // Two passes of n = 2r + 1 taps with weights summing to 1 and |x| <= 2: each
    // pass errs by at most n·u·max|x| (u = 2^-53 in f64, 2^-24 in f32) plus the
    // rounding of the taps themselves.
    const double n = static_cast<double>(ops::gaussian_taps(c.sigma).size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(got64[i], want[i], 2 * (n + 2) * 0x1p-53 * 2 + 1e-15) << i;
      EXPECT_NEAR(got32[i], want32[i], 2 * (n + 2) * 0x1p-24 * 2) << i;
    }
  }
  // Leading dims are planes too.
  const Tensor x4 = uniform({2, 3, 6, 5}, 0.0, 1.0, {.dtype = DType::f64});
  testing::expect_close(ops::gaussian_filter2d(x4, 2.0),
                        ops::gaussian_filter2d(x4.reshape({6, 6, 5}), 2.0).reshape({2, 3, 6, 5}), 0,
                        0);
}

TEST(PoseOps, PeakMaskEqualsBruteForce) {
  for (DType dt : {DType::f32, DType::f64}) {
    Generator g(5);
    // Values on a coarse grid: many ties, plateaus and equal neighbours.
    const Tensor x = ops::mul(randint(0, 6, {3, 13, 17}, {.dtype = DType::i64}, &g).to(dt), 0.1);
    const auto v = x.to(DType::f64).to_vector<double>();
    const auto got = ops::peak_mask(x, 0.15).to_vector<uint8_t>();
    int64_t peaks = 0;
    for (int64_t p = 0; p < 3; ++p)
      for (int64_t i = 0; i < 13; ++i)
        for (int64_t j = 0; j < 17; ++j) {
          const double c = v[static_cast<size_t>((p * 13 + i) * 17 + j)];
          bool want = c > static_cast<double>(dt == DType::f32 ? float(0.15) : 0.15);
          for (int64_t a = i - 1; a <= i + 1; ++a)
            for (int64_t b = j - 1; b <= j + 1; ++b)
              if (a >= 0 && a < 13 && b >= 0 && b < 17)
                want = want && c >= v[static_cast<size_t>((p * 13 + a) * 17 + b)];
          EXPECT_EQ(got[static_cast<size_t>((p * 13 + i) * 17 + j)], want ? 1 : 0)
              << dtype_name(dt) << " plane " << p << " at (" << i << ", " << j << ")";
          peaks += want;
        }
    EXPECT_GT(peaks, 10);  // the case exercises peaks, not only their absence
  }
}

TEST(PoseOps, PeakOfASmoothedBlob) {
  // One Gaussian blob at (row 9, column 14) and a weaker one at (3, 4): both found,
  // nothing else, after smoothing.
  std::vector<double> m(20 * 24);
  for (int64_t i = 0; i < 20; ++i)
    for (int64_t j = 0; j < 24; ++j)
      m[static_cast<size_t>(i * 24 + j)] =
          std::exp(-((i - 9.0) * (i - 9.0) + (j - 14.0) * (j - 14.0)) / 8.0) +
          0.5 * std::exp(-((i - 3.0) * (i - 3.0) + (j - 4.0) * (j - 4.0)) / 8.0);
  const Tensor x = from_vector(m, {1, 20, 24});
  const auto mask = ops::peak_mask(ops::gaussian_filter2d(x, 1.0), 0.1).to_vector<uint8_t>();
  std::vector<int64_t> at;
  for (size_t i = 0; i < mask.size(); ++i)
    if (mask[i]) at.push_back(static_cast<int64_t>(i));
  EXPECT_EQ(at, (std::vector<int64_t>{3 * 24 + 4, 9 * 24 + 14}));
}

TEST(PoseOps, ChecksItsInput) {
  EXPECT_NE(testing::error_of([] { ops::gaussian_filter2d(zeros({4}), 1.0); }).find("(..., H, W)"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] {
              ops::gaussian_filter2d(zeros({4, 4}), 0.0);
            }).find("sigma"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] {
              ops::peak_mask(zeros({4, 4}, {.dtype = DType::i64}), 0.1);
            }).find("f32 or f64"),
            std::string::npos);
}

}  // namespace
}  // namespace tcv
