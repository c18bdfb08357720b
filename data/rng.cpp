#include "data/rng.h"

#include <cmath>
#include <numbers>

namespace tcv::data {

uint32_t Rng::next_u32() {
  if (used_ == 4) {
    words_ = philox4x32({static_cast<uint32_t>(block_), static_cast<uint32_t>(block_ >> 32),
                         static_cast<uint32_t>(stream_), static_cast<uint32_t>(stream_ >> 32)},
                        {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)});
    ++block_;
    used_ = 0;
  }
  return words_[used_++];
}

double Rng::uniform() {
  const uint64_t a = next_u32() >> 5, b = next_u32() >> 6;
  return static_cast<double>(a * 67108864u + b) * (1.0 / 9007199254740992.0);
}

int64_t Rng::randint(int64_t low, int64_t high) {
  TCV_CHECK(low < high, "[Rng::randint] empty range [", low, ", ", high, ")");
  const double r = static_cast<double>(high - low);
  const auto k = static_cast<int64_t>(std::floor(uniform() * r));
  return low + std::min<int64_t>(k, high - low - 1);
}

double Rng::normal() {
  const double u1 = 1.0 - uniform(), u2 = uniform();  // u1 in (0, 1]
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double Rng::gamma(double shape) {
  TCV_CHECK(shape > 0, "[Rng::gamma] shape must be positive, got ", shape);
  if (shape < 1.0) return gamma(shape + 1.0) * std::pow(1.0 - uniform(), 1.0 / shape);
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    const double x = normal();
    double v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    const double u = 1.0 - uniform();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

double Rng::beta(double a, double b) {
  const double x = gamma(a), y = gamma(b);
  return x + y > 0 ? x / (x + y) : 0.5;
}

std::vector<int64_t> Rng::permutation(int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[randint(0, i + 1)]);
  return p;
}

}  // namespace tcv::data
