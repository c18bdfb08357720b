#include <numbers>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rng.h"

namespace tcv::kernels::cuda {

namespace {

struct Words {
  uint32_t w[4];
};

// philox4x32 of engine/rng.cpp: counter (lo, hi, 0, 0), key (seed lo, seed hi).
__device__ __forceinline__ Words philox_block(uint64_t seed, uint64_t counter) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0u, c3 = 0u;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n1 = static_cast<uint32_t>(p1);
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    const uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += kW0;
    k1 += kW1;
  }
  return {{c0, c1, c2, c3}};
}

// [0, 1) from the top 24 bits, exactly as to_unit in engine/rng.cpp.
__device__ __forceinline__ double to_unit(uint32_t w) {
  return static_cast<double>(w >> 8) * (1.0 / 16777216.0);
}

// One thread per Philox block b (grid-stride): f(i, w, j) for its elements
// i = b * Per + j below n, w the block's four words.
template <int Per, typename F>
__device__ __forceinline__ void for_philox_blocks(int64_t n, uint64_t seed, uint64_t base, F f) {
  const int64_t blocks = (n + Per - 1) / Per;
  TCV_CUDA_GRID_STRIDE(b, blocks) {
    const Words w = philox_block(seed, base + static_cast<uint64_t>(b));
#pragma unroll
    for (int j = 0; j < Per; ++j) {
      const int64_t i = b * Per + j;
      if (i < n) f(i, w, j);
    }
  }
}

template <typename T>
__global__ void uniform_kernel(T* out, int64_t n, uint64_t seed, uint64_t base, double low,
                               double range) {
  for_philox_blocks<4>(n, seed, base, [&](int64_t i, const Words& w, int j) {
    out[i] = convert<T>(__fma_rn(range, to_unit(w.w[j]), low));
  });
}

template <typename T>
__global__ void normal_kernel(T* out, int64_t n, uint64_t seed, uint64_t base, double mean,
                              double std) {
  constexpr double kTwoPi = 2.0 * std::numbers::pi;
  for_philox_blocks<2>(n, seed, base, [&](int64_t i, const Words& w, int j) {
    const double u1 = __dsub_rn(1.0, to_unit(w.w[2 * j]));  // (0, 1]: log is finite
    const double u2 = to_unit(w.w[2 * j + 1]);
    const double r = __dsqrt_rn(__dmul_rn(-2.0, ::log(u1)));
    out[i] = convert<T>(__fma_rn(__dmul_rn(std, r), ::cos(__dmul_rn(kTwoPi, u2)), mean));
  });
}

template <typename T>
__global__ void randint_kernel(T* out, int64_t n, uint64_t seed, uint64_t base, int64_t low,
                               uint64_t range) {
  for_philox_blocks<2>(n, seed, base, [&](int64_t i, const Words& w, int j) {
    const uint64_t r = (static_cast<uint64_t>(w.w[2 * j]) << 32) | w.w[2 * j + 1];
    out[i] = convert<T>(static_cast<int64_t>(low + static_cast<int64_t>(r % range)));
  });
}

template <typename T>
__global__ void dropout_kernel(T* out, T* mask, const T* x, int64_t n, uint64_t seed, uint64_t base,
                               double keep, T scale) {
  for_philox_blocks<4>(n, seed, base, [&](int64_t i, const Words& w, int j) {
    const T mk = to_unit(w.w[j]) < keep ? scale : convert<T>(0.0);
    mask[i] = mk;
    // As the CPU's mul: the product in the accumulation type, rounded once.
    out[i] = convert<T>(to_acc(x[i]) * to_acc(mk));
  });
}

}  // namespace

void uniform(const KTensor& out, uint64_t seed, uint64_t base, double low, double high) {
  const int64_t n = out.numel();
  if (n == 0) return;
  TCV_CUDA_DISPATCH_ALL(out.dtype, "uniform", {
    uniform_kernel<scalar_t><<<grid_for((n + 3) / 4), 256, 0, cur_stream()>>>(
        out.ptr<scalar_t>(), n, seed, base, low, high - low);
  });
  TCV_CUDA_LAUNCH_CHECK();
}

void normal(const KTensor& out, uint64_t seed, uint64_t base, double mean, double std) {
  const int64_t n = out.numel();
  if (n == 0) return;
  TCV_CUDA_DISPATCH_ALL(out.dtype, "normal", {
    normal_kernel<scalar_t><<<grid_for((n + 1) / 2), 256, 0, cur_stream()>>>(out.ptr<scalar_t>(), n,
                                                                             seed, base, mean, std);
  });
  TCV_CUDA_LAUNCH_CHECK();
}

void randint(const KTensor& out, uint64_t seed, uint64_t base, int64_t low, int64_t high) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const uint64_t range = static_cast<uint64_t>(high - low);
  TCV_CUDA_DISPATCH_ALL(out.dtype, "randint", {
    randint_kernel<scalar_t><<<grid_for((n + 1) / 2), 256, 0, cur_stream()>>>(
        out.ptr<scalar_t>(), n, seed, base, low, range);
  });
  TCV_CUDA_LAUNCH_CHECK();
}

void dropout(const KTensor& out, const KTensor& mask, const KTensor& x, double p, uint64_t seed,
             uint64_t base) {
  const int64_t n = x.numel();
  if (n == 0) return;
  TCV_CUDA_DISPATCH_FLOAT(x.dtype, "dropout", {
    const scalar_t scale = convert<scalar_t>(1.0 / (1.0 - p));
    dropout_kernel<scalar_t><<<grid_for((n + 3) / 4), 256, 0, cur_stream()>>>(
        out.ptr<scalar_t>(), mask.ptr<scalar_t>(), x.ptr<scalar_t>(), n, seed, base, 1.0 - p,
        scale);
  });
  TCV_CUDA_LAUNCH_CHECK();
}

}  // namespace tcv::kernels::cuda
