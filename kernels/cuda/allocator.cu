// The caching device allocator and the pinned host allocator.
//
// Device memory comes from cudaMalloc in segments; a segment is split into
// blocks, and freed blocks return to a free set keyed by (stream, size, address)
// and merge with free neighbours. Requests up to 1 MiB share 2 MiB segments
// (the small pool); larger ones take their own segment (20 MiB for requests
// under 10 MiB, else the request rounded to 2 MiB) and split off any remainder
// over 1 MiB. A block is reused only by its stream, so stream order makes reuse
// safe without a host sync; a block also used on other streams (record_stream)
// waits for events recorded there at free time. When cudaMalloc fails, the
// cache is emptied and the call retried once before the error names the sizes.
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/runtime.h"

namespace tcv::kernels::cuda {

namespace {

constexpr size_t kMinBlock = 512;
constexpr size_t kSmallSize = 1 << 20;     // requests up to this use the small pool
constexpr size_t kSmallSegment = 2 << 20;  // segment size of the small pool
constexpr size_t kMidSegment = 20 << 20;   // segment for large requests under 10 MiB
constexpr size_t kMidLimit = 10 << 20;
constexpr size_t kRoundLarge = 2 << 20;

size_t round_up(size_t n, size_t m) {
  return (n + m - 1) / m * m;
}

struct Block {
  int device = 0;
  cudaStream_t stream = nullptr;
  size_t size = 0;
  char* ptr = nullptr;
  bool allocated = false;
  bool small = false;
  Block* prev = nullptr;  // neighbours within the segment
  Block* next = nullptr;
  std::vector<cudaStream_t> uses;  // other streams that used it (record_stream)
};

struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return a->ptr < b->ptr;
  }
};

struct PendingFree {
  Block* block;
  std::vector<cudaEvent_t> events;
};

struct DeviceCache {
  std::set<Block*, BlockLess> small_free;
  std::set<Block*, BlockLess> large_free;
  std::vector<PendingFree> pending;
  DeviceMemoryStats stats;
};

class DeviceAllocator {
 public:
  void* malloc(size_t nbytes, int device, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    DeviceCache& dc = cache(device);
    process_pending(dc);
    const size_t size = std::max(kMinBlock, round_up(nbytes, kMinBlock));
    const bool small = size <= kSmallSize;
    auto& pool = small ? dc.small_free : dc.large_free;

    Block key;
    key.stream = stream;
    key.size = size;
    auto it = pool.lower_bound(&key);
    Block* block = nullptr;
    if (it != pool.end() && (*it)->stream == stream) {
      block = *it;
      pool.erase(it);
    } else {
      const size_t seg =
          small ? kSmallSegment : (size < kMidLimit ? kMidSegment : round_up(size, kRoundLarge));
      void* p = raw_malloc(dc, seg, device);
      if (!p) {
        release_cached(device);
        p = raw_malloc(dc, seg, device);
      }
      if (!p) {
        TCV_THROW("[cuda] out of memory on cuda:", device, " allocating ", nbytes, " bytes (",
                  dc.stats.allocated >> 20, " MiB in use, ", dc.stats.reserved >> 20,
                  " MiB reserved by tcv)");
      }
      block = new Block;
      block->device = device;
      block->stream = stream;
      block->size = seg;
      block->ptr = static_cast<char*>(p);
      block->small = small;
    }
    // Split off the remainder when it is worth keeping.
    const size_t rest = block->size - size;
    if ((small && rest >= kMinBlock) || (!small && rest > kSmallSize)) {
      Block* tail = new Block;
      tail->device = device;
      tail->stream = stream;
      tail->size = rest;
      tail->ptr = block->ptr + size;
      tail->small = small;
      tail->prev = block;
      tail->next = block->next;
      if (block->next) block->next->prev = tail;
      block->next = tail;
      block->size = size;
      pool.insert(tail);
    }
    block->allocated = true;
    live_[block->ptr] = block;
    dc.stats.allocated += static_cast<int64_t>(block->size);
    dc.stats.peak_allocated = std::max(dc.stats.peak_allocated, dc.stats.allocated);
    return block->ptr;
  }

  void free(void* ptr) {
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(static_cast<char*>(ptr));
    TCV_CHECK(it != live_.end(), "[cuda] free of a pointer the caching allocator did not give out");
    Block* block = it->second;
    live_.erase(it);
    DeviceCache& dc = cache(block->device);
    dc.stats.allocated -= static_cast<int64_t>(block->size);
    if (!block->uses.empty()) {
      PendingFree pf{block, {}};
      DeviceGuard guard(block->device);
      for (cudaStream_t s : block->uses) {
        cudaEvent_t e;
        TCV_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        TCV_CUDA_CHECK(cudaEventRecord(e, s));
        pf.events.push_back(e);
      }
      block->uses.clear();
      dc.pending.push_back(std::move(pf));
      return;
    }
    release_block(dc, block);
  }

  void record_stream(void* ptr, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(static_cast<char*>(ptr));
    if (it == live_.end()) return;  // not ours (e.g. a view's offset pointer): nothing to track
    Block* b = it->second;
    if (stream == b->stream) return;
    for (cudaStream_t s : b->uses)
      if (s == stream) return;
    b->uses.push_back(stream);
  }

  DeviceMemoryStats stats(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    return cache(device).stats;
  }
  void reset_peak(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    DeviceCache& dc = cache(device);
    dc.stats.peak_allocated = dc.stats.allocated;
    dc.stats.peak_reserved = dc.stats.reserved;
  }
  void empty() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [device, dc] : caches_) {
      (void)dc;
      release_cached(device);
    }
  }

 private:
  DeviceCache& cache(int device) { return caches_[device]; }

  void* raw_malloc(DeviceCache& dc, size_t nbytes, int device) {
    DeviceGuard guard(device);
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, nbytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    TCV_CUDA_CHECK(err);
    dc.stats.reserved += static_cast<int64_t>(nbytes);
    dc.stats.peak_reserved = std::max(dc.stats.peak_reserved, dc.stats.reserved);
    ++dc.stats.num_mallocs;
    return p;
  }

  /// Puts a block back into its free set, merged with free neighbours.
  void release_block(DeviceCache& dc, Block* block) {
    block->allocated = false;
    auto& pool = block->small ? dc.small_free : dc.large_free;
    for (Block* nb : {block->prev, block->next}) {
      if (!nb || nb->allocated || !pool.count(nb)) continue;
      pool.erase(nb);
      if (nb == block->prev) {
        block->ptr = nb->ptr;
        block->prev = nb->prev;
        if (nb->prev) nb->prev->next = block;
      } else {
        block->next = nb->next;
        if (nb->next) nb->next->prev = block;
      }
      block->size += nb->size;
      delete nb;
    }
    pool.insert(block);
  }

  void process_pending(DeviceCache& dc) {
    for (size_t i = 0; i < dc.pending.size();) {
      PendingFree& pf = dc.pending[i];
      bool done = true;
      for (cudaEvent_t e : pf.events) {
        const cudaError_t err = cudaEventQuery(e);
        if (err == cudaErrorNotReady) {
          done = false;
          break;
        }
        TCV_CUDA_CHECK(err);
      }
      if (!done) {
        ++i;
        continue;
      }
      for (cudaEvent_t e : pf.events) cudaEventDestroy(e);
      release_block(dc, pf.block);
      dc.pending[i] = dc.pending.back();
      dc.pending.pop_back();
    }
  }

  /// cudaFree for every whole segment that is entirely free.
  void release_cached(int device) {
    DeviceCache& dc = cache(device);
    DeviceGuard guard(device);
    // Wait for blocks still in use on other streams, then free whole segments.
    for (PendingFree& pf : dc.pending)
      for (cudaEvent_t e : pf.events) cudaEventSynchronize(e);
    process_pending(dc);
    for (auto* pool : {&dc.small_free, &dc.large_free}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* b = *it;
        if (b->prev || b->next) {
          ++it;
          continue;
        }
        TCV_CUDA_CHECK(cudaFree(b->ptr));
        dc.stats.reserved -= static_cast<int64_t>(b->size);
        ++dc.stats.num_frees;
        delete b;
        it = pool->erase(it);
      }
    }
  }

  std::mutex mu_;
  std::map<int, DeviceCache> caches_;
  std::unordered_map<char*, Block*> live_;
};

DeviceAllocator& device_allocator() {
  static auto* a = new DeviceAllocator;  // never destroyed: tensors may outlive statics
  return *a;
}

// ---- pinned host memory --------------------------------------------------------

class PinnedAllocator {
 public:
  void* malloc(size_t nbytes) {
    std::lock_guard<std::mutex> lock(mu_);
    process_pending();
    const size_t size = bin(nbytes);
    auto& list = free_[size];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      return p;
    }
    void* p = nullptr;
    TCV_CUDA_CHECK(cudaHostAlloc(&p, size, cudaHostAllocDefault));
    blocks_[reinterpret_cast<uintptr_t>(p)] = Info{size, {}};
    return p;
  }

  void free(void* ptr) {
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
    TCV_CHECK(it != blocks_.end(), "[cuda] pinned free of a pointer not from pinned_malloc");
    Info& info = it->second;
    if (info.uses.empty()) {
      free_[info.size].push_back(ptr);
      return;
    }
    std::vector<cudaEvent_t> events;
    for (cudaStream_t s : info.uses) {
      cudaEvent_t e;
      TCV_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      TCV_CUDA_CHECK(cudaEventRecord(e, s));
      events.push_back(e);
    }
    info.uses.clear();
    pending_.push_back({ptr, std::move(events)});
  }

  void record_stream(void* ptr, cudaStream_t s) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = find(ptr);
    if (it == blocks_.end()) return;
    for (cudaStream_t u : it->second.uses)
      if (u == s) return;
    it->second.uses.push_back(s);
  }

  bool contains(const void* ptr) {
    std::lock_guard<std::mutex> lock(mu_);
    return find(ptr) != blocks_.end();
  }

 private:
  struct Info {
    size_t size;
    std::vector<cudaStream_t> uses;
  };
  struct Pending {
    void* ptr;
    std::vector<cudaEvent_t> events;
  };

  static size_t bin(size_t n) {
    size_t s = 4096;
    while (s < n) s <<= 1;
    return s;
  }

  std::map<uintptr_t, Info>::iterator find(const void* ptr) {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin()) return blocks_.end();
    --it;
    return p < it->first + it->second.size ? it : blocks_.end();
  }

  void process_pending() {
    for (size_t i = 0; i < pending_.size();) {
      bool done = true;
      for (cudaEvent_t e : pending_[i].events)
        if (cudaEventQuery(e) != cudaSuccess) {
          done = false;
          break;
        }
      if (!done) {
        ++i;
        continue;
      }
      for (cudaEvent_t e : pending_[i].events) cudaEventDestroy(e);
      void* p = pending_[i].ptr;
      free_[blocks_[reinterpret_cast<uintptr_t>(p)].size].push_back(p);
      pending_[i] = std::move(pending_.back());
      pending_.pop_back();
    }
  }

  std::mutex mu_;
  std::map<uintptr_t, Info> blocks_;
  std::map<size_t, std::vector<void*>> free_;
  std::vector<Pending> pending_;
};

PinnedAllocator& pinned_allocator() {
  static auto* a = new PinnedAllocator;
  return *a;
}

}  // namespace

void* cached_malloc(size_t nbytes, int device, Stream s) {
  if (nbytes == 0) return nullptr;
  cudaStream_t st = s ? static_cast<cudaStream_t>(s)
                      : static_cast<cudaStream_t>(stream(device, StreamKind::compute));
  return device_allocator().malloc(nbytes, device, st);
}

void cached_free(void* ptr) {
  device_allocator().free(ptr);
}

void record_stream(void* ptr, Stream s) {
  device_allocator().record_stream(ptr, static_cast<cudaStream_t>(s));
}

DeviceMemoryStats memory_stats(int device) {
  return device_allocator().stats(device);
}

void reset_peak_memory(int device) {
  device_allocator().reset_peak(device);
}

void empty_cache() {
  device_allocator().empty();
}

void* pinned_malloc(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  return pinned_allocator().malloc(nbytes);
}

void pinned_free(void* ptr) {
  pinned_allocator().free(ptr);
}

void pinned_record_stream(void* ptr, Stream s) {
  pinned_allocator().record_stream(ptr, static_cast<cudaStream_t>(s));
}

bool is_pinned(const void* ptr) {
  return device_count() > 0 && pinned_allocator().contains(ptr);
}

}  // namespace tcv::kernels::cuda
