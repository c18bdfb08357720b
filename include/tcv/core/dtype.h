// Element types: the vocabulary every layer of tcv shares, from the kernels
// up to the installed API (tcv::DType, tcv::Half, tcv::BFloat16).
//
// include/tcv/core/ sits below every folder of the tree: kernels/ reaches it
// as engine/ does, so the one definition serves both, and the installed API
// needs nothing of kernels/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tcv {

/// The most dimensions a tensor has (what the kernels' descriptors hold).
constexpr int kMaxDims = 8;

/// Element types. f64 exists for gradient checks; f16/bf16 for mixed precision.
enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, u8, b8 };

constexpr int kNumDTypes = 8;

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::u8:
      return "u8";
    case DType::b8:
      return "bool";
  }
  return "?";
}

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::u8:
    case DType::b8:
      return 1;
  }
  return 0;
}

inline bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

/// IEEE 754 binary16, stored as bits; arithmetic goes through float.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(from_float(f)) {}  // NOLINT: implicit like a builtin type
  operator float() const { return to_float(bits); }

  static uint16_t from_float(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u)
      return static_cast<uint16_t>(sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
    if (absx < 0x38800000u) {                                               // subnormal or zero
      float af;
      uint32_t a = absx;
      std::memcpy(&af, &a, 4);
      // Scale into the subnormal range and let the FPU round to nearest even.
      const float scaled = af * 16777216.0f;  // 2^24
      return static_cast<uint16_t>(sign | static_cast<uint32_t>(__builtin_nearbyintf(scaled)));
    }
    const uint32_t mant_odd = (absx >> 13) & 1u;
    const uint32_t rounded = absx + 0xfffu + mant_odd;  // round to nearest even
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  static float to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    uint32_t x;
    if (exp == 0) {
      const float f = static_cast<float>(mant) * 5.9604644775390625e-8f;  // 2^-24
      std::memcpy(&x, &f, 4);
      x |= sign;
    } else if (exp == 31) {
      x = sign | 0x7f800000u | (mant << 13);
    } else {
      x = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
};

/// bfloat16: the top half of an f32, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(from_float(f)) {}  // NOLINT: implicit like a builtin type
  operator float() const {
    const uint32_t x = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
  static uint16_t from_float(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // quiet NaN
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
};

}  // namespace tcv
