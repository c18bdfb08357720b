// conv2d, max_pool2d and batch_norm forward+backward through the op API (what a
// training step pays), with GFLOP/s for convolution. PyTorch's numbers for the
// same shapes come from bench/compare/conv_torch.py.
//
// The dilated 3x3 convolutions of the segmentation backbones (BM_Conv2dFwdBwd
// with dil > 1: layer3 and layer4 of a ResNet at output stride 8, an ASPP
// branch) sit beside undilated ones of the same shape, hence the same FLOPs;
// each case's label names oneDNN's implementations (forward / backward-data /
// backward-weights), so a fallback to a reference or GEMM kernel shows.
//
//   OMP_NUM_THREADS=2 tcv-gbench --benchmark_filter='Conv2d|MaxPool|BatchNorm'
#include <benchmark/benchmark.h>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "kernels/cpu/conv.h"

namespace {

using namespace tcv;

// oneDNN's implementations for a stride-1 convolution, as the case's label.
std::string impl_label(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r,
                       int64_t pad, int64_t dil, bool bias) {
  kernels::Conv2dGeom g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.k = k, g.r = r, g.s = r;
  g.pad[0] = g.pad[1] = pad;
  g.dilation[0] = g.dilation[1] = dil;
  g.oh = h + 2 * pad - dil * (r - 1);
  g.ow = w + 2 * pad - dil * (r - 1);
  g.has_bias = bias;
  return kernels::cpu::conv2d_impl_names(g);
}

// Args: N, C, H, W, K, R (=S), pad, dilation.
void BM_Conv2dFwdBwd(benchmark::State& state) {
  const int64_t n = state.range(0), c = state.range(1), h = state.range(2), w = state.range(3);
  const int64_t k = state.range(4), r = state.range(5), pad = state.range(6);
  const int64_t dil = state.range(7);
  Generator gen(1);
  Tensor x = randn({n, c, h, w}, {}, &gen).set_requires_grad(true);
  Tensor weight = ops::mul(randn({k, c, r, r}, {}, &gen), 0.05).set_requires_grad(true);
  Tensor bias = zeros({k}).set_requires_grad(true);
  const ops::Conv2dParams p{.padding = {pad, pad}, .dilation = {dil, dil}};
  const int64_t oh = h + 2 * pad - dil * (r - 1), ow = w + 2 * pad - dil * (r - 1);
  Tensor dy = randn({n, k, oh, ow}, {}, &gen);
  for (auto _ : state) {
    Tensor y = ops::conv2d(x, weight, bias, p);
    x.set_grad(Tensor());
    weight.set_grad(Tensor());
    bias.set_grad(Tensor());
    y.backward(dy);
    benchmark::DoNotOptimize(weight.grad().data_ptr());
  }
  // Forward, backward-data and backward-weights each cost one pass.
  const double flops = 3.0 * 2.0 * n * k * c * r * r * oh * ow;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(impl_label(n, c, h, w, k, r, pad, dil, true));
}
BENCHMARK(BM_Conv2dFwdBwd)
    ->ArgNames({"N", "C", "H", "W", "K", "R", "pad", "dil"})
    ->Args({32, 64, 32, 32, 64, 3, 1, 1})
    ->Args({16, 256, 14, 14, 256, 3, 1, 1})
    // Segmentation at output stride 8, batch 4 of 256x256: layer3 (dilation 2),
    // layer4 (dilation 4) and an ASPP branch (dilation 12), each beside the same
    // layer undilated.
    ->Args({4, 256, 32, 32, 256, 3, 1, 1})
    ->Args({4, 256, 32, 32, 256, 3, 2, 2})
    ->Args({4, 512, 32, 32, 512, 3, 1, 1})
    ->Args({4, 512, 32, 32, 512, 3, 4, 4})
    ->Args({4, 2048, 32, 32, 256, 3, 1, 1})
    ->Args({4, 2048, 32, 32, 256, 3, 12, 12})
    ->Args({4, 2048, 56, 56, 256, 3, 0, 12})
    ->Args({16, 256, 16, 16, 256, 3, 1, 1})
    ->Args({64, 512, 8, 8, 512, 3, 1, 1})
    // VGG layers at the batches the detection and pose steps train with:
    // SSD300's conv3 (batch 4), OpenPose's conv2 and conv4 (batch 2, 368x368).
    ->Args({4, 256, 75, 75, 256, 3, 1, 1})
    ->Args({2, 128, 184, 184, 128, 3, 1, 1})
    ->Args({2, 512, 46, 46, 512, 3, 1, 1})
    // SSD's last extra layers: 3x3 maps, where Winograd would be slower.
    ->Args({4, 128, 5, 5, 256, 3, 0, 1})
    // PSPNet's head: 3x3 conv over the 4096 channels of the pyramid pooling.
    ->Args({4, 4096, 32, 32, 512, 3, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);

// Forward only, as in inference.
void BM_Conv2dFwd(benchmark::State& state) {
  const int64_t n = state.range(0), c = state.range(1), h = state.range(2), w = state.range(3);
  const int64_t k = state.range(4), r = state.range(5), pad = state.range(6);
  Generator gen(1);
  Tensor x = randn({n, c, h, w}, {}, &gen);
  Tensor weight = ops::mul(randn({k, c, r, r}, {}, &gen), 0.05);
  const ops::Conv2dParams p{.padding = {pad, pad}};
  for (auto _ : state) benchmark::DoNotOptimize(ops::conv2d(x, weight, Tensor(), p).data_ptr());
  const int64_t oh = h + 2 * pad - r + 1, ow = w + 2 * pad - r + 1;
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * k * c * r * r * oh * ow * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Conv2dFwd)
    ->ArgNames({"N", "C", "H", "W", "K", "R", "pad"})
    ->Args({32, 64, 32, 32, 64, 3, 1})
    ->Args({16, 256, 14, 14, 256, 3, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// blocked = 1: x as a convolution leaves it (the CPU's blocked layout), which
// tcv pools in its own kernel; 0: row-major, oneDNN's.
void BM_MaxPool2dFwdBwd(benchmark::State& state) {
  Generator gen(2);
  Tensor x = randn({64, 32, 28, 28}, {}, &gen);
  if (state.range(0)) x = to_blocked(x);
  x.set_requires_grad(true);
  Tensor dy = randn({64, 32, 14, 14}, {}, &gen);
  const ops::Pool2dParams p{.kernel = {2, 2}, .stride = {2, 2}};
  for (auto _ : state) {
    Tensor y = ops::max_pool2d(x, p);
    x.set_grad(Tensor());
    y.backward(dy);
    benchmark::DoNotOptimize(x.grad().data_ptr());
  }
  // Bytes touched: x and y forward, dy and dx backward (workspace not counted).
  const double bytes = 4.0 * (2 * x.numel() + 2 * dy.numel());
  state.counters["GB/s"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MaxPool2dFwdBwd)
    ->ArgName("blocked")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_BatchNormTrainFwdBwd(benchmark::State& state) {
  Generator gen(3);
  Tensor x = randn({64, 32, 28, 28}, {}, &gen).set_requires_grad(true);
  Tensor weight = ones({32}).set_requires_grad(true);
  Tensor bias = zeros({32}).set_requires_grad(true);
  Tensor rm = zeros({32}), rv = ones({32});
  Tensor dy = randn({64, 32, 28, 28}, {}, &gen);
  for (auto _ : state) {
    Tensor y = ops::batch_norm(x, weight, bias, rm, rv, {.training = true});
    x.set_grad(Tensor());
    weight.set_grad(Tensor());
    bias.set_grad(Tensor());
    y.backward(dy);
    benchmark::DoNotOptimize(x.grad().data_ptr());
  }
  // Forward reads x twice and writes y; backward reads x and dy twice, writes dx.
  const double bytes = 4.0 * 8 * x.numel();
  state.counters["GB/s"] =
      benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_BatchNormTrainFwdBwd)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
