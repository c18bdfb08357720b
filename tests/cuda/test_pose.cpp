// Pose parsing's dense ops on CUDA against the CPU, exactly: the filter sums
// its taps in the same order with correctly rounded operations on both, so the
// smoothed maps and their peaks are equal bit for bit (f32 and f64, maps
// smaller than the filter, many planes); and the parsing that runs on them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/ops.h"
#include "engine/rng.h"
#include "models/pose/parse.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

using testing::expect_cuda_matches_cpu;
using TVec = std::vector<Tensor>;

// Both devices make the same correctly rounded operations in the same order.
const testing::Tol kBitEqual{.devices = testing::Agreement::bit_equal};
const testing::ParityOptions kNoGrads{.grads = false};

TEST(CudaPose, GaussianFilterIsExact) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64})
    for (const Shape& s : {Shape{19, 46, 61}, Shape{2, 3, 5, 7}, Shape{1, 368, 496}}) {
      Generator g(3);
      const Tensor x = uniform(s, -0.2, 1.0, {.dtype = dt}, &g);
      expect_cuda_matches_cpu(
          std::string("gaussian_filter2d ") + dtype_name(dt),
          [](const TVec& v) { return ops::gaussian_filter2d(v[0], 3.0); }, {x}, kBitEqual,
          kNoGrads);
    }
}

TEST(CudaPose, PeakMaskIsExact) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64}) {
    Generator g(4);
    const Tensor coarse =
        ops::mul(randint(0, 6, {18, 40, 52}, {.dtype = DType::i64}, &g).to(dt), 0.1);
    expect_cuda_matches_cpu(
        std::string("peak_mask ") + dtype_name(dt),
        [](const TVec& v) { return ops::peak_mask(v[0], 0.15); }, {coarse}, kBitEqual, kNoGrads);
    const Tensor smooth = uniform({18, 40, 52}, 0.0, 1.0, {.dtype = dt}, &g);
    expect_cuda_matches_cpu(
        std::string("peaks of smoothed maps ") + dtype_name(dt),
        [](const TVec& v) { return ops::peak_mask(ops::gaussian_filter2d(v[0], 3.0), 0.1); },
        {smooth}, kBitEqual, kNoGrads);
  }
}

TEST(CudaPose, FindPeaksOnTheGpuEqualsTheCpu) {
  TCV_REQUIRE_CUDA();
  Generator g(9);
  const Tensor maps = uniform({18, 64, 48}, 0.0, 1.0, {.dtype = DType::f32}, &g);
  const auto cpu = models::pose::find_peaks(maps, 3.0, 0.1);
  const auto gpu = models::pose::find_peaks(maps.to(Device(DeviceType::CUDA, 0)), 3.0, 0.1);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t k = 0; k < cpu.size(); ++k) {
    ASSERT_EQ(cpu[k].size(), gpu[k].size()) << "keypoint " << k;
    for (size_t i = 0; i < cpu[k].size(); ++i) {
      EXPECT_EQ(cpu[k][i].x, gpu[k][i].x);
      EXPECT_EQ(cpu[k][i].y, gpu[k][i].y);
      EXPECT_EQ(cpu[k][i].score, gpu[k][i].score);
    }
  }
}

}  // namespace
}  // namespace tcv
