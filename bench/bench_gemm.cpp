// GEMM throughput: raw SGEMM through OpenBLAS and oneDNN, and the linear
// layer of a classifier head, forward and backward, through tcv::ops.
#include <benchmark/benchmark.h>

#include <vector>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/rng.h"
#include "kernels/cpu/gemm.h"

namespace {

using tcv::kernels::GemmLib;
using tcv::kernels::Trans;

void set_flops(benchmark::State& state, double flops_per_iter) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops_per_iter * 1e-9 * state.iterations(), benchmark::Counter::kIsRate);
}

// C (n, n) = A (n, n) · B (n, n); range(0) = n, range(1) = library, range(2) = B transposed.
void BM_sgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto lib = static_cast<GemmLib>(state.range(1));
  const auto tb = state.range(2) ? Trans::yes : Trans::no;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  for (int64_t i = 0; i < n * n; ++i) a[i] = static_cast<float>(i % 7) * 0.1f;
  for (auto _ : state) {
    tcv::kernels::cpu::gemm(tcv::DType::f32, Trans::no, tb, n, n, n, 1.0, a.data(), n, b.data(), n,
                            0.0, c.data(), n, lib);
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(state, 2.0 * n * n * n);
  state.SetLabel(lib == GemmLib::openblas ? "openblas" : "onednn");
}
BENCHMARK(BM_sgemm)
    ->ArgsProduct({{1024},
                   {static_cast<int64_t>(GemmLib::openblas), static_cast<int64_t>(GemmLib::onednn)},
                   {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_dgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<double> a(n * n, 0.5), b(n * n, 0.25), c(n * n);
  for (auto _ : state) {
    tcv::kernels::cpu::gemm(tcv::DType::f64, Trans::no, Trans::no, n, n, n, 1.0, a.data(), n,
                            b.data(), n, 0.0, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(state, 2.0 * n * n * n);
}
BENCHMARK(BM_dgemm)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

// The three GEMMs of the classifier head's linear layer, per library:
// y = x·wᵀ (64x128, k 3136), dx = dy·w (64x3136, k 128), dw = dyᵀ·x (128x3136, k 64).
void BM_linear_gemms(benchmark::State& state) {
  const int64_t batch = 64, in = 3136, out = 128;
  const auto lib = static_cast<GemmLib>(state.range(0));
  std::vector<float> x(batch * in, 0.5f), w(out * in, 0.25f), y(batch * out), dx(batch * in),
      dw(out * in);
  for (auto _ : state) {
    tcv::kernels::cpu::gemm(tcv::DType::f32, Trans::no, Trans::yes, batch, out, in, 1.0, x.data(),
                            in, w.data(), in, 0.0, y.data(), out, lib);
    tcv::kernels::cpu::gemm(tcv::DType::f32, Trans::no, Trans::no, batch, in, out, 1.0, y.data(),
                            out, w.data(), in, 0.0, dx.data(), in, lib);
    tcv::kernels::cpu::gemm(tcv::DType::f32, Trans::yes, Trans::no, out, in, batch, 1.0, y.data(),
                            out, x.data(), in, 0.0, dw.data(), in, lib);
    benchmark::DoNotOptimize(dw.data());
  }
  set_flops(state, 3.0 * 2.0 * batch * in * out);
  state.SetLabel(lib == GemmLib::openblas ? "openblas" : "onednn");
}
BENCHMARK(BM_linear_gemms)
    ->Arg(static_cast<int64_t>(GemmLib::openblas))
    ->Arg(static_cast<int64_t>(GemmLib::onednn))
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The classifier head: x (64, 3136) -> 128 features, forward + backward
// (dx, dweight, dbias): three GEMMs of 2·64·3136·128 flops each.
void BM_linear_fwd_bwd(benchmark::State& state) {
  const int64_t batch = 64, in = 3136, out = 128;
  tcv::Generator g(0);
  tcv::Tensor x = tcv::randn({batch, in}, {}, &g).set_requires_grad(true);
  tcv::Tensor w = tcv::randn({out, in}, {}, &g).set_requires_grad(true);
  tcv::Tensor b = tcv::randn({out}, {}, &g).set_requires_grad(true);
  tcv::Tensor dy = tcv::ones({batch, out});
  for (auto _ : state) {
    tcv::Tensor y = tcv::ops::linear(x, w, b);
    y.backward(dy);
    benchmark::DoNotOptimize(w.grad().data_ptr());
  }
  set_flops(state, 3.0 * 2.0 * batch * in * out);
}
BENCHMARK(BM_linear_fwd_bwd)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_linear_fwd(benchmark::State& state) {
  const int64_t batch = 64, in = 3136, out = 128;
  tcv::Generator g(0);
  tcv::Tensor x = tcv::randn({batch, in}, {}, &g);
  tcv::Tensor w = tcv::randn({out, in}, {}, &g);
  tcv::Tensor b = tcv::randn({out}, {}, &g);
  for (auto _ : state) {
    tcv::Tensor y = tcv::ops::linear(x, w, b);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  set_flops(state, 2.0 * batch * in * out);
}
BENCHMARK(BM_linear_fwd)->Unit(benchmark::kMicrosecond)->UseRealTime();

// An OpenMP elementwise loop right before each GEMM: shows whether the BLAS
// threads and the OpenMP pool fight over the cores.
void BM_relu_then_sgemm(benchmark::State& state) {
  const int64_t n = 512;
  tcv::Generator g(0);
  tcv::Tensor x = tcv::randn({1 << 20}, {}, &g);
  tcv::Tensor a = tcv::randn({n, n}, {}, &g), b = tcv::randn({n, n}, {}, &g);
  for (auto _ : state) {
    tcv::Tensor r = tcv::ops::relu(x);
    tcv::Tensor c = tcv::ops::matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
    benchmark::DoNotOptimize(r.data_ptr());
  }
  set_flops(state, 2.0 * n * n * n);
  state.counters["blas_threads"] = tcv::kernels::cpu::blas_threads();
}
BENCHMARK(BM_relu_then_sgemm)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
