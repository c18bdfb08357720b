// Box ops on CUDA against the CPU: box_iou and nms exactly (both compute every
// overlap with the same correctly rounded operations and sort scores stably),
// on random boxes with tied scores and zero- or negative-area boxes, f32 and
// f64, from 0 to 5,000 boxes; batched_nms; ssd_match with tied IoUs;
// encode/decode and l2_normalize with gradients; the MultiBox loss and the
// post-processing of SSD.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/ops.h"
#include "engine/rng.h"
#include "models/det/anchors.h"
#include "models/det/multibox_loss.h"
#include "models/det/postprocess.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

using testing::CudaCompareOptions;
using testing::expect_cuda_matches_cpu;
using TVec = std::vector<Tensor>;

const CudaCompareOptions kExact{.atol = 0, .rtol = 0, .grads = false};

// n boxes in a 200-pixel square; `grid` snaps corners to 10 px and allows zero and
// negative widths and heights (identical and degenerate boxes).
Tensor random_boxes(int64_t n, uint64_t seed, bool grid, DType dt) {
  Generator g(seed);
  Tensor xy = uniform({n, 2}, 0.0, 200.0, {.dtype = DType::f64}, &g);
  Tensor wh = uniform({n, 2}, 2.0, 60.0, {.dtype = DType::f64}, &g);
  if (grid) {
    xy = ops::mul(randint(0, 20, {n, 2}, {.dtype = DType::i64}, &g).to(DType::f64), 10.0);
    wh = ops::mul(randint(-1, 4, {n, 2}, {.dtype = DType::i64}, &g).to(DType::f64), 10.0);
  }
  return ops::cat({xy, ops::add(xy, wh)}, 1).to(dt).contiguous();
}

// Scores in (0, 1); `ties` draws them from {0, 0.2, ..., 0.8}.
Tensor random_scores(int64_t n, uint64_t seed, bool ties, DType dt) {
  Generator g(seed + 1000);
  if (ties) return ops::mul(randint(0, 5, {n}, {.dtype = DType::i64}, &g).to(dt), 0.2);
  return rand({n}, {.dtype = dt}, &g);
}

TEST(CudaBoxes, BoxIouIsExact) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64})
    for (bool grid : {false, true})
      expect_cuda_matches_cpu(
          std::string("box_iou ") + dtype_name(dt) + (grid ? " grid" : ""),
          [](const TVec& v) { return TVec{ops::box_iou(v[0], v[1])}; },
          {random_boxes(300, 1, grid, dt), random_boxes(1000, 2, grid, dt)}, kExact);
}

TEST(CudaBoxes, NmsKeepsTheSameBoxes) {
  TCV_REQUIRE_CUDA();
  int64_t cases = 0;
  for (DType dt : {DType::f32, DType::f64})
    for (int64_t n : {0, 1, 7, 64, 65, 500, 5000})
      for (bool grid : {false, true})
        for (bool ties : {false, true})
          for (double thr : {0.0, 0.3, 0.5, 0.7}) {
            const uint64_t seed = static_cast<uint64_t>(n * 31 + grid * 7 + ties * 3) + 11;
            expect_cuda_matches_cpu(
                std::string("nms ") + dtype_name(dt) + " n " + std::to_string(n) +
                    (grid ? " grid" : "") + (ties ? " ties" : "") + " thr " + std::to_string(thr),
                [thr](const TVec& v) { return TVec{ops::nms(v[0], v[1], thr)}; },
                {random_boxes(n, seed, grid, dt), random_scores(n, seed, ties, dt)}, kExact);
            ++cases;
          }
  std::printf("[ cuda nms ] %lld cases\n", static_cast<long long>(cases));
}

TEST(CudaBoxes, BatchedNms) {
  TCV_REQUIRE_CUDA();
  Generator g(5);
  for (int64_t n : {100, 4000}) {
    const Tensor idx = randint(0, 20, {n}, {.dtype = DType::i64}, &g);
    expect_cuda_matches_cpu(
        "batched_nms n " + std::to_string(n),
        [](const TVec& v) { return TVec{ops::batched_nms(v[0], v[1], v[2], 0.45)}; },
        {random_boxes(n, 9, false, DType::f32), random_scores(n, 9, false, DType::f32), idx},
        kExact);
  }
}

TEST(CudaBoxes, SsdMatch) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64})
    for (bool grid : {false, true}) {
      // Grid boxes give many equal IoUs: first maxima must agree.
      const Tensor iou =
          ops::box_iou(random_boxes(12, 3, grid, dt), random_boxes(3000, 4, grid, dt));
      expect_cuda_matches_cpu(
          std::string("ssd_match ") + dtype_name(dt) + (grid ? " grid" : ""),
          [](const TVec& v) {
            return TVec{ops::ssd_match(v[0], 0.5), ops::ssd_match(v[0], 0.1)};
          },
          {iou}, kExact);
    }
  expect_cuda_matches_cpu(
      "ssd_match empty", [](const TVec& v) { return TVec{ops::ssd_match(v[0], 0.5)}; },
      {zeros({0, 5})}, kExact);
}

TEST(CudaBoxes, BoxCoding) {
  TCV_REQUIRE_CUDA();
  Tensor anchors = random_boxes(500, 6, false, DType::f64);
  Tensor boxes = random_boxes(500, 7, false, DType::f64);
  anchors.set_requires_grad(true);
  boxes.set_requires_grad(true);
  expect_cuda_matches_cpu("encode_boxes",
                          [](const TVec& v) { return TVec{ops::encode_boxes(v[0], v[1])}; },
                          {boxes, anchors}, {.atol = 1e-12, .rtol = 1e-12});
  expect_cuda_matches_cpu(
      "decode_boxes", [](const TVec& v) { return TVec{ops::decode_boxes(v[0], v[1])}; },
      {testing::random_input({500, 4}, 8, DType::f32), anchors.detach().to(DType::f32)},
      {.atol = 1e-4, .rtol = 1e-5});
}

TEST(CudaBoxes, L2Normalize) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64}) {
    // f32: a sum of 512 squares in another order, u·512 relative at most.
    const CudaCompareOptions o = dt == DType::f32
                                     ? CudaCompareOptions{.atol = 1e-6, .rtol = 4e-5}
                                     : CudaCompareOptions{.atol = 1e-14, .rtol = 1e-13};
    expect_cuda_matches_cpu(
        std::string("l2_normalize ") + dtype_name(dt),
        [](const TVec& v) { return TVec{ops::l2_normalize(v[0], 1)}; },
        {testing::random_input({2, 512, 19, 19}, 9, dt)}, o);
    expect_cuda_matches_cpu(
        std::string("l2_normalize last dim ") + dtype_name(dt),
        [](const TVec& v) { return TVec{ops::l2_normalize(v[0], -1, 0.5)}; },
        {testing::random_input({300, 7}, 10, dt, true, -0.3, 0.3)}, o);
  }
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
                          {.atol = 1e-5, .rtol = 1e-4});
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
