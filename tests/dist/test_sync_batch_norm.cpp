// SyncBatchNorm: its gradient (f64 finite differences), and with 2 thread-ranks
// over the in-process FakeGroup, equality with BatchNorm on the union batch.
#include <gtest/gtest.h>

#include <thread>

#include "dist/ddp.h"
#include "dist/fake_group.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "layers/conv.h"
#include "layers/sequential.h"
#include "layers/sync_batch_norm.h"
#include "support/gradcheck.h"

namespace tcv {
namespace {

using tcv::testing::check_gradients;
using tcv::testing::expect_close;
using tcv::testing::rand_f64;

// A pretend group of 2 whose all-reduce is the identity: the sync path on local data.
nn::SyncBNGroup local_group() {
  return {2, [](const Tensor&) {}};
}

TEST(SyncBatchNorm, LocalGroupMatchesBatchNorm) {
  const Tensor x = rand_f64({3, 4, 5, 2}, 1);
  const Tensor w = rand_f64({4}, 2), b = rand_f64({4}, 3);
  Tensor rm1 = zeros({4}, {.dtype = DType::f64}), rv1 = ones({4}, {.dtype = DType::f64});
  Tensor rm2 = rm1.clone(), rv2 = rv1.clone();
  const Tensor want = ops::batch_norm(x, w, b, rm1, rv1, {.training = true});
  const Tensor got = ops::sync_batch_norm(x, w, b, rm2, rv2, local_group());
  expect_close(got, want, 1e-10, 1e-8, "y");
  expect_close(rm2, rm1, 1e-12, 1e-10, "running_mean");
  expect_close(rv2, rv1, 1e-12, 1e-10, "running_var");
}

TEST(SyncBatchNorm, HalfInputComputesInF32) {
  const Tensor x = rand_f64({3, 4, 5, 2}, 7, -2.0, 2.0, false).to(DType::bf16);
  const Tensor w = rand_f64({4}, 8, 0.5, 1.5, false).to(DType::f32);
  Tensor rm = zeros({4}), rv = ones({4});
  const Tensor got = ops::sync_batch_norm(x, w, Tensor(), rm, rv, local_group());
  EXPECT_EQ(got.dtype(), DType::bf16);
  Tensor rm2 = zeros({4}), rv2 = ones({4});
  const Tensor want = ops::batch_norm(x, w, Tensor(), rm2, rv2, {.training = true});
  expect_close(got.to(DType::f32), want.to(DType::f32), 1e-2, 1e-2, "bf16 y");
  expect_close(rm, rm2, 1e-6, 1e-5, "running_mean");
}

TEST(SyncBatchNorm, GradCheck) {
  const auto g = local_group();
  check_gradients("sync_batch_norm",
                  [&](const std::vector<Tensor>& in) {
                    return ops::sync_batch_norm(in[0], in[1], in[2], Tensor(), Tensor(), g);
                  },
                  {rand_f64({3, 2, 3, 2}, 4), rand_f64({2}, 5), rand_f64({2}, 6)});
}

TEST(SyncBatchNorm, TwoRanksEqualBatchNormOnTheUnionBatch) {
  const int world = 2;
  const Tensor x = rand_f64({6, 3, 4, 4}, 7, -1, 1, false);
  const Tensor dy = rand_f64({6, 3, 4, 4}, 8, -1, 1, false);
  const Tensor w0 = rand_f64({3}, 9, 0.5, 1.5, false), b0 = rand_f64({3}, 10, -1, 1, false);
  // Reference on the union batch.
  Tensor xr = x.clone().set_requires_grad(true), wr = w0.clone().set_requires_grad(true),
         br = b0.clone().set_requires_grad(true);
  Tensor rm = zeros({3}, {.dtype = DType::f64}), rv = ones({3}, {.dtype = DType::f64});
  Tensor yr = ops::batch_norm(xr, wr, br, rm, rv, {.training = true});
  ops::sum(yr * dy).backward();

  auto fw = std::make_shared<dist::testing::FakeWorld>(world);
  std::vector<Tensor> ys(world), dxs(world), dws(world), dbs(world), rms(world), rvs(world);
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      auto g = dist::sync_bn_group(std::make_shared<dist::testing::FakeGroup>(fw, r));
      Tensor xi = x.narrow(0, r * 3, 3).clone().set_requires_grad(true);
      Tensor wi = w0.clone().set_requires_grad(true), bi = b0.clone().set_requires_grad(true);
      rms[r] = zeros({3}, {.dtype = DType::f64});
      rvs[r] = ones({3}, {.dtype = DType::f64});
      ys[r] = ops::sync_batch_norm(xi, wi, bi, rms[r], rvs[r], *g);
      ops::sum(ys[r] * dy.narrow(0, r * 3, 3)).backward();
      dxs[r] = xi.grad();
      dws[r] = wi.grad();
      dbs[r] = bi.grad();
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < world; ++r) {
    expect_close(ys[r], yr.narrow(0, r * 3, 3), 1e-10, 1e-8, "y");
    expect_close(dxs[r], xr.grad().narrow(0, r * 3, 3), 1e-10, 1e-8, "dx");
    expect_close(rms[r], rm, 1e-12, 1e-10, "running_mean");
    expect_close(rvs[r], rv, 1e-12, 1e-10, "running_var");
  }
  // weight/bias gradients are local: their sum over ranks is the union's.
  expect_close(dws[0] + dws[1], wr.grad(), 1e-10, 1e-8, "dweight");
  expect_close(dbs[0] + dbs[1], br.grad(), 1e-10, 1e-8, "dbias");
}

TEST(SyncBatchNorm, ConvertKeepsStateAndHandles) {
  auto bn = std::make_shared<nn::BatchNorm2d>(4);
  nn::Sequential seq{std::make_shared<nn::Conv2d>(2, 4, 3), bn};
  {
    NoGradGuard ng;
    bn->running_mean.fill_(0.5);
  }
  const auto before = seq.state_dict();
  EXPECT_EQ(nn::convert_sync_batchnorm(seq, std::make_shared<nn::SyncBNGroup>(local_group())), 1);
  EXPECT_EQ(bn->type_name(), "SyncBatchNorm");
  const auto after = seq.state_dict();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].first, before[i].first);
    EXPECT_EQ(after[i].second.data_ptr(), before[i].second.data_ptr());
  }
  // World size 1: exactly BatchNorm2d.
  nn::SyncBatchNorm solo(4, {}, std::make_shared<nn::SyncBNGroup>(nn::SyncBNGroup{1, nullptr}));
  nn::BatchNorm2d plain(4);
  const Tensor x = randn({2, 4, 3, 3});
  expect_close(solo.forward(x), plain.forward(x), 0, 0, "world 1");
}

}  // namespace
}  // namespace tcv
