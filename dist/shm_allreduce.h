// Internal to dist/: the all-reduce of the Gloo group between ranks that share
// one machine, through a shared-memory region instead of TCP over loopback
// (as NCCL's SHM transport and MPI's shared-memory paths do): no kernel
// copies, no socket round trips, about a third of the memory traffic.
//
// Each all-reduce runs in rounds over windows of size() segments of up to
// kSegmentBytes: every rank copies the segments it does not own into its
// input area, then reduces its own segment over every rank's copy (in rank
// order, 0 first) into the result area, then copies the other segments'
// results out: two phases per round. One of at most kOnePhaseBytes takes one
// phase: every rank copies all of it into one of two areas (alternate calls
// alternate areas) and sums every rank's copy itself, in the same rank order,
// so every rank gets the same bits. A phase counter per rank on its own cache
// line orders the steps; a rank waits for its peers with a futex, checking
// every 100 ms that they are alive and that nobody aborted, and gives up at
// the collective's timeout.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tcv::dist::detail {

/// out[i] = a[i] (op) b[i] for n elements; out may be a.
using ShmReduceFn = std::function<void(void* out, const void* a, const void* b, size_t n)>;

/// What identifies one call (the caller's fingerprint words): ranks compare
/// them before any data moves.
using ShmCall = std::array<int64_t, 4>;

/// Thrown when the ranks' calls differ; holds every rank's.
struct ShmCallMismatch {
  std::vector<ShmCall> calls;
};

class ShmAllreduce {
 public:
  /// Per rank and round: the largest segment a rank reduces.
  static constexpr size_t kSegmentBytes = size_t{2} << 20;
  /// All-reduces up to this size take one phase instead of two.
  static constexpr size_t kOnePhaseBytes = size_t{1} << 20;
  static constexpr int kMaxRanks = 64;

  /// Rank 0: creates and maps a region named `name` (a POSIX shared-memory
  /// name, "/..."), stamped with `token`. nullptr when it cannot.
  static std::unique_ptr<ShmAllreduce> create(const std::string& name, int rank, int size,
                                              uint64_t token);
  /// The other ranks: maps the region rank 0 created; nullptr when it cannot
  /// or when its stamp differs (another machine's, or another group's).
  static std::unique_ptr<ShmAllreduce> attach(const std::string& name, int rank, int size,
                                              uint64_t token);
  /// Removes the name (the mappings stay valid).
  static void unlink(const std::string& name);
  /// What identifies this machine and the namespaces that matter (boot id,
  /// network, IPC and PID namespaces): ranks whose keys differ never share.
  static std::string host_key();

  ~ShmAllreduce();
  ShmAllreduce(const ShmAllreduce&) = delete;
  ShmAllreduce& operator=(const ShmAllreduce&) = delete;

  /// All-reduces `count` elements of `elem_size` bytes at `data` in place.
  /// Every rank of the group must call it with the same `call` (which must
  /// fix count and size); ShmCallMismatch when they differ. Throws
  /// tcv::Error when a peer exits or does not arrive within `timeout`, when a
  /// rank aborted, or when `aborted()` returns a non-empty reason.
  void all_reduce(const ShmCall& call, void* data, size_t count, size_t elem_size,
                  const ShmReduceFn& fn, std::chrono::milliseconds timeout,
                  const std::function<std::string()>& aborted);

  /// Makes the peers' waits (now and later) fail at once, naming this rank.
  void abort();

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  struct Header;
  ShmAllreduce(void* base, size_t bytes, int rank, int size);
  static size_t region_bytes(int size);
  unsigned char* input_area(int r) const;
  unsigned char* result_area() const;
  unsigned char* small_area(int r, int parity) const;
  void publish(uint32_t phase);
  void wait_for_peers(uint32_t phase, std::chrono::steady_clock::time_point deadline,
                      std::chrono::milliseconds timeout,
                      const std::function<std::string()>& aborted);

  void* base_;
  size_t bytes_;
  Header* header_;
  int rank_;
  int size_;
  uint32_t phase_ = 0;
  uint64_t calls_ = 0;
};

}  // namespace tcv::dist::detail
