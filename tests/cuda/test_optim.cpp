// CPU-vs-CUDA checks of the fused multi-tensor optimizer steps
// (kernels/cuda/optim.cu through train/optim.cpp): SGD (plain, momentum with
// dampening, nesterov, weight decay), Adam (L2) and AdamW (decoupled), with
// decay groups, over several steps from the same start and the same
// gradients, in f32 and f64. The parameter list has many parameters of
// different sizes (more than one launch's 48 tensors, one larger than a
// 65536-element chunk, one larger than a launch's 320 chunks, an empty one,
// one that gets no gradient), so the chunking is exercised. Parameters and
// optimizer states must agree within 1e-6 relative. Also clip_grad_norm on CUDA
// gradients (norm and clipped gradients), and a CUDA f16 parameter that takes
// the tensor-op path.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/rng.h"
#include "support/cuda_compare.h"
#include "support/gradcheck.h"
#include "train/optim.h"

namespace tcv {
namespace {

const Device kGpu(DeviceType::CUDA, 0);

using MakeOpt = std::function<std::unique_ptr<train::Optimizer>(nn::StateDict)>;

std::vector<Shape> param_shapes(bool big) {
  std::vector<Shape> s = {{7}, {33, 17}, {65536}, {100003}, {0}, {3, 3, 3, 3}, {1}};
  for (int i = 0; i < 60; ++i) s.push_back({5 + i});  // more tensors than one launch takes
  if (big) s.push_back({21000000});                   // > 320 chunks: split mid-tensor
  return s;
}

struct Params {
  nn::StateDict cpu, gpu;
};

Params make_params(DType dt, bool big) {
  Params ps;
  Generator gen(5);
  int i = 0;
  for (const Shape& s : param_shapes(big)) {
    Tensor p = randn(s, {.dtype = dt}, &gen);
    Tensor pc = p.clone().set_requires_grad(true);
    Tensor pg = p.to(kGpu).set_requires_grad(true);
    std::string name = std::to_string(i++);
    name.insert(0, 1, 'p');
    ps.cpu.emplace_back(name, pc);
    ps.gpu.emplace_back(name, pg);
  }
  return ps;
}

// Same gradients on both devices; parameter 2 gets none at odd steps.
void set_grads(Params& ps, int step) {
  Generator gen(100 + step);
  for (size_t i = 0; i < ps.cpu.size(); ++i) {
    Tensor& pc = ps.cpu[i].second;
    Tensor& pg = ps.gpu[i].second;
    Tensor g = randn(pc.shape(), {.dtype = pc.dtype()}, &gen);
    if (i == 2 && step % 2 == 1) {
      pc.set_grad(Tensor());
      pg.set_grad(Tensor());
      continue;
    }
    pc.set_grad(g);
    pg.set_grad(g.to(kGpu));
  }
}

void expect_same(const nn::StateDict& cpu, const nn::StateDict& gpu, const std::string& what,
                 double tol) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_EQ(cpu[i].first, gpu[i].first) << what;
    if (!cpu[i].second.defined()) continue;
    ASSERT_TRUE(gpu[i].second.device().is_cuda() || cpu[i].first == "step") << what;
    testing::expect_close(gpu[i].second.to(kCPU), cpu[i].second, tol, tol,
                          what + " " + cpu[i].first);
  }
}

void run_both(const MakeOpt& make, DType dt, bool big, int steps, const std::string& what) {
  Params ps = make_params(dt, big);
  auto oc = make(ps.cpu);
  auto og = make(ps.gpu);
  for (int s = 1; s <= steps; ++s) {
    set_grads(ps, s);
    oc->step();
    og->step();
  }
  expect_same(ps.cpu, ps.gpu, what + " params", 1e-6);
  expect_same(oc->state_dict(), og->state_dict(), what + " state", 1e-6);
}

class CudaOptim : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { TCV_REQUIRE_CUDA(); }
};

TEST_P(CudaOptim, SGDPlain) {
  run_both(
      [](nn::StateDict p) {
        return std::make_unique<train::SGD>(std::move(p), train::SGDOptions{.lr = 0.1});
      },
      GetParam(), false, 3, "sgd");
}

TEST_P(CudaOptim, SGDMomentumDampeningWeightDecay) {
  run_both(
      [](nn::StateDict p) {
        return std::make_unique<train::SGD>(
            std::move(p), train::SGDOptions{.lr = 0.05,
                                            .momentum = 0.9,
                                            .dampening = 0.1,
                                            .weight_decay = 1e-2,
                                            .no_decay = train::NoDecay::bn_and_bias});
      },
      GetParam(), GetParam() == DType::f32, 4, "sgd momentum");
}

TEST_P(CudaOptim, SGDNesterov) {
  run_both(
      [](nn::StateDict p) {
        return std::make_unique<train::SGD>(
            std::move(p),
            train::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true});
      },
      GetParam(), false, 4, "sgd nesterov");
}

TEST_P(CudaOptim, Adam) {
  run_both(
      [](nn::StateDict p) {
        return std::make_unique<train::Adam>(std::move(p),
                                             train::AdamOptions{.lr = 1e-2, .weight_decay = 1e-2});
      },
      GetParam(), GetParam() == DType::f32, 4, "adam");
}

TEST_P(CudaOptim, AdamW) {
  run_both(
      [](nn::StateDict p) {
        return std::make_unique<train::AdamW>(
            std::move(p), train::AdamWOptions{.lr = 1e-2,
                                              .beta1 = 0.8,
                                              .beta2 = 0.99,
                                              .eps = 1e-6,
                                              .weight_decay = 0.1,
                                              .no_decay = train::NoDecay::bn_and_bias});
      },
      GetParam(), false, 4, "adamw");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaOptim, ::testing::Values(DType::f32, DType::f64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CudaOptimMisc, F16ParameterUsesTensorOps) {
  TCV_REQUIRE_CUDA();
  // Not fused (f16): the tensor-op rule runs on the GPU as on the CPU.
  Generator gen(3);
  Tensor p = randn({129}, {}, &gen).to(DType::f16);
  Tensor pc = p.clone().set_requires_grad(true);
  Tensor pg = p.to(kGpu).set_requires_grad(true);
  train::SGD oc({{"w", pc}}, {.lr = 0.1, .momentum = 0.9});
  train::SGD og({{"w", pg}}, {.lr = 0.1, .momentum = 0.9});
  for (int s = 0; s < 3; ++s) {
    Tensor g = randn({129}, {}, &gen).to(DType::f16);
    pc.set_grad(g);
    pg.set_grad(g.to(kGpu));
    oc.step();
    og.step();
  }
  testing::expect_close(pg.to(kCPU).to(DType::f32), pc.to(DType::f32), 1e-3, 1e-3, "f16 sgd");
}

TEST(CudaOptimMisc, ClipGradNorm) {
  TCV_REQUIRE_CUDA();
  for (const double max_norm : {0.0, 1.0, 1e6}) {
    Params ps = make_params(DType::f32, false);
    set_grads(ps, 2);
    // A non-contiguous gradient and an f64 one.
    Generator gen(8);
    Tensor gt = randn({17, 33}, {}, &gen).t();
    ps.cpu[1].second.set_grad(gt);
    ps.gpu[1].second.set_grad(gt.to(kGpu).t().contiguous().t());
    Tensor w64c = randn({40}, {.dtype = DType::f64}, &gen).set_requires_grad(true);
    Tensor w64g = w64c.detach().to(kGpu).set_requires_grad(true);
    Tensor g64 = randn({40}, {.dtype = DType::f64}, &gen);
    w64c.set_grad(g64);
    w64g.set_grad(g64.to(kGpu));
    ps.cpu.emplace_back("w64", w64c);
    ps.gpu.emplace_back("w64", w64g);

    const double nc = train::clip_grad_norm(ps.cpu, max_norm);
    const double ng = train::clip_grad_norm(ps.gpu, max_norm);
    EXPECT_NEAR(ng, nc, 1e-5 * nc) << "max_norm " << max_norm;
    for (size_t i = 0; i < ps.cpu.size(); ++i) {
      const Tensor gc = ps.cpu[i].second.grad(), gg = ps.gpu[i].second.grad();
      ASSERT_EQ(gc.defined(), gg.defined());
      if (!gc.defined()) continue;
      ASSERT_TRUE(gg.device().is_cuda());
      testing::expect_close(gg.to(kCPU), gc, 1e-6, 1e-5,
                            "clip " + std::to_string(max_norm) + " " + ps.cpu[i].first);
    }
  }
}

}  // namespace
}  // namespace tcv
