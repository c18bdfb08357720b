// Collectives over a group of processes, behind one interface with two
// backends: Gloo (TCP, CPU tensors) and NCCL (CUDA tensors, its own comm
// stream ordered with events against the compute stream).
//
// Every collective is asynchronous: it returns a Work handle at once and the
// bytes move on the backend's thread (Gloo) or stream (NCCL). Collectives must
// be issued in the same order on every rank. Each one carries the group's
// timeout, so a dead or stuck peer turns into an error on every other rank
// (naming the peer where the backend can tell), never a silent hang: a rank
// blocked in a collective says every wait_log_interval which collective it is
// in and what its peers are doing. The first check_collectives collectives
// compare a fingerprint (sequence number, op, dtype, element count, root)
// across ranks before any data moves, and ranks that issued different
// collectives fail with a message naming them and their calls.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dist/store.h"
#include "engine/tensor.h"

namespace tcv::dist {

enum class ReduceOp : uint8_t { sum, avg, max, min };

const char* reduce_op_name(ReduceOp op);

/// The handle of one collective in flight.
class Work {
 public:
  virtual ~Work() = default;
  /// Blocks until the collective has finished (Gloo), or until the caller's
  /// current compute stream is ordered after it (NCCL). Throws tcv::Error when
  /// the collective failed or timed out; every later call throws the same.
  virtual void wait() = 0;
  /// True once wait() would return without blocking.
  virtual bool is_completed() = 0;
  /// When the backend began running the collective (after the ones queued
  /// before it), and when it finished; a default time point where the backend
  /// cannot tell (NCCL: the device decides), or before it happened. For
  /// timelines: completion seen from the caller can be much later.
  virtual std::chrono::steady_clock::time_point started_at() { return {}; }
  virtual std::chrono::steady_clock::time_point finished_at() { return {}; }
};

using WorkPtr = std::shared_ptr<Work>;

struct ProcessGroupOptions {
  /// Limit for every collective and for connecting to the peers.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  /// How often a rank blocked in a collective (or waiting for its peers to
  /// join) logs what it waits for; 0 = never.
  std::chrono::milliseconds wait_log_interval{std::chrono::seconds(30)};
  /// How many of the first collectives compare fingerprints across ranks before
  /// moving data; -1 = every one. TCV_DISTRIBUTED_DEBUG=DETAIL makes it -1,
  /// TCV_DISTRIBUTED_DEBUG=OFF makes it 0.
  int64_t check_collectives = 64;
  /// Gloo: the address or host name to bind. "" = chosen as dist/net.h says:
  /// TCV_GLOO_HOSTNAME, GLOO_SOCKET_IFNAME or NCCL_SOCKET_IFNAME when set; else
  /// 127.0.0.1 when every rank is on this machine; else the host's name when it
  /// resolves to one of this machine's non-loopback addresses; else the
  /// address of the interface that routes to the store's host (MASTER_ADDR).
  std::string gloo_hostname{};
};

/// What a group's collectives have carried since it was made (or since
/// reset_stats()), counted when each collective is issued.
struct CommStats {
  /// Collectives issued (barriers included).
  int64_t collectives = 0;
  /// Payload bytes: the bytes of the tensor each collective was handed (an
  /// all_gather's or reduce_scatter's input). What this rank contributes;
  /// a ring all-reduce of n bytes sends 2(W-1)/W n from each of W ranks.
  int64_t bytes = 0;
};

/// A group of `size()` processes; this one is `rank()`.
/// Tensors passed to collectives must be contiguous and must stay alive (and
/// unmodified) until wait() returns.
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string backend_name() const = 0;

  /// In place: every rank ends with the reduction of all ranks' tensors.
  /// avg divides by size() inside the reduction.
  virtual WorkPtr all_reduce(const Tensor& t, ReduceOp op = ReduceOp::sum) = 0;
  /// In place: every rank ends with root's tensor.
  virtual WorkPtr broadcast(const Tensor& t, int root = 0) = 0;
  /// out has size()·numel(in) elements: rank r's `in` lands at [r·n, (r+1)·n).
  virtual WorkPtr all_gather(const Tensor& out, const Tensor& in) = 0;
  /// in has size()·numel(out) elements; rank r receives the reduction of
  /// everyone's slice [r·n, (r+1)·n) into out.
  virtual WorkPtr reduce_scatter(const Tensor& out, const Tensor& in,
                                 ReduceOp op = ReduceOp::sum) = 0;
  virtual WorkPtr barrier() = 0;

  /// Collectives and payload bytes issued on this group so far (any thread).
  CommStats stats() const { return {collectives_.load(), bytes_.load()}; }
  void reset_stats() {
    collectives_ = 0;
    bytes_ = 0;
  }

 protected:
  ProcessGroup(int rank, int size) : rank_(rank), size_(size) {}
  /// Backends call this once per collective they accept, with its payload bytes.
  void count_collective(int64_t bytes) {
    collectives_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }

 private:
  int rank_;
  int size_;
  std::atomic<int64_t> collectives_{0};
  std::atomic<int64_t> bytes_{0};
};

/// Gloo over TCP; rendezvous through `store` (keys prefixed with `prefix` and
/// a per-prefix group counter, so every rank must make its groups in the same
/// order). CPU tensors of f32, f64, f16, bf16, i32, i64 (f16/bf16 are summed
/// in float per step; avg of integers truncates). Collectives run in issue
/// order on one worker thread per group. Each rank ticks a heartbeat key in the
/// store that also says which collective it is in, so a failed collective
/// names the ranks that stopped ticking, and two ranks blocked in different
/// collectives at the same position are stopped with an error at once.
/// The machine's first local rank (LOCAL_RANK 0) prints the address it binds
/// and why, once. Two ranks on one machine (same network, IPC and PID
/// namespaces) all-reduce through shared memory instead of TCP
/// (dist/shm_allreduce.h), with the same results bit for bit. Environment:
/// TCV_GLOO_HOSTNAME, GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME (see
/// gloo_hostname); for benchmarks TCV_GLOO_ALGO=ring|bcube,
/// TCV_GLOO_SEGMENT=bytes, TCV_GLOO_SMALL_BYTES=bytes and TCV_GLOO_SHM=0 (TCP
/// only).
std::shared_ptr<ProcessGroup> make_gloo_group(std::shared_ptr<TcpStore> store, int rank, int size,
                                              ProcessGroupOptions options = {},
                                              const std::string& prefix = "gloo");
/// NCCL on the current CUDA device; rank 0 publishes the ncclUniqueId in `store`
/// (the first check_collectives fingerprints are compared through the store too).
/// Collectives run on the device's comm stream after the compute stream's
/// queued work; Work::wait() orders the caller's compute stream after them
/// (barrier: blocks the host). A watchdog aborts the communicator when one
/// outlives options.timeout or NCCL reports an error, and later calls throw.
/// Throws a clear error in builds without CUDA/NCCL.
std::shared_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<TcpStore> store, int rank, int size,
                                              ProcessGroupOptions options = {},
                                              const std::string& prefix = "nccl");

}  // namespace tcv::dist
