// SSD on CUDA against the CPU beyond the op table's cases
// (tests/ops/cases_boxes.cpp, which compare box_iou, nms, batched_nms,
// ssd_match, box coding and l2_normalize): the MultiBox loss and the
// post-processing of SSD.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/ops.h"
#include "engine/rng.h"
#include "models/det/anchors.h"
#include "models/det/multibox_loss.h"
#include "models/det/postprocess.h"
#include "support/cuda_compare.h"
#include "support/error_bound.h"

namespace tcv {
namespace {

using testing::expect_cuda_matches_cpu;
using TVec = std::vector<Tensor>;

/// The MultiBox loss's two parts are sums of non-negative terms (smooth L1 of
/// `terms` box codes, cross-entropy over `classes` classes for the anchors
/// kept by hard-negative mining) over the positives: within γ of their count,
/// plus each term's own roundings (softmax statistics: γ_classes and 16
/// more), relative to the value. Each gradient element is one term's
/// derivative (at most 1 in magnitude, |dy| ≤ 1) over the positives: those
/// roundings on its value and on that magnitude. (The mining decides on the
/// CPU's and the GPU's own losses, so there is no f64 run.)
testing::Tol multibox_tol(int64_t terms, int64_t classes) {
  const double u = std::ldexp(1.0, -24);
  const double ulps =
      (testing::gamma_n(terms, DType::f32) + testing::gamma_n(classes, DType::f32)) / u + 16;
  return {.ulps = ulps, .grad_ulps = static_cast<double>(classes + 16), .grad_scale = 1};
}

TEST(CudaBoxes, MultiBoxLossAndPostprocess) {
  TCV_REQUIRE_CUDA();
  const Tensor anchors = models::det::default_boxes(
      models::det::ssd300_anchor_options(), {{38, 38}, {19, 19}, {10, 10}, {5, 5}, {3, 3}, {1, 1}},
      {300, 300});
  Generator g(12);
  std::vector<models::det::DetTarget> targets;
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t n = 1 + 2 * b;
    const Tensor xy = uniform({n, 2}, 0.0, 200.0, {}, &g);
    const Tensor wh = uniform({n, 2}, 10.0, 90.0, {}, &g);
    targets.push_back(
        {ops::cat({xy, ops::add(xy, wh)}, 1), randint(1, 21, {n}, {.dtype = DType::i64}, &g)});
  }
  const Device gpu(DeviceType::CUDA, 0);
  expect_cuda_matches_cpu("multibox_loss",
                          [&](const TVec& v) {
                            std::vector<models::det::DetTarget> t;
                            for (const auto& x : targets)
                              t.push_back({x.boxes.to(v[0].device()), x.labels.to(v[0].device())});
                            const auto l = models::det::multibox_loss(v[0], v[1], v[2], t);
                            return TVec{l.bbox_regression, l.classification};
                          },
                          {testing::random_input({3, 8732, 4}, 13, DType::f32),
                           testing::random_input({3, 8732, 21}, 14, DType::f32), anchors},
                          multibox_tol(3 * 8732 * 4, 21), {.against_exact = false});
  const Tensor loc = testing::random_input({2, 8732, 4}, 15, DType::f32, false);
  const Tensor conf = testing::random_input({2, 8732, 21}, 16, DType::f32, false, -3.0, 3.0);
  const auto cpu = models::det::postprocess_detections(loc, conf, anchors, {300, 300});
  const auto cuda =
      models::det::postprocess_detections(loc.to(gpu), conf.to(gpu), anchors.to(gpu), {300, 300});
  ASSERT_EQ(cpu.size(), cuda.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(cpu[i].labels.to_vector<int64_t>(), cuda[i].labels.to_vector<int64_t>());
    EXPECT_EQ(cpu[i].boxes.to_vector<float>(), cuda[i].boxes.to_vector<float>());
  }
}

}  // namespace
}  // namespace tcv
