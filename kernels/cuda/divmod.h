// Division by a divisor fixed at launch without a hardware divide.
//
// GPUs have no integer divide instruction: n / d on int64 is a subroutine of
// several dozen instructions, and the index math of a memory-bound kernel
// (plane = i / l, channel = plane % c) can cost more than its loads. FastDivmod
// precomputes, on the host, a magic multiplier m and shift s for d (Granlund
// and Montgomery, "Division by invariant integers using multiplication"), so
// that for 0 <= n < 2^31
//
//   n / d = (umulhi(n, m) + n) >> s,   with s = ceil(log2 d),
//                                       m = floor(2^32 (2^s - d) / d) + 1,
//
// one multiply-high, one add and one shift. Plain C++ (the host computes the
// same results, which the CPU tests check), usable from kernels.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TCV_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TCV_HOST_DEVICE inline
#endif

namespace tcv::kernels::cuda {

/// Quotient and remainder of n by a fixed d, for 0 <= n < 2^31 and 1 <= d < 2^31.
class FastDivmod {
 public:
  FastDivmod() = default;
  explicit FastDivmod(uint32_t d) : d_(d) {
    while ((uint64_t(1) << s_) < d) ++s_;
    m_ = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << s_) - d)) / d + 1);
  }

  TCV_HOST_DEVICE uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t t = __umulhi(n, m_);
#else
    const uint32_t t = static_cast<uint32_t>((uint64_t(n) * m_) >> 32);
#endif
    return (t + n) >> s_;
  }
  TCV_HOST_DEVICE void divmod(uint32_t n, uint32_t& q, uint32_t& r) const {
    q = div(n);
    r = n - q * d_;
  }
  TCV_HOST_DEVICE uint32_t divisor() const {
    return d_;
  }

  /// Largest dividend (exclusive) the magic numbers are exact for.
  static constexpr int64_t kLimit = int64_t(1) << 31;

 private:
  uint32_t d_ = 1, m_ = 1, s_ = 0;
};

/// The same interface over int64 with the hardware (emulated) division: kernels
/// templated on the divider take FastDivmod when every index fits below
/// FastDivmod::kLimit and this otherwise.
class WideDivmod {
 public:
  WideDivmod() = default;
  explicit WideDivmod(int64_t d) : d_(d) {}
  TCV_HOST_DEVICE int64_t div(int64_t n) const { return n / d_; }
  TCV_HOST_DEVICE void divmod(int64_t n, int64_t& q, int64_t& r) const {
    q = n / d_;
    r = n - q * d_;
  }
  TCV_HOST_DEVICE int64_t divisor() const { return d_; }

 private:
  int64_t d_ = 1;
};

}  // namespace tcv::kernels::cuda
