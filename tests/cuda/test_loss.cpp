// Losses on CUDA against the CPU, values and gradients: cross_entropy on
// (C), (N, C) and (N, C, H, W) logits with every reduction, class weights,
// ignore_index (default -100 and a class index), label smoothing, and C of 1,
// 10, 1000; nll_loss likewise; mse, smooth_l1 (several beta, 0 included) and
// bce_with_logits (with and without a broadcast pos_weight) with broadcast
// targets and gradients for input, target and pos_weight; f32 and f64; empty
// batches; out-of-range targets throw a clear error on the device path;
// segmentation-shaped cross-entropy (21 classes, ignore 255) and OHEM
// cross-entropy in both selection regimes.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

using ops::Reduction;
using testing::CudaCompareOptions;
using testing::expect_cuda_matches_cpu;
using TVec = std::vector<Tensor>;

Tensor input(const Shape& shape, uint64_t seed, DType dt, bool grad = true, double lo = -3.0,
             double hi = 3.0) {
  return testing::random_input(shape, seed, dt, grad, lo, hi);
}

// Class targets in [0, c), with about one in five set to `ignore` when asked.
Tensor targets(const Shape& shape, int64_t c, uint64_t seed, bool with_ignored, int64_t ignore) {
  Generator g(seed);
  Tensor t = randint(0, c, shape, {.dtype = DType::i64}, &g);
  if (!with_ignored) return t;
  Tensor m = ops::lt(uniform(shape, 0.0, 1.0, {.dtype = DType::f64}, &g), 0.2);
  return ops::masked_fill(t, m, static_cast<double>(ignore));
}

CudaCompareOptions tol_for(DType dt) {
  CudaCompareOptions o;
  if (dt == DType::f64) {
    o.rtol = o.atol = 1e-10;
  } else {
    o.rtol = 1e-4;
    o.atol = 1e-5;
  }
  return o;
}

const char* red_name(Reduction r) {
  return r == Reduction::none ? "none" : (r == Reduction::mean ? "mean" : "sum");
}

struct ClassCase {
  Shape x;  // (C), (N, C) or (N, C, d1, ...)
};

const std::vector<ClassCase>& class_cases() {
  static const std::vector<ClassCase> c = {
      {{10}}, {{7, 10}}, {{5, 1}}, {{64, 1000}}, {{3, 5, 4, 6}}, {{2, 1000, 3}}, {{1, 3, 1, 1}},
  };
  return c;
}

Shape target_shape(const Shape& x) {
  Shape t;
  if (x.size() == 1) return t;
  t.push_back(x[0]);
  for (size_t i = 2; i < x.size(); ++i) t.push_back(x[i]);
  return t;
}

TEST(CudaLoss, CrossEntropy) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64})
    for (const ClassCase& c : class_cases())
      for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum})
        for (double ls : {0.0, 0.1})
          for (bool weighted : {false, true})
            for (int64_t ignore : {int64_t(-100), int64_t(0)}) {
              const int64_t classes = c.x.size() == 1 ? c.x[0] : c.x[1];
              // ignore_index 0 with a single class would ignore everything: still valid.
              const Tensor x = input(c.x, 1, dt);
              const Tensor t = targets(target_shape(c.x), classes, 2, ignore == -100, ignore);
              const Tensor w = weighted ? input({classes}, 3, dt, false, 0.2, 2.0) : Tensor();
              const std::string tag = std::string(dtype_name(dt)) + " " + shape_str(c.x) + " " +
                                      red_name(red) + " ls " + std::to_string(ls) +
                                      (weighted ? " weighted" : "") + " ignore " +
                                      std::to_string(ignore);
              TVec ins = {x, t};
              if (weighted) ins.push_back(w);
              expect_cuda_matches_cpu(
                  "cross_entropy " + tag,
                  [red, ls, ignore, weighted](const TVec& v) {
                    return ops::cross_entropy(v[0], v[1], red, ignore, ls,
                                              weighted ? v[2] : Tensor());
                  },
                  ins, tol_for(dt));
            }
}

TEST(CudaLoss, CrossEntropyEmptyBatchAndNonContiguous) {
  TCV_REQUIRE_CUDA();
  for (Reduction red : {Reduction::none, Reduction::sum, Reduction::mean})
    expect_cuda_matches_cpu(std::string("cross_entropy empty ") + red_name(red),
                            [red](const TVec& v) { return ops::cross_entropy(v[0], v[1], red); },
                            {input({0, 5}, 4, DType::f32), targets({0}, 5, 5, false, -100)});
  expect_cuda_matches_cpu(
      "cross_entropy transposed logits",
      [](const TVec& v) { return ops::cross_entropy(v[0].transpose(0, 1), v[1]); },
      {input({10, 33}, 6, DType::f32), targets({33}, 10, 7, true, -100)}, tol_for(DType::f32));
}

TEST(CudaLoss, CrossEntropyOutOfRangeTargetThrows) {
  TCV_REQUIRE_CUDA();
  const Device gpu(DeviceType::CUDA, 0);
  const Tensor x = zeros({3, 4}, {.device = gpu});
  for (int64_t bad : {int64_t(4), int64_t(-1), int64_t(100)}) {
    const Tensor t = from_vector<int64_t>({0, bad, 2}, {3}).to(gpu);
    try {
      ops::cross_entropy(x, t);
      ADD_FAILURE() << "no error for target " << bad;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("[cross_entropy] target " + std::to_string(bad) + " is out of bounds"),
                std::string::npos)
          << msg;
    }
    EXPECT_THROW(ops::nll_loss(x, t), Error);
  }
  // ignore_index is not out of range.
  const Tensor t = from_vector<int64_t>({0, -100, 2}, {3}).to(gpu);
  EXPECT_NO_THROW(ops::cross_entropy(x, t));
}

TEST(CudaLoss, CrossEntropySegmentationShapes) {
  // (N, 21, H, W) logits with 255-ignored pixels, as a segmentation loss sees them.
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64})
    for (bool weighted : {false, true}) {
      const Tensor x = input({2, 21, 33, 47}, 40, dt);
      const Tensor t = targets({2, 33, 47}, 21, 41, true, 255);
      TVec ins = {x, t};
      if (weighted) ins.push_back(input({21}, 42, dt, false, 0.2, 2.0));
      expect_cuda_matches_cpu(
          std::string("cross_entropy seg ") + dtype_name(dt) + (weighted ? " weighted" : ""),
          [weighted](const TVec& v) {
            return ops::cross_entropy(v[0], v[1], Reduction::mean, 255, 0.0,
                                      weighted ? v[2] : Tensor());
          },
          ins, tol_for(dt));
    }
}

TEST(CudaLoss, OhemCrossEntropy) {
  // Both selection regimes (the thresh rule; the min_kept-th probability), class
  // weights, mean and sum: the same pixels kept on both devices, so the same
  // loss and gradients.
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64})
    for (const auto& [thresh, min_kept] :
         {std::pair{0.7, int64_t(300)}, std::pair{0.02, int64_t(2000)}})
      for (bool weighted : {false, true})
        for (Reduction red : {Reduction::mean, Reduction::sum}) {
          const Tensor x = input({2, 21, 33, 47}, 43, dt);
          const Tensor t = targets({2, 33, 47}, 21, 44, true, 255);
          const Tensor w = input({21}, 45, dt, false, 0.2, 2.0);
          const std::string tag = std::string(dtype_name(dt)) + " thresh " +
                                  std::to_string(thresh) + (weighted ? " weighted " : " ") +
                                  red_name(red);
          expect_cuda_matches_cpu(
              "ohem_cross_entropy " + tag,
              [&, thresh = thresh, min_kept = min_kept](const TVec& v) {
                return ops::ohem_cross_entropy(v[0], v[1],
                                               {.thresh = thresh,
                                                .min_kept = min_kept,
                                                .weight = weighted ? v[2] : Tensor(),
                                                .reduction = red});
              },
              {x, t, w}, tol_for(dt));
        }
}

TEST(CudaLoss, NllLoss) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64})
    for (const ClassCase& c : class_cases())
      for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum})
        for (bool weighted : {false, true}) {
          const int64_t classes = c.x.size() == 1 ? c.x[0] : c.x[1];
          const int64_t cdim = c.x.size() == 1 ? 0 : 1;
          TVec ins = {input(c.x, 8, dt), targets(target_shape(c.x), classes, 9, true, -100)};
          if (weighted) ins.push_back(input({classes}, 10, dt, false, 0.2, 2.0));
          expect_cuda_matches_cpu(
              std::string("nll_loss ") + dtype_name(dt) + " " + shape_str(c.x) + " " +
                  red_name(red) + (weighted ? " weighted" : ""),
              [red, weighted, cdim](const TVec& v) {
                return ops::nll_loss(ops::log_softmax(v[0], cdim), v[1], red, -100,
                                     weighted ? v[2] : Tensor());
              },
              ins, tol_for(dt));
        }
}

struct PairCase {
  Shape x, y, pw;
};

const std::vector<PairCase>& pair_cases() {
  static const std::vector<PairCase> c = {
      {{1000}, {1000}, {1}},          {{7, 33}, {7, 33}, {33}},
      {{4, 5, 6}, {5, 6}, {6}},        // target broadcast
      {{4, 1, 6}, {4, 5, 6}, {5, 1}},  // input broadcast
      {{0, 3}, {0, 3}, {3}},
  };
  return c;
}

TEST(CudaLoss, MseAndSmoothL1) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64})
    for (const PairCase& c : pair_cases())
      for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum}) {
        const std::string tag =
            std::string(dtype_name(dt)) + " " + shape_str(c.x) + " " + red_name(red);
        const TVec ins = {input(c.x, 11, dt), input(c.y, 12, dt)};
        expect_cuda_matches_cpu(
            "mse " + tag, [red](const TVec& v) { return ops::mse_loss(v[0], v[1], red); }, ins,
            tol_for(dt));
        for (double beta : {1.0, 0.5, 0.0})
          expect_cuda_matches_cpu(
              "smooth_l1 beta " + std::to_string(beta) + " " + tag,
              [red, beta](const TVec& v) { return ops::smooth_l1_loss(v[0], v[1], red, beta); },
              ins, tol_for(dt));
      }
  expect_cuda_matches_cpu(
      "mse transposed",
      [](const TVec& v) { return ops::mse_loss(v[0].transpose(0, 1), v[1], Reduction::none); },
      {input({9, 13}, 13, DType::f32), input({13, 9}, 14, DType::f32)}, tol_for(DType::f32));
}

TEST(CudaLoss, BceWithLogits) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64})
    for (const PairCase& c : pair_cases())
      for (Reduction red : {Reduction::none, Reduction::mean, Reduction::sum})
        for (bool with_pw : {false, true}) {
          // Targets in [0, 1], requiring grad too; large logits exercise the stable softplus.
          TVec ins = {input(c.x, 15, dt, true, -30.0, 30.0), input(c.y, 16, dt, true, 0.0, 1.0)};
          if (with_pw) ins.push_back(input(c.pw, 17, dt, true, 0.5, 3.0));
          expect_cuda_matches_cpu(
              std::string("bce_with_logits ") + dtype_name(dt) + " " + shape_str(c.x) + " " +
                  red_name(red) + (with_pw ? " pos_weight" : ""),
              [red, with_pw](const TVec& v) {
                return ops::binary_cross_entropy_with_logits(v[0], v[1], red,
                                                             with_pw ? v[2] : Tensor());
              },
              ins, tol_for(dt));
        }
}

}  // namespace
}  // namespace tcv
