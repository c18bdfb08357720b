// The NCCL backend: collectives on the device's comm stream, ordered after the
// compute stream with an event and back before it with another, so backward
// keeps computing while buckets are reduced. A watchdog thread per
// communicator aborts it when a collective outlives the timeout or NCCL
// reports an asynchronous error (a lost peer), so no rank hangs.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>

#include "dist/nccl_group.h"
#include "engine/cuda.h"

#define TCV_NCCL_CHECK(call)                                                                   \
  do {                                                                                         \
    const ncclResult_t _r = (call);                                                            \
    if (_r != ncclSuccess && _r != ncclInProgress)                                             \
      TCV_THROW("[nccl] ", #call, " failed: ", ncclGetErrorString(_r), " (",                   \
                ncclGetLastError(nullptr) ? ncclGetLastError(nullptr) : "", ") at ", __FILE__, \
                ":", __LINE__);                                                                \
  } while (0)

namespace tcv::dist::detail {

namespace cu = tcv::cuda;
using Clock = std::chrono::steady_clock;

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::f16:
      return ncclFloat16;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
    case DType::u8:
      return ncclUint8;
    default:
      TCV_THROW("[nccl] no NCCL type for ", dtype_name(t),
                " (f32, f64, f16, bf16, i32, i64, u8 are supported)");
  }
}

ncclRedOp_t nccl_op(NcclOp op) {
  switch (op) {
    case NcclOp::sum:
      return ncclSum;
    case NcclOp::avg:
      return ncclAvg;
    case NcclOp::max:
      return ncclMax;
    case NcclOp::min:
      return ncclMin;
  }
  return ncclSum;
}

}  // namespace

struct NcclComm::Impl {
  ncclComm_t comm = nullptr;
  int rank = 0;
  int size = 1;
  int device = 0;
  std::chrono::milliseconds timeout{0};
  void* barrier_buf = nullptr;

  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::string broken;  // set once the communicator was aborted
  struct Watched {
    std::shared_ptr<cu::Event> done;
    Clock::time_point deadline;
    std::string what;
  };
  std::list<Watched> watched;
  std::thread watchdog;

  std::string error() {
    std::lock_guard<std::mutex> lock(mu);
    return broken;
  }

  void abort_with(const std::string& msg) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!broken.empty()) return;
      broken = msg;
      watched.clear();
    }
    ncclCommAbort(comm);
    comm = nullptr;
  }

  void watch() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stop) {
      cv.wait_for(lock, std::chrono::milliseconds(watched.empty() ? 100 : 1));
      if (stop || !broken.empty()) continue;
      // Drop finished collectives; find an overdue one.
      std::string overdue;
      for (auto it = watched.begin(); it != watched.end();) {
        if (it->done->query()) {
          it = watched.erase(it);
        } else if (Clock::now() > it->deadline) {
          overdue = it->what;
          break;
        } else {
          ++it;
        }
      }
      ncclResult_t async = ncclSuccess;
      if (comm) ncclCommGetAsyncError(comm, &async);
      if (!overdue.empty() || (async != ncclSuccess && async != ncclInProgress)) {
        std::string msg = "[nccl] rank " + std::to_string(rank) + " of " + std::to_string(size);
        if (!overdue.empty())
          msg += ": " + overdue + " timed out after " + std::to_string(timeout.count()) +
                 " ms (a peer is gone or stuck); communicator aborted";
        else
          msg += ": asynchronous NCCL error: " + std::string(ncclGetErrorString(async)) +
                 "; communicator aborted";
        lock.unlock();
        abort_with(msg);
        lock.lock();
      }
    }
  }

  void check_usable(const std::string& what) {
    const std::string e = error();
    TCV_CHECK(e.empty(), "[nccl] ", what, ": the communicator failed earlier: ", e);
  }
};

namespace {

class Pending : public NcclPending {
 public:
  Pending(std::shared_ptr<NcclComm::Impl> impl, std::shared_ptr<cu::Event> done, std::string what,
          bool host_block)
      : impl_(std::move(impl)),
        done_(std::move(done)),
        what_(std::move(what)),
        host_block_(host_block) {}

  void wait() override {
    if (host_block_) {
      while (!done_->query()) {
        const std::string e = impl_->error();
        TCV_CHECK(e.empty(), e);
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    const std::string e = impl_->error();
    TCV_CHECK(e.empty(), e);
    done_->block(cu::compute_stream());
  }
  bool is_completed() override { return !impl_->error().empty() || done_->query(); }

 private:
  std::shared_ptr<NcclComm::Impl> impl_;
  std::shared_ptr<cu::Event> done_;
  std::string what_;
  bool host_block_;
};

// Orders the comm stream after the compute stream, runs `launch` on it, and
// records the event the Work waits for.
template <typename F>
std::shared_ptr<NcclPending> enqueue(const std::shared_ptr<NcclComm::Impl>& impl,
                                     const std::string& what, std::vector<void*> bases,
                                     bool host_block, F launch) {
  impl->check_usable(what);
  cu::DeviceGuard guard(impl->device);
  cu::Stream compute = cu::stream(impl->device, cu::StreamKind::compute);
  cu::Stream comm = cu::stream(impl->device, cu::StreamKind::comm);
  cu::stream_wait_stream(comm, compute);
  for (void* b : bases)
    if (b) cu::record_stream(b, comm);
  TCV_NCCL_CHECK(launch(impl->comm, static_cast<cudaStream_t>(comm)));
  auto done = std::make_shared<cu::Event>();
  done->record(comm);
  {
    std::lock_guard<std::mutex> lock(impl->mu);
    impl->watched.push_back({done, Clock::now() + impl->timeout, what});
  }
  impl->cv.notify_all();
  return std::make_shared<Pending>(impl, std::move(done), what, host_block);
}

}  // namespace

std::vector<uint8_t> NcclComm::new_unique_id() {
  ncclUniqueId id;
  TCV_NCCL_CHECK(ncclGetUniqueId(&id));
  std::vector<uint8_t> bytes(sizeof(id));
  std::memcpy(bytes.data(), &id, sizeof(id));
  return bytes;
}

NcclComm::NcclComm(const std::vector<uint8_t>& unique_id, int rank, int size, int device,
                   std::chrono::milliseconds timeout)
    : impl_(std::make_shared<Impl>()) {
  ncclUniqueId id;
  TCV_CHECK(unique_id.size() == sizeof(id), "[nccl] the unique id has ", unique_id.size(),
            " bytes, expected ", sizeof(id));
  std::memcpy(&id, unique_id.data(), sizeof(id));
  impl_->rank = rank;
  impl_->size = size;
  impl_->device = device;
  impl_->timeout = timeout;
  cu::DeviceGuard guard(device);
  TCV_NCCL_CHECK(ncclCommInitRank(&impl_->comm, size, id, rank));
  impl_->barrier_buf =
      cu::cached_malloc(sizeof(float), device, cu::stream(device, cu::StreamKind::comm));
  Impl* p = impl_.get();
  impl_->watchdog = std::thread([p] { p->watch(); });
}

NcclComm::~NcclComm() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->watchdog.joinable()) impl_->watchdog.join();
  try {
    if (impl_->barrier_buf) cu::cached_free(impl_->barrier_buf);
  } catch (...) {
  }
  if (impl_->comm) {
    if (impl_->broken.empty())
      ncclCommDestroy(impl_->comm);
    else
      ncclCommAbort(impl_->comm);
  }
}

int NcclComm::device() const {
  return impl_->device;
}

std::shared_ptr<NcclPending> NcclComm::all_reduce(void* data, size_t count, DType dtype, NcclOp op,
                                                  void* base, const std::string& what) {
  const ncclDataType_t t = nccl_type(dtype);
  return enqueue(impl_, what, {base}, false, [&](ncclComm_t c, cudaStream_t s) {
    return ncclAllReduce(data, data, count, t, nccl_op(op), c, s);
  });
}

std::shared_ptr<NcclPending> NcclComm::broadcast(void* data, size_t nbytes, int root, void* base,
                                                 const std::string& what) {
  return enqueue(impl_, what, {base}, false, [&](ncclComm_t c, cudaStream_t s) {
    return ncclBroadcast(data, data, nbytes, ncclUint8, root, c, s);
  });
}

std::shared_ptr<NcclPending> NcclComm::all_gather(void* out, const void* in, size_t in_bytes,
                                                  void* out_base, void* in_base,
                                                  const std::string& what) {
  return enqueue(impl_, what, {out_base, in_base}, false, [&](ncclComm_t c, cudaStream_t s) {
    return ncclAllGather(in, out, in_bytes, ncclUint8, c, s);
  });
}

std::shared_ptr<NcclPending> NcclComm::reduce_scatter(void* out, const void* in, size_t out_count,
                                                      DType dtype, NcclOp op, void* out_base,
                                                      void* in_base, const std::string& what) {
  const ncclDataType_t t = nccl_type(dtype);
  return enqueue(impl_, what, {out_base, in_base}, false, [&](ncclComm_t c, cudaStream_t s) {
    return ncclReduceScatter(in, out, out_count, t, nccl_op(op), c, s);
  });
}

std::shared_ptr<NcclPending> NcclComm::barrier() {
  void* buf = impl_->barrier_buf;
  return enqueue(impl_, "barrier", {}, true, [&](ncclComm_t c, cudaStream_t s) {
    return ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, c, s);
  });
}

}  // namespace tcv::dist::detail
