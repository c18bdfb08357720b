// Host memory: a caching allocator, so training steps reuse the same buffers
// instead of paying malloc/free (and the kernel's page faults) per tensor.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tcv {

/// Counters of one allocator, in bytes.
struct MemoryStats {
  int64_t allocated = 0;       ///< bytes held by live tensors
  int64_t reserved = 0;        ///< bytes obtained from the system (live + cached)
  int64_t peak_allocated = 0;  ///< high-water mark of `allocated`
  int64_t system_allocs = 0;   ///< number of calls that went to the system
};

/// Size-binned free lists of 64-byte-aligned blocks. Thread-safe.
class CpuAllocator {
 public:
  static CpuAllocator& instance();

  void* allocate(size_t nbytes);
  void deallocate(void* ptr, size_t nbytes);
  /// Returns every cached block to the system.
  void empty_cache();
  MemoryStats stats() const;
  void reset_peak();

  /// The size a request is rounded up to (its bin).
  static size_t round_size(size_t nbytes);

 private:
  CpuAllocator() = default;
  struct Impl;
  Impl& impl() const;
};

}  // namespace tcv
