// batch_norm on CUDA against the CPU: training with batch statistics and the
// running-stat update (running_mean/var compared after the call), eval with
// running statistics, eval without running statistics (batch stats), with and
// without weight/bias, 2-D, 3-D and 4-D inputs, odd sizes, a large N·H·W that
// splits every channel over many blocks, a non-contiguous input; f32 and f64,
// gradients of x, weight and bias. Then the kernels' own paths: f16/bf16 data
// with f32 parameters, planes that take 4-wide loads and planes that do not, a
// misaligned input, eval with only dx wanted, and a large mean with a small
// spread (the variance and the normalization must not cancel), and relu fused
// into the normalize pass.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/rng.h"
#include "support/cuda_compare.h"

namespace tcv {
namespace {

using testing::CudaCompareOptions;
using testing::expect_cuda_matches_cpu;
using TVec = std::vector<Tensor>;

Tensor input(const Shape& shape, uint64_t seed, DType dt, bool grad, double lo = -2.0,
             double hi = 2.0) {
  return testing::random_input(shape, seed, dt, grad, lo, hi);
}

CudaCompareOptions tol_for(DType dt) {
  CudaCompareOptions o;
  if (dt == DType::f64) {
    o.rtol = 1e-10;
    o.atol = 1e-10;
  } else {
    o.rtol = 1e-4;
    o.atol = 1e-4;
  }
  return o;
}

/// inputs: x, weight, bias, running_mean, running_var. Returns y and the running
/// statistics after the call.
TVec bn_inputs(const Shape& x, uint64_t seed, DType dt) {
  const int64_t c = x[1];
  return {input(x, seed, dt, true, -1.0, 3.0), input({c}, seed + 1, dt, true, 0.5, 1.5),
          input({c}, seed + 2, dt, true), input({c}, seed + 3, dt, false, -0.5, 0.5),
          input({c}, seed + 4, dt, false, 0.5, 2.0)};
}

TEST(CudaBatchNorm, TrainingUpdatesRunningStats) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64}) {
    // Planes of 35, 1, 11, 9 (scalar loads) and 8 (4-wide loads: 32-byte vectors in f64).
    for (const Shape& s :
         {Shape{4, 3, 7, 5}, Shape{5, 6}, Shape{3, 4, 11}, Shape{1, 2, 3, 3}, Shape{3, 5, 4, 2}}) {
      expect_cuda_matches_cpu(
          std::string("train ") + dtype_name(dt) + " " + shape_str(s),
          [](const TVec& v) {
            Tensor y = ops::batch_norm(v[0], v[1], v[2], v[3], v[4], {.training = true});
            return TVec{y, v[3].clone(), v[4].clone()};
          },
          bn_inputs(s, 10, dt), tol_for(dt));
    }
  }
}

TEST(CudaBatchNorm, TrainingLargePlanesManyBlocks) {
  TCV_REQUIRE_CUDA();
  // 8·96·96 = 73728 values per channel, with an offset that tests the variance's accuracy.
  TVec in = bn_inputs({8, 3, 96, 96}, 20, DType::f32);
  in[0] = ops::add(in[0].detach(), 10.0);
  in[0].set_requires_grad(true);
  auto o = tol_for(DType::f32);
  o.atol = 1e-3;
  expect_cuda_matches_cpu(
      "train large",
      [](const TVec& v) {
        Tensor y = ops::batch_norm(v[0], v[1], v[2], v[3], v[4],
                                   {.training = true, .momentum = 0.3, .eps = 1e-3});
        return TVec{y, v[3].clone(), v[4].clone()};
      },
      in, o);
}

TEST(CudaBatchNorm, Eval) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f64}) {
    // Planes of 42 (scalar loads) and 16 (4-wide loads).
    for (const Shape& s : {Shape{3, 5, 6, 7}, Shape{2, 3, 4, 4}}) {
      expect_cuda_matches_cpu(
          std::string("eval ") + dtype_name(dt) + " " + shape_str(s),
          [](const TVec& v) { return ops::batch_norm(v[0], v[1], v[2], v[3], v[4]); },
          bn_inputs(s, 30, dt), tol_for(dt));
      // Without running statistics eval normalizes with the batch.
      expect_cuda_matches_cpu(
          std::string("eval no running stats ") + dtype_name(dt) + " " + shape_str(s),
          [](const TVec& v) { return ops::batch_norm(v[0], v[1], v[2], Tensor(), Tensor()); },
          bn_inputs(s, 40, dt), tol_for(dt));
    }
  }
}

TEST(CudaBatchNorm, NoAffineAndNonContiguous) {
  TCV_REQUIRE_CUDA();
  expect_cuda_matches_cpu(
      "no weight/bias",
      [](const TVec& v) {
        Tensor y = ops::batch_norm(v[0], Tensor(), Tensor(), v[3], v[4], {.training = true});
        return TVec{y, v[3].clone(), v[4].clone()};
      },
      bn_inputs({2, 4, 5, 9}, 50, DType::f32), tol_for(DType::f32));
  expect_cuda_matches_cpu(
      "transposed input",
      [](const TVec& v) {
        Tensor y =
            ops::batch_norm(v[0].transpose(2, 3), v[1], v[2], v[3], v[4], {.training = true});
        return TVec{y, v[3].clone(), v[4].clone()};
      },
      bn_inputs({3, 4, 6, 5}, 60, DType::f32), tol_for(DType::f32));
  // Only weight requires grad: dx and dbias are not computed.
  TVec in = bn_inputs({3, 4, 6, 5}, 70, DType::f64);
  in[0] = in[0].detach();
  in[2] = in[2].detach();
  expect_cuda_matches_cpu(
      "dweight only",
      [](const TVec& v) {
        return ops::batch_norm(v[0], v[1], v[2], v[3], v[4], {.training = true});
      },
      in, tol_for(DType::f64));
}

TEST(CudaBatchNorm, HalfDataWithF32Parameters) {
  TCV_REQUIRE_CUDA();
  CudaCompareOptions o;
  o.rtol = 1e-2;
  o.atol = 1e-2;
  for (DType dt : {DType::bf16, DType::f16}) {
    // Planes of 36 (4-wide loads), 21 (scalar), 1 (2-D input).
    for (const Shape& s : {Shape{4, 8, 6, 6}, Shape{3, 5, 7, 3}, Shape{6, 4}}) {
      TVec in = bn_inputs(s, 80, DType::f32);
      in[0] = input(s, 81, dt, true, -1.0, 3.0);
      const std::string what = std::string(dtype_name(dt)) + " " + in[0].shape_str();
      for (bool training : {true, false}) {
        expect_cuda_matches_cpu(
            what + (training ? " train" : " eval"),
            [training, dt](const TVec& v) {
              Tensor y = ops::batch_norm(v[0], v[1], v[2], v[3], v[4], {.training = training});
              EXPECT_EQ(y.dtype(), dt);
              return TVec{y, v[3].clone(), v[4].clone()};
            },
            in, o);
      }
    }
  }
}

TEST(CudaBatchNorm, MisalignedInputAndEvalDxOnly) {
  TCV_REQUIRE_CUDA();
  // A contiguous view one element into its storage: the plane size allows
  // 4-wide loads but the pointer does not, so the kernels take scalar loads.
  TVec in = bn_inputs({2, 4, 8, 8}, 90, DType::f32);
  in[0] = input({1 + 2 * 4 * 8 * 8}, 91, DType::f32, true, -1.0, 3.0);
  expect_cuda_matches_cpu(
      "misaligned",
      [](const TVec& v) {
        Tensor x = v[0].narrow(0, 1, 2 * 4 * 8 * 8).reshape({2, 4, 8, 8});
        Tensor y = ops::batch_norm(x, v[1], v[2], v[3], v[4], {.training = true});
        return TVec{y, v[3].clone(), v[4].clone()};
      },
      in, tol_for(DType::f32));
  // Eval with only dx wanted: the kernels skip the reduction pass.
  TVec ev = bn_inputs({3, 4, 5, 4}, 100, DType::f32);
  ev[1] = ev[1].detach();
  ev[2] = ev[2].detach();
  expect_cuda_matches_cpu(
      "eval dx only", [](const TVec& v) { return ops::batch_norm(v[0], v[1], v[2], v[3], v[4]); },
      ev, tol_for(DType::f32));
}

TEST(CudaBatchNorm, F32LargeMeanSmallSpreadMatchesCpu) {
  TCV_REQUIRE_CUDA();
  // Values 1000 ± 0.01: a variance taken as E[x²] - E[x]² or an output taken as
  // x·scale + (b - mean·scale) in f32 is off by about 1e-3 relative; the CPU
  // loops are within 1e-7 of f64 (BatchNorm.F32LargeMeanSmallSpreadMatchesF64).
  for (const Shape& s : {Shape{4, 3, 8, 8}, Shape{5, 2, 7}}) {
    TVec in = bn_inputs(s, 110, DType::f32);
    in[0] = input(s, 111, DType::f32, true, 999.99, 1000.01);
    expect_cuda_matches_cpu(
        "large mean " + in[0].shape_str(),
        [](const TVec& v) {
          Tensor y = ops::batch_norm(v[0], v[1], v[2], v[3], v[4], {.training = true});
          return TVec{y, v[3].clone(), v[4].clone()};
        },
        in, tol_for(DType::f32));
  }
}

TEST(CudaBatchNorm, FusedRelu) {
  TCV_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::bf16}) {
    CudaCompareOptions o = tol_for(DType::f32);
    if (dt == DType::bf16) o.rtol = o.atol = 1e-2;
    for (const Shape& s : {Shape{4, 8, 6, 6}, Shape{3, 5, 7, 3}}) {
      TVec in = bn_inputs(s, 120, DType::f32);
      in[0] = input(s, 121, dt, true, -1.0, 3.0);
      for (bool training : {true, false}) {
        expect_cuda_matches_cpu(
            std::string("bn+relu ") + dtype_name(dt) + " " + in[0].shape_str() +
                (training ? " train" : " eval"),
            [training](const TVec& v) {
              Tensor y = ops::batch_norm_relu(v[0], v[1], v[2], v[3], v[4], {.training = training});
              return TVec{y, v[3].clone(), v[4].clone()};
            },
            in, o);
        // relu6, with weights that carry some outputs past 6.
        TVec in6 = in;
        in6[1] = input({s[1]}, 122, DType::f32, true, 4.0, 5.0);
        expect_cuda_matches_cpu(
            std::string("bn+relu6 ") + dtype_name(dt) + " " + in[0].shape_str() +
                (training ? " train" : " eval"),
            [training](const TVec& v) {
              Tensor y =
                  ops::batch_norm_relu6(v[0], v[1], v[2], v[3], v[4], {.training = training});
              return TVec{y, v[3].clone(), v[4].clone()};
            },
            in6, o);
      }
    }
  }
}

// The 64-bit index variants, which need 2^31 elements on their own.
TEST(CudaBatchNorm, WideIndicesMatchTheCpu) {
  TCV_REQUIRE_CUDA();
  const testing::WideIndicesScope wide;
  for (DType dt : {DType::f32, DType::f64}) {
    for (const Shape& s : {Shape{4, 3, 7, 5}, Shape{3, 5, 4, 2}, Shape{5, 6}}) {
      expect_cuda_matches_cpu(
          std::string("wide train ") + dtype_name(dt) + " " + shape_str(s),
          [](const TVec& v) {
            Tensor y = ops::batch_norm(v[0], v[1], v[2], v[3], v[4], {.training = true});
            return TVec{y, v[3].clone(), v[4].clone()};
          },
          bn_inputs(s, 70, dt), tol_for(dt));
      expect_cuda_matches_cpu(
          std::string("wide eval ") + dtype_name(dt) + " " + shape_str(s),
          [](const TVec& v) { return ops::batch_norm(v[0], v[1], v[2], v[3], v[4]); },
          bn_inputs(s, 80, dt), tol_for(dt));
    }
  }
}

}  // namespace
}  // namespace tcv
