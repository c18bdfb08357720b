#include "engine/allocator.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "kernels/base.h"

namespace tcv {

struct CpuAllocator::Impl {
  mutable std::mutex mu;
  std::map<size_t, std::vector<void*>> free_blocks;  // bin size -> blocks
  MemoryStats stats;
};

CpuAllocator& CpuAllocator::instance() {
  static CpuAllocator a;
  return a;
}

CpuAllocator::Impl& CpuAllocator::impl() const {
  static Impl* i = new Impl();  // never destroyed: tensors may die during static teardown
  return *i;
}

size_t CpuAllocator::round_size(size_t n) {
  if (n <= 512) return 512;
  // Four bins per power of two above 4 KiB keeps waste under 25%.
  if (n <= 4096) return (n + 511) & ~size_t{511};
  size_t p = 4096;
  while (p * 2 < n) p *= 2;
  const size_t q = p / 4;
  return (n + q - 1) / q * q;
}

void* CpuAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const size_t size = round_size(nbytes);
  Impl& m = impl();
  {
    std::lock_guard<std::mutex> lock(m.mu);
    auto it = m.free_blocks.find(size);
    if (it != m.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      m.stats.allocated += static_cast<int64_t>(size);
      if (m.stats.allocated > m.stats.peak_allocated) m.stats.peak_allocated = m.stats.allocated;
      return p;
    }
  }
  void* p = std::aligned_alloc(64, size);
  if (p == nullptr) {
    empty_cache();
    p = std::aligned_alloc(64, size);
  }
  TCV_CHECK(p != nullptr, "[CpuAllocator] out of memory allocating ", nbytes, " bytes");
  std::lock_guard<std::mutex> lock(m.mu);
  m.stats.allocated += static_cast<int64_t>(size);
  m.stats.reserved += static_cast<int64_t>(size);
  m.stats.system_allocs += 1;
  if (m.stats.allocated > m.stats.peak_allocated) m.stats.peak_allocated = m.stats.allocated;
  return p;
}

void CpuAllocator::deallocate(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  const size_t size = round_size(nbytes);
  Impl& m = impl();
  std::lock_guard<std::mutex> lock(m.mu);
  m.free_blocks[size].push_back(ptr);
  m.stats.allocated -= static_cast<int64_t>(size);
}

void CpuAllocator::empty_cache() {
  Impl& m = impl();
  std::lock_guard<std::mutex> lock(m.mu);
  for (auto& [size, blocks] : m.free_blocks) {
    for (void* p : blocks) std::free(p);
    m.stats.reserved -= static_cast<int64_t>(size * blocks.size());
  }
  m.free_blocks.clear();
}

MemoryStats CpuAllocator::stats() const {
  std::lock_guard<std::mutex> lock(impl().mu);
  return impl().stats;
}

void CpuAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(impl().mu);
  impl().stats.peak_allocated = impl().stats.allocated;
}

}  // namespace tcv
