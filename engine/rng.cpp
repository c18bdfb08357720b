#include "engine/rng.h"

#include <cmath>
#include <numbers>
#include <type_traits>

#include "kernels/cpu/loops.h"
#include "kernels/cpu/philox_blocks.h"
#include "kernels/cuda/rng.h"

namespace tcv {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

Generator& default_generator() {
  static Generator g(0);
  return g;
}

void manual_seed(uint64_t seed) {
  default_generator().manual_seed(seed);
}

namespace {

using kernels::cpu::for_each_philox_group;
using kernels::cpu::philox_to_unit;

Generator& pick(Generator* g) {
  return g ? *g : default_generator();
}

// The seed and the first of `blocks` counters reserved for one draw.
struct Draw {
  uint64_t seed;
  uint64_t base;
};
Draw reserve(Generator* gen, uint64_t blocks) {
  Generator& g = pick(gen);
  const uint64_t seed = g.seed();
  return {seed, g.advance(blocks)};
}

// A draw for a CUDA device: the same counters the CPU draw reserves, filled on
// the device (kernels/cuda/rng.h) straight in the target dtype. `fill`
// receives the (contiguous) output and the draw.
template <typename F>
Tensor cuda_draw(const Shape& shape, const TensorOptions& opts, uint64_t blocks, Generator* gen,
                 F&& fill) {
  Tensor t = empty(shape, {.dtype = opts.dtype, .device = opts.device});
  const Draw d = reserve(gen, blocks);
  kernels::cuda::DeviceGuard guard(opts.device.index);
  fill(t, d);
  if (opts.requires_grad) t.set_requires_grad(true);
  return t;
}

// In-place initialisers on a CUDA tensor: drawn contiguous in its dtype, then copied.
template <typename F>
void cuda_fill_(Tensor& t, uint64_t blocks, Generator* gen, F&& fill) {
  Tensor tmp = cuda_draw(t.shape(), {.dtype = t.dtype(), .device = t.device()}, blocks, gen,
                         std::forward<F>(fill));
  t.copy_(tmp);
}

uint64_t blocks_of(int64_t n, int64_t per) {
  return static_cast<uint64_t>((n + per - 1) / per);
}

std::array<uint32_t, 4> block(uint64_t seed, uint64_t counter) {
  return philox4x32({static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0u, 0u},
                    {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

// A draw of n values, element i from the words of Philox block i / Per:
// value(words, e) gives element i0 + e of a group whose words start at block
// i0 / Per (philox_blocks.h). Values are computed in double and rounded once to
// the destination's dtype: into a contiguous f32/f64 tensor directly (no
// full-size f64 temporary), or into a new f64 tensor.
template <int Per, typename Value>
Tensor generate(int64_t n, Draw d, Value&& value, const Tensor* into = nullptr) {
  Tensor t = into ? *into : empty({n}, {.dtype = DType::f64});
  auto fill = [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    for_each_philox_group(d.seed, d.base, (n + Per - 1) / Per,
                          [&](int64_t k0, int64_t m, const uint32_t* words) {
                            const int64_t i0 = k0 * Per, count = std::min(m * Per, n - i0);
                            T* q = p + i0;
                            for (int64_t e = 0; e < count; ++e)
                              q[e] = static_cast<T>(value(words, e));
                          });
  };
  if (t.dtype() == DType::f32)
    fill(t.data<float>());
  else
    fill(t.data<double>());
  return t;
}

/// Whether a draw can be written straight into t (see generate).
bool direct(const Tensor& t) {
  return t.device().is_cpu() && t.is_contiguous() && !t.is_blocked() &&
         (t.dtype() == DType::f32 || t.dtype() == DType::f64);
}

Tensor finish(Tensor t64, const Shape& shape, const TensorOptions& opts) {
  Tensor r = t64.reshape(shape).to(opts.dtype).to(opts.device);
  if (opts.requires_grad) r.set_requires_grad(true);
  return r;
}

Tensor uniform_impl(const Shape& shape, double low, double high, Generator* gen,
                    const Tensor* into = nullptr) {
  const int64_t n = shape_numel(shape);
  return generate<4>(
      n, reserve(gen, blocks_of(n, 4)),
      [&](const uint32_t* w, int64_t e) {
        // An explicit fma (what -march=native builds contracted this to anyway):
        // the same rounding on every host and on the GPU (kernels/cuda/rng.cu).
        return std::fma(high - low, philox_to_unit(w[e]), low);
      },
      into);
}

Tensor normal_impl(const Shape& shape, double mean, double std, Generator* gen,
                   const Tensor* into = nullptr) {
  const int64_t n = shape_numel(shape);
  return generate<2>(
      n, reserve(gen, blocks_of(n, 2)),
      [&](const uint32_t* w, int64_t e) {
        const double u1 = 1.0 - philox_to_unit(w[2 * e]);  // (0, 1]: log is finite
        const double u2 = philox_to_unit(w[2 * e + 1]);
        return std::fma(std * std::sqrt(-2.0 * std::log(u1)), std::cos(2.0 * std::numbers::pi * u2),
                        mean);
      },
      into);
}

}  // namespace

Tensor uniform(const Shape& shape, double low, double high, TensorOptions opts, Generator* gen) {
  if (opts.device.is_cuda())
    return cuda_draw(shape, opts, blocks_of(shape_numel(shape), 4), gen,
                     [&](const Tensor& t, Draw d) {
                       kernels::cuda::uniform(t.strided_desc(), d.seed, d.base, low, high);
                     });
  return finish(uniform_impl(shape, low, high, gen), shape, opts);
}

Tensor rand(const Shape& shape, TensorOptions opts, Generator* gen) {
  return uniform(shape, 0.0, 1.0, opts, gen);
}

Tensor normal(const Shape& shape, double mean, double std, TensorOptions opts, Generator* gen) {
  if (opts.device.is_cuda())
    return cuda_draw(shape, opts, blocks_of(shape_numel(shape), 2), gen,
                     [&](const Tensor& t, Draw d) {
                       kernels::cuda::normal(t.strided_desc(), d.seed, d.base, mean, std);
                     });
  return finish(normal_impl(shape, mean, std, gen), shape, opts);
}

Tensor randn(const Shape& shape, TensorOptions opts, Generator* gen) {
  return normal(shape, 0.0, 1.0, opts, gen);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts, Generator* gen) {
  TCV_CHECK(high > low, "[randint] empty range [", low, ", ", high, ")");
  const int64_t n = shape_numel(shape);
  if (opts.device.is_cuda())
    return cuda_draw(shape, {.dtype = opts.dtype, .device = opts.device}, blocks_of(n, 2), gen,
                     [&](const Tensor& t, Draw d) {
                       kernels::cuda::randint(t.strided_desc(), d.seed, d.base, low, high);
                     });
  const Draw d = reserve(gen, blocks_of(n, 2));
  const uint64_t range = static_cast<uint64_t>(high - low);
  Tensor t = empty({n}, {.dtype = DType::i64});
  int64_t* p = t.data<int64_t>();
  for_each_philox_group(d.seed, d.base, (n + 1) / 2, [&](int64_t k0, int64_t m, const uint32_t* w) {
    const int64_t i0 = 2 * k0, count = std::min(2 * m, n - i0);
    for (int64_t e = 0; e < count; ++e) {
      const uint64_t r = (static_cast<uint64_t>(w[2 * e]) << 32) | w[2 * e + 1];
      p[i0 + e] = low + static_cast<int64_t>(r % range);
    }
  });
  Tensor r = t.reshape(shape).to(opts.dtype).to(opts.device);
  return r;
}

Tensor randperm(int64_t n, Generator* gen) {
  Generator& g = pick(gen);
  const uint64_t seed = g.seed();
  const uint64_t base = g.advance(static_cast<uint64_t>(std::max<int64_t>(n, 1)));
  Tensor t = arange(n);
  int64_t* p = t.data<int64_t>();
  for (int64_t i = n - 1; i > 0; --i) {
    const auto w = block(seed, base + static_cast<uint64_t>(i));
    const uint64_t r = (static_cast<uint64_t>(w[0]) << 32) | w[1];
    std::swap(p[i], p[static_cast<int64_t>(r % static_cast<uint64_t>(i + 1))]);
  }
  return t;
}

void uniform_(Tensor& t, double low, double high, Generator* gen) {
  if (t.device().is_cuda()) {
    cuda_fill_(t, blocks_of(t.numel(), 4), gen, [&](const Tensor& tmp, Draw d) {
      kernels::cuda::uniform(tmp.strided_desc(), d.seed, d.base, low, high);
    });
    return;
  }
  if (direct(t)) {
    uniform_impl(t.shape(), low, high, gen, &t);
    t.bump_version();
    return;
  }
  Tensor v = uniform_impl(t.shape(), low, high, gen).reshape(t.shape());
  t.copy_(v);
}

void normal_(Tensor& t, double mean, double std, Generator* gen) {
  if (t.device().is_cuda()) {
    cuda_fill_(t, blocks_of(t.numel(), 2), gen, [&](const Tensor& tmp, Draw d) {
      kernels::cuda::normal(tmp.strided_desc(), d.seed, d.base, mean, std);
    });
    return;
  }
  if (direct(t)) {
    normal_impl(t.shape(), mean, std, gen, &t);
    t.bump_version();
    return;
  }
  Tensor v = normal_impl(t.shape(), mean, std, gen).reshape(t.shape());
  t.copy_(v);
}

}  // namespace tcv
