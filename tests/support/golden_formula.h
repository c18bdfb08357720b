// The closed-form values the golden scripts (scripts/make_golden_*.py) feed
// PyTorch, repeated here so the tests need neither PyTorch nor stored inputs.
#pragma once

#include <cstdint>
#include <string>

namespace tcv::testing {

/// u(i, seed) in [0, 1): murmur3's 32-bit finalizer of a Weyl sequence, as the
/// scripts' uniform(n, seed)[i].
inline double golden_uniform(int64_t i, int64_t seed) {
  uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u +
               static_cast<uint32_t>(static_cast<uint64_t>(seed) * 0x7F4A7C15u + 1u);
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return static_cast<double>(h) / 4294967296.0;
}

/// The scripts' seed(name): Σ (j + 1)·name[j] mod 1009.
inline int64_t golden_seed(const std::string& name) {
  int64_t s = 0;
  for (size_t j = 0; j < name.size(); ++j)
    s += static_cast<int64_t>(j + 1) * static_cast<unsigned char>(name[j]);
  return s % 1009;
}

}  // namespace tcv::testing
