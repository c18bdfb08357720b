#include "dist/shm_allreduce.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/error.h"

namespace tcv::dist::detail {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint64_t kMagic = 0x7463762d73686d31ull;  // "tcv-shm1"
constexpr milliseconds kSlice{100};                 // liveness and abort checks
constexpr std::chrono::microseconds kSpin{20};      // polling before sleeping

static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "shared-memory phase counters need lock-free 32-bit atomics");

long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

// Wrap-safe "a has reached b".
bool reached(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(a - b) >= 0;
}

// Whether process `pid` still runs (a zombie has exited).
bool alive(int32_t pid) {
  if (pid <= 0) return true;  // not published yet
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(f, stat)) return true;
  const size_t p = stat.rfind(')');
  if (p == std::string::npos || p + 2 >= stat.size()) return true;
  const char state = stat[p + 2];
  return state != 'Z' && state != 'X';
}

std::string ns_inode(const char* ns) {
  struct stat st {};
  if (::stat((std::string("/proc/self/ns/") + ns).c_str(), &st) != 0) return "?";
  return std::to_string(st.st_ino);
}

}  // namespace

struct alignas(64) PhaseSlot {
  std::atomic<uint32_t> phase;
  int32_t pid;
  ShmCall call[2];  // by call parity, written before the call's first phase
};

struct ShmAllreduce::Header {
  uint64_t magic;
  uint64_t token;
  int32_t size;
  alignas(64) std::atomic<uint32_t> aborted_by;  // 0, or the aborting rank + 1
  PhaseSlot slot[kMaxRanks];
};

size_t ShmAllreduce::region_bytes(int size) {
  const size_t window = static_cast<size_t>(size) * kSegmentBytes;
  const size_t header = (sizeof(Header) + 4095) / 4096 * 4096;
  return header + (static_cast<size_t>(size) + 1) * window +
         2 * static_cast<size_t>(size) * kOnePhaseBytes;
}

ShmAllreduce::ShmAllreduce(void* base, size_t bytes, int rank, int size)
    : base_(base), bytes_(bytes), header_(static_cast<Header*>(base)), rank_(rank), size_(size) {}

ShmAllreduce::~ShmAllreduce() {
  ::munmap(base_, bytes_);
}

std::unique_ptr<ShmAllreduce> ShmAllreduce::create(const std::string& name, int rank, int size,
                                                   uint64_t token) {
  if (size < 2 || size > kMaxRanks) return nullptr;
  const size_t bytes = region_bytes(size);
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return nullptr;
  // Reserve the pages now: a /dev/shm too small for the region fails here
  // instead of a SIGBUS at the first touch, later.
  void* base = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) == 0 &&
      ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0)
    base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    return nullptr;
  }
  auto* h = new (base) Header();
  h->magic = kMagic;
  h->token = token;
  h->size = size;
  h->aborted_by.store(0);
  for (auto& s : h->slot) {
    s.phase.store(0);
    s.pid = 0;
  }
  h->slot[rank].pid = static_cast<int32_t>(::getpid());
  return std::unique_ptr<ShmAllreduce>(new ShmAllreduce(base, bytes, rank, size));
}

std::unique_ptr<ShmAllreduce> ShmAllreduce::attach(const std::string& name, int rank, int size,
                                                   uint64_t token) {
  if (size < 2 || size > kMaxRanks || rank <= 0 || rank >= size) return nullptr;
  const size_t bytes = region_bytes(size);
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return nullptr;
  struct stat st {};
  void* base = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes)
    base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return nullptr;
  auto* h = static_cast<Header*>(base);
  if (h->magic != kMagic || h->token != token || h->size != size) {
    ::munmap(base, bytes);
    return nullptr;
  }
  h->slot[rank].pid = static_cast<int32_t>(::getpid());
  return std::unique_ptr<ShmAllreduce>(new ShmAllreduce(base, bytes, rank, size));
}

void ShmAllreduce::unlink(const std::string& name) {
  ::shm_unlink(name.c_str());
}

std::string ShmAllreduce::host_key() {
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return boot + "/net:" + ns_inode("net") + "/ipc:" + ns_inode("ipc") + "/pid:" + ns_inode("pid");
}

unsigned char* ShmAllreduce::input_area(int r) const {
  const size_t header = (sizeof(Header) + 4095) / 4096 * 4096;
  const size_t window = static_cast<size_t>(size_) * kSegmentBytes;
  return static_cast<unsigned char*>(base_) + header + static_cast<size_t>(r) * window;
}

unsigned char* ShmAllreduce::result_area() const {
  return input_area(size_);
}

unsigned char* ShmAllreduce::small_area(int r, int parity) const {
  return input_area(size_ + 1) +
         (2 * static_cast<size_t>(r) + static_cast<size_t>(parity)) * kOnePhaseBytes;
}

void ShmAllreduce::publish(uint32_t phase) {
  header_->slot[rank_].phase.store(phase, std::memory_order_release);
  futex(&header_->slot[rank_].phase, FUTEX_WAKE, INT_MAX, nullptr);
}

void ShmAllreduce::abort() {
  uint32_t none = 0;
  header_->aborted_by.compare_exchange_strong(none, static_cast<uint32_t>(rank_ + 1));
  for (int r = 0; r < size_; ++r) futex(&header_->slot[r].phase, FUTEX_WAKE, INT_MAX, nullptr);
}

void ShmAllreduce::wait_for_peers(uint32_t phase, Clock::time_point deadline, milliseconds timeout,
                                  const std::function<std::string()>& aborted) {
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    std::atomic<uint32_t>& p = header_->slot[q].phase;
    // A peer running on another core arrives within microseconds: poll a
    // little before sleeping, as NCCL's and MPI's shared-memory paths do.
    const auto spin_until = Clock::now() + kSpin;
    while (!reached(p.load(std::memory_order_acquire), phase) && Clock::now() < spin_until) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
    auto next_check = Clock::now() + kSlice;
    for (;;) {
      const uint32_t seen = p.load(std::memory_order_acquire);
      if (reached(seen, phase)) break;
      if (const uint32_t by = header_->aborted_by.load(); by != 0)
        TCV_THROW("[gloo] shared-memory all-reduce: rank ", by - 1,
                  " abandoned the group's collectives (see its error)");
      const auto now = Clock::now();
      if (now >= next_check) {
        next_check = now + kSlice;
        if (const std::string why = aborted(); !why.empty()) TCV_THROW(why);
        if (!alive(header_->slot[q].pid))
          TCV_THROW("[gloo] shared-memory all-reduce on rank ", rank_, ": rank ", q, " (pid ",
                    header_->slot[q].pid, ") exited while this rank waited for it");
      }
      if (now >= deadline)
        TCV_THROW("[gloo] shared-memory all-reduce on rank ", rank_, ": timed out after ",
                  timeout.count(), " ms waiting for rank ", q);
      const auto left = std::min<Clock::duration>(deadline - now, kSlice);
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      const timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
      futex(&p, FUTEX_WAIT, seen, &ts);
    }
  }
}

void ShmAllreduce::all_reduce(const ShmCall& call, void* data, size_t count, size_t elem_size,
                              const ShmReduceFn& fn, milliseconds timeout,
                              const std::function<std::string()>& aborted) {
  TCV_CHECK(elem_size > 0 && elem_size <= kSegmentBytes,
            "[gloo] shared-memory all-reduce: ", "bad element size ", elem_size);
  const auto deadline = Clock::now() + timeout;
  auto* bytes = static_cast<unsigned char*>(data);
  const size_t seg_elems = kSegmentBytes / elem_size;
  const size_t window_elems = seg_elems * static_cast<size_t>(size_);
  unsigned char* mine = input_area(rank_);
  unsigned char* result = result_area();
  // Every rank's call is compared at the first phase, before anything is
  // reduced. Calls alternate between two call slots and two small areas:
  // a rank rewrites one only in the call after next, whose first wait needs
  // every peer past the next call's first phase, so done reading this one.
  const int parity = static_cast<int>(calls_++ & 1u);
  header_->slot[rank_].call[parity] = call;
  auto check_calls = [&] {
    std::vector<ShmCall> calls;
    for (int r = 0; r < size_; ++r) calls.push_back(header_->slot[r].call[parity]);
    if (std::any_of(calls.begin(), calls.end(), [&](const ShmCall& c) { return c != call; }))
      throw ShmCallMismatch{calls};
  };
  if (count * elem_size <= kOnePhaseBytes) {
    std::memcpy(small_area(rank_, parity), bytes, count * elem_size);
    publish(++phase_);
    wait_for_peers(phase_, deadline, timeout, aborted);
    check_calls();
    if (count > 0) {
      auto term = [&](int q) -> const unsigned char* { return small_area(q, parity); };
      fn(bytes, term(0), term(1), count);
      for (int q = 2; q < size_; ++q) fn(bytes, bytes, term(q), count);
    }
    return;
  }
  size_t base = 0;
  do {
    const size_t w = std::min(window_elems, count - base);
    const size_t per = (w + static_cast<size_t>(size_) - 1) / static_cast<size_t>(size_);
    auto seg_begin = [&](int s) { return std::min(w, static_cast<size_t>(s) * per); };
    auto seg_len = [&](int s) {
      return std::min(w, static_cast<size_t>(s + 1) * per) - seg_begin(s);
    };
    // 1. The segments the others reduce, into this rank's input area.
    for (int s = 0; s < size_; ++s) {
      if (s == rank_ || seg_len(s) == 0) continue;
      std::memcpy(mine + seg_begin(s) * elem_size, bytes + (base + seg_begin(s)) * elem_size,
                  seg_len(s) * elem_size);
    }
    publish(++phase_);
    wait_for_peers(phase_, deadline, timeout, aborted);
    if (base == 0) check_calls();
    // 2. This rank's segment over every rank's contribution, in rank order.
    if (const size_t n = seg_len(rank_); n > 0) {
      const size_t off = seg_begin(rank_) * elem_size;
      unsigned char* own = bytes + base * elem_size + off;
      auto term = [&](int q) -> const unsigned char* {
        return q == rank_ ? own : input_area(q) + off;
      };
      fn(result + off, term(0), term(1), n);
      for (int q = 2; q < size_; ++q) fn(result + off, result + off, term(q), n);
      std::memcpy(own, result + off, n * elem_size);
    }
    publish(++phase_);
    wait_for_peers(phase_, deadline, timeout, aborted);
    // 3. The others' results.
    for (int s = 0; s < size_; ++s) {
      if (s == rank_ || seg_len(s) == 0) continue;
      std::memcpy(bytes + (base + seg_begin(s)) * elem_size, result + seg_begin(s) * elem_size,
                  seg_len(s) * elem_size);
    }
    base += w;
  } while (base < count);
}

}  // namespace tcv::dist::detail
