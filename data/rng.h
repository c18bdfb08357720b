// The random draws of data augmentation: a counter-based stream per sample, so a
// sample's augmentation depends only on (seed, epoch, index), never on the
// thread that runs it.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "engine/rng.h"

namespace tcv::data {

/// A counter-based random stream (Philox-4x32-10): the k-th draw depends only on
/// (seed, stream, k). Cheap to make; one per sample.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}
  /// A fresh stream from a Generator: its seed, and a stream id reserved from its counter.
  static Rng from(Generator& gen) { return Rng(gen.seed(), gen.advance(1)); }

  uint32_t next_u32();
  /// Uniform in [0, 1) with 53 random bits.
  double uniform();
  double uniform(double low, double high) { return low + (high - low) * uniform(); }
  /// Uniform integer in [low, high); low < high.
  int64_t randint(int64_t low, int64_t high);
  /// Standard normal (Box-Muller).
  double normal();
  /// Gamma(shape, 1) (Marsaglia-Tsang); shape > 0.
  double gamma(double shape);
  /// Beta(a, b) as X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b).
  double beta(double a, double b);
  /// A uniformly random permutation of [0, n) (Fisher-Yates).
  std::vector<int64_t> permutation(int64_t n);

  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }

 private:
  uint64_t seed_, stream_;
  uint64_t block_ = 0;  // next Philox block
  std::array<uint32_t, 4> words_{};
  int used_ = 4;  // words of the current block already consumed
};

}  // namespace tcv::data
