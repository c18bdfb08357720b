// Segmentation inference on CUDA against the CPU: sliding windows (views
// accumulated in place, the count division), multi-scale resizes and flips
// (index_select) on the device the images are on.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "support/cuda_compare.h"
#include "train/seg_infer.h"

namespace tcv {
namespace {

using testing::expect_cuda_matches_cpu;
using TVec = std::vector<Tensor>;

TEST(CudaSegInfer, SlideMultiScaleFlip) {
  TCV_REQUIRE_CUDA();
  const Tensor w = testing::random_input({5, 3, 3, 3}, 2, DType::f32, false);
  const Tensor b = testing::random_input({5}, 3, DType::f32, false);
  const std::vector<train::SegInferOptions> cases{
      {},
      {.mode = train::SegInferMode::slide, .crop = {12, 10}, .stride = {8, 7}},
      {.scales = {0.75, 1.0, 1.5}, .flip = train::FlipTest::on},
      {.mode = train::SegInferMode::slide,
       .crop = {16, 16},
       .stride = {10, 10},
       .scales = {0.5, 1.25},
       .flip = train::FlipTest::on}};
  // Every value on the way is at most M = 27·2·2 + 2 (a 3x3x3 convolution of
  // values in [-2, 2] plus a bias; bilinear resizes and averages do not grow
  // it). Each logit is off by γ of the convolution's 28 terms, the window
  // division and the final average of at most 6 passes (≤ 40 roundings) times
  // M, and by the two bilinear resizes, whose source coordinates are computed
  // in f32 within 2u(W + 1) of the exact ones (W ≤ 44), each of 4 taps: 16u(W + 1)
  // times M. Both devices lie within that of the exact logits.
  const testing::Tol tol{.ulps = 16 * (44 + 1) + 40, .scale = 27 * 2 * 2 + 2};
  for (size_t k = 0; k < cases.size(); ++k)
    expect_cuda_matches_cpu("seg_logits case " + std::to_string(k),
                            [&, k](const TVec& v) {
                              const Tensor wd = v[1], bd = v[2];
                              const train::SegForward f = [&](const Tensor& x) {
                                return ops::conv2d(x, wd, bd, {.padding = {1, 1}});
                              };
                              return train::seg_logits(f, v[0], cases[k], {23, 29});
                            },
                            {testing::random_input({2, 3, 23, 29}, 1, DType::f32, false), w, b},
                            // seg_logits takes f32 images only: no f64 run.
                            tol, {.grads = false, .against_exact = false});
}

}  // namespace
}  // namespace tcv
