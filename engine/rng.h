// Counter-based random numbers (Philox-4x32-10): element i of a draw depends
// only on (seed, offset, i), never on the number of threads or the device.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

#include "engine/tensor.h"

namespace tcv {

/// Philox-4x32 with 10 rounds: four 32-bit words from a 128-bit counter and a 64-bit key.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

/// A seed and a position in its stream. Each draw reserves the counters it uses.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  void manual_seed(uint64_t seed) {
    std::lock_guard<std::mutex> l(mu_);
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_offset(uint64_t o) {
    std::lock_guard<std::mutex> l(mu_);
    offset_ = o;
  }
  /// Reserves n counters; returns the first.
  uint64_t advance(uint64_t n) {
    std::lock_guard<std::mutex> l(mu_);
    const uint64_t o = offset_;
    offset_ += n;
    return o;
  }

 private:
  std::mutex mu_;
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
};

/// The process-wide generator.
Generator& default_generator();
/// Seeds the default generator.
void manual_seed(uint64_t seed);

/// Uniform in [low, high).
Tensor rand(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor uniform(const Shape& shape, double low, double high, TensorOptions opts = {},
               Generator* gen = nullptr);
/// Normal with the given mean and std.
Tensor randn(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor normal(const Shape& shape, double mean, double std, TensorOptions opts = {},
              Generator* gen = nullptr);
/// Integers in [low, high); i64 unless opts say otherwise.
Tensor randint(int64_t low, int64_t high, const Shape& shape,
               TensorOptions opts = {.dtype = DType::i64}, Generator* gen = nullptr);
/// A random permutation of [0, n) (i64).
Tensor randperm(int64_t n, Generator* gen = nullptr);

/// In-place initialisers (no autograd), for layers' parameter init.
void uniform_(Tensor& t, double low, double high, Generator* gen = nullptr);
void normal_(Tensor& t, double mean, double std, Generator* gen = nullptr);

}  // namespace tcv
