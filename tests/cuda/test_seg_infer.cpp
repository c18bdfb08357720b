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
  for (size_t k = 0; k < cases.size(); ++k)
    expect_cuda_matches_cpu("seg_logits case " + std::to_string(k),
                            [&, k](const TVec& v) {
                              const Tensor wd = w.to(v[0].device()), bd = b.to(v[0].device());
                              const train::SegForward f = [&](const Tensor& x) {
                                return ops::conv2d(x, wd, bd, {.padding = {1, 1}});
                              };
                              return train::seg_logits(f, v[0], cases[k], {23, 29});
                            },
                            {testing::random_input({2, 3, 23, 29}, 1, DType::f32, false)},
                            {.grads = false});
}

}  // namespace
}  // namespace tcv
