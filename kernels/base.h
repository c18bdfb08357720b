// What the kernels of both backends share beyond tcv's vocabulary (element
// types and the error type: tcv/core/): the plain strided descriptor kernels
// receive, and the dtype dispatch macros.
#pragma once

#include <cstdint>

#include "tcv/core/dtype.h"
#include "tcv/core/error.h"

namespace tcv::kernels {

using ::tcv::kMaxDims;

/// A strided view as kernels see it: no ownership, no autograd.
struct KTensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};  // in elements
  /// The data is in the CPU's blocked layout (kernels/cpu/blocked.h: for 4-D
  /// f32 oneDNN's nChw16c or nChw8c, C in whole blocks; for bf16 NHWC): sizes are the logical (N,
  /// C, H, W), strides do not describe it. Only Tensor::desc_as_stored() sets this, for the kernels
  /// that read that layout.
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
