// Internal to dist/: the NCCL communicator on raw device pointers, so that
// nccl_group.cu (compiled by nvcc as C++17) needs none of the engine's C++20
// headers. process_group.cpp wraps it as a ProcessGroup over Tensors.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/dtype.h"
#include "engine/error.h"

namespace tcv::dist::detail {

enum class NcclOp : uint8_t { sum, avg, max, min };

/// One NCCL collective queued on the comm stream.
class NcclPending {
 public:
  virtual ~NcclPending() = default;
  /// Orders the calling thread's current compute stream after the collective
  /// (barrier: blocks the host until it has run). Throws when it failed, timed
  /// out or the communicator was aborted.
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
};

/// An ncclComm_t with its device, comm stream and a watchdog thread that aborts
/// the communicator when a collective outlives the timeout or NCCL reports an
/// asynchronous error.
class NcclComm {
 public:
  /// A fresh ncclUniqueId as bytes (rank 0 publishes it in the store).
  static std::vector<uint8_t> new_unique_id();
  NcclComm(const std::vector<uint8_t>& unique_id, int rank, int size, int device,
           std::chrono::milliseconds timeout);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int device() const;

  // `*_base` is the start of the tensor's allocation (for record_stream), or
  // nullptr when it is not from the caching allocator.
  std::shared_ptr<NcclPending> all_reduce(void* data, size_t count, DType dtype, NcclOp op,
                                          void* base, const std::string& what);
  std::shared_ptr<NcclPending> broadcast(void* data, size_t nbytes, int root, void* base,
                                         const std::string& what);
  std::shared_ptr<NcclPending> all_gather(void* out, const void* in, size_t in_bytes,
                                          void* out_base, void* in_base, const std::string& what);
  std::shared_ptr<NcclPending> reduce_scatter(void* out, const void* in, size_t out_count,
                                              DType dtype, NcclOp op, void* out_base, void* in_base,
                                              const std::string& what);
  std::shared_ptr<NcclPending> barrier();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace tcv::dist::detail
