// The vocabulary every layer of tcv shares: element types, the error type and
// its check macro, and the plain strided descriptor kernels receive.
//
// kernels/ sits at the bottom of the dependency graph, so these live here and
// engine/ re-exports them.
#pragma once

#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tcv {

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

/// Everything tcv throws. Messages name the op, the shapes and the file or key.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
[[noreturn]] inline void throw_error(const char* file, int line, const std::string& msg) {
  (void)file;
  (void)line;
  throw Error(msg);
}
}  // namespace detail

}  // namespace tcv

/// Throws tcv::Error with the streamed message when cond is false:
/// TCV_CHECK(x.dim() == 4, "[conv2d] expects 4-D input, got ", x.shape_str());
#define TCV_CHECK(cond, ...)                                                               \
  do {                                                                                     \
    if (!(cond)) [[unlikely]]                                                              \
      ::tcv::detail::throw_error(__FILE__, __LINE__, ::tcv::detail::str_cat(__VA_ARGS__)); \
  } while (0)

#define TCV_THROW(...) \
  ::tcv::detail::throw_error(__FILE__, __LINE__, ::tcv::detail::str_cat(__VA_ARGS__))

namespace tcv::kernels {

constexpr int kMaxDims = 8;

/// A strided view as kernels see it: no ownership, no autograd.
struct KTensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};  // in elements
  /// The data is in oneDNN's nChw16c layout (4-D f32, C a multiple of 16):
  /// sizes are the logical (N, C, H, W), strides do not describe it. Only
  /// Tensor::desc_as_stored() sets this, for the kernels that read that layout.
  bool blocked = false;

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= sizes[i];
    return n;
  }
  bool is_contiguous() const {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      if (sizes[i] != 1 && strides[i] != s) return false;
      s *= sizes[i];
    }
    return true;
  }
  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }
};

/// Calls f(uintN_t{}) for dt's element width: data movement needs only the bits.
template <typename F>
void dispatch_bits(DType dt, F&& f) {
  switch (dtype_size(dt)) {
    case 1:
      f(uint8_t{});
      break;
    case 2:
      f(uint16_t{});
      break;
    case 4:
      f(uint32_t{});
      break;
    case 8:
      f(uint64_t{});
      break;
    default:
      TCV_THROW("[index] unsupported element size for dtype ", dtype_name(dt));
  }
}

}  // namespace tcv::kernels

// Runs the body with scalar_t bound to the C++ type of dt.
#define TCV_DTYPE_CASE(enum_v, type, ...) \
  case ::tcv::DType::enum_v: {            \
    using scalar_t = type;                \
    __VA_ARGS__;                          \
    break;                                \
  }

#define TCV_DISPATCH_FLOAT(dt, op, ...)                                          \
  switch (dt) {                                                                  \
    TCV_DTYPE_CASE(f32, float, __VA_ARGS__)                                      \
    TCV_DTYPE_CASE(f64, double, __VA_ARGS__)                                     \
    default:                                                                     \
      TCV_THROW("[", op, "] not implemented for dtype ", ::tcv::dtype_name(dt)); \
  }

#define TCV_DISPATCH_ALL(dt, op, ...)                  \
  switch (dt) {                                        \
    TCV_DTYPE_CASE(f32, float, __VA_ARGS__)            \
    TCV_DTYPE_CASE(f64, double, __VA_ARGS__)           \
    TCV_DTYPE_CASE(f16, ::tcv::Half, __VA_ARGS__)      \
    TCV_DTYPE_CASE(bf16, ::tcv::BFloat16, __VA_ARGS__) \
    TCV_DTYPE_CASE(i32, int32_t, __VA_ARGS__)          \
    TCV_DTYPE_CASE(i64, int64_t, __VA_ARGS__)          \
    TCV_DTYPE_CASE(u8, uint8_t, __VA_ARGS__)           \
    TCV_DTYPE_CASE(b8, bool, __VA_ARGS__)              \
  }

#define TCV_DISPATCH_INDEX(dt, op, ...)                                                     \
  switch (dt) {                                                                             \
    TCV_DTYPE_CASE(i32, int32_t, __VA_ARGS__)                                               \
    TCV_DTYPE_CASE(i64, int64_t, __VA_ARGS__)                                               \
    default:                                                                                \
      TCV_THROW("[", op, "] index tensor must be i32 or i64, got ", ::tcv::dtype_name(dt)); \
  }
