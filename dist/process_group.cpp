// Backend-independent parts of ProcessGroup and the NCCL group over Tensors
// (the NCCL calls themselves live in nccl_group.cu). The Gloo backend is in
// gloo_group.cpp.
#include "dist/process_group.h"

#include <atomic>
#include <sstream>

#include "dist/fingerprint.h"
#include "engine/error.h"

#ifdef TCV_WITH_CUDA
#include <cstdlib>
#include <mutex>

#include "dist/log.h"
#include "dist/nccl_group.h"
#include "dist/net.h"
#include "engine/cuda.h"
#endif

namespace tcv::dist {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::max:
      return "max";
    case ReduceOp::min:
      return "min";
  }
  return "?";
}

#ifdef TCV_WITH_CUDA

namespace {

class NcclWork : public Work {
 public:
  explicit NcclWork(std::shared_ptr<detail::NcclPending> p) : p_(std::move(p)) {}
  void wait() override { p_->wait(); }
  bool is_completed() override { return p_->is_completed(); }

 private:
  std::shared_ptr<detail::NcclPending> p_;
};

// NCCL's bootstrap picks its own interface; on a job that spans machines with
// no NCCL_SOCKET_IFNAME, hand it the one that routes to MASTER_ADDR (the rule
// Gloo follows, dist/net.h). Once per process, before the first communicator;
// the machine's first local rank says what NCCL was given.
void configure_nccl_interface(const std::string& master, int rank) {
  static std::once_flag once;
  std::call_once(once, [&] {
    const EnvMap env = process_dist_env();
    BindChoice choice;
    const std::string ifname = nccl_socket_ifname(master, env, system_net_probe(), &choice);
    if (!ifname.empty()) ::setenv("NCCL_SOCKET_IFNAME", ifname.c_str(), 0);
    const auto local = env.find("LOCAL_RANK");
    const bool first_local = local != env.end() ? local->second == "0" : rank == 0;
    if (first_local && !choice.address.empty()) log_line(choice.describe("nccl"));
  });
}

detail::NcclOp to_nccl(ReduceOp op) {
  return static_cast<detail::NcclOp>(static_cast<uint8_t>(op));
}

class NcclGroup : public ProcessGroup {
 public:
  NcclGroup(std::shared_ptr<TcpStore> store, int rank, int size, ProcessGroupOptions options,
            const std::string& prefix)
      : ProcessGroup(rank, size),
        store_(std::move(store)),
        timeout_(options.timeout),
        checks_(detail::checked_collectives(options.check_collectives)) {
    TCV_CHECK(store_ != nullptr, "[nccl] make_nccl_group needs a store");
    TCV_CHECK(cuda::device_count() > 0,
              "[nccl] make_nccl_group: no CUDA device is visible to rank ", rank);
    // Groups made with the same prefix get their own id (ranks make groups in the same order).
    configure_nccl_interface(store_->host(), rank);
    static std::atomic<int> generation{0};
    key_base_ = prefix + "/" + std::to_string(generation++);
    const std::string key = key_base_ + "/unique_id";
    std::vector<uint8_t> id;
    if (rank == 0) {
      id = detail::NcclComm::new_unique_id();
      store_->set(key, id);
    } else {
      id = store_->get(key, options.timeout, "rank 0's ncclUniqueId");
    }
    comm_ =
        std::make_unique<detail::NcclComm>(id, rank, size, cuda::current_device(), options.timeout);
  }

  std::string backend_name() const override { return "nccl"; }

  WorkPtr all_reduce(const Tensor& t, ReduceOp op) override {
    check(t, "all_reduce");
    compare(fingerprint(detail::CollectiveKind::all_reduce, t, op));
    return counted(comm_->all_reduce(t.data_ptr(), static_cast<size_t>(t.numel()), t.dtype(),
                                     to_nccl(op), base(t), describe("all_reduce", t)),
                   t.nbytes());
  }
  WorkPtr broadcast(const Tensor& t, int root) override {
    check(t, "broadcast");
    TCV_CHECK(root >= 0 && root < size(), "[nccl] broadcast root ", root,
              " out of range for group size ", size());
    detail::Fingerprint fp = fingerprint(detail::CollectiveKind::broadcast, t);
    fp.root = root;
    compare(fp);
    return counted(
        comm_->broadcast(t.data_ptr(), t.nbytes(), root, base(t), describe("broadcast", t)),
        t.nbytes());
  }
  WorkPtr all_gather(const Tensor& out, const Tensor& in) override {
    check(out, "all_gather");
    check(in, "all_gather");
    TCV_CHECK(out.dtype() == in.dtype() && out.numel() == in.numel() * size(),
              "[nccl] all_gather: out ", dtype_name(out.dtype()), " ", out.shape_str(),
              " must hold size() x in ", dtype_name(in.dtype()), " ", in.shape_str());
    compare(fingerprint(detail::CollectiveKind::all_gather, in));
    return counted(comm_->all_gather(out.data_ptr(), in.data_ptr(), in.nbytes(), base(out),
                                     base(in), describe("all_gather", in)),
                   in.nbytes());
  }
  WorkPtr reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) override {
    check(out, "reduce_scatter");
    check(in, "reduce_scatter");
    TCV_CHECK(out.dtype() == in.dtype() && in.numel() == out.numel() * size(),
              "[nccl] reduce_scatter: in ", dtype_name(in.dtype()), " ", in.shape_str(),
              " must hold size() x out ", dtype_name(out.dtype()), " ", out.shape_str());
    compare(fingerprint(detail::CollectiveKind::reduce_scatter, in, op));
    return counted(comm_->reduce_scatter(out.data_ptr(), in.data_ptr(),
                                         static_cast<size_t>(out.numel()), in.dtype(), to_nccl(op),
                                         base(out), base(in), describe("reduce_scatter", in)),
                   in.nbytes());
  }
  WorkPtr barrier() override {
    compare(detail::Fingerprint{});
    return counted(comm_->barrier(), 0);
  }

 private:
  WorkPtr counted(std::shared_ptr<detail::NcclPending> p, size_t bytes) {
    count_collective(static_cast<int64_t>(bytes));
    return std::make_shared<NcclWork>(std::move(p));
  }
  static void* base(const Tensor& t) { return t.storage()->data(); }
  static std::string describe(const char* op, const Tensor& t) {
    return tcv::detail::str_cat(op, " (", dtype_name(t.dtype()), ", ", t.numel(), " elements)");
  }
  void check(const Tensor& t, const char* op) const {
    TCV_CHECK(t.defined(), "[nccl] ", op, ": undefined tensor");
    TCV_CHECK(t.device().is_cuda(), "[nccl] ", op, ": the NCCL backend takes CUDA tensors, got a ",
              t.device().str(), " tensor (use the Gloo backend for CPU tensors)");
    TCV_CHECK(t.device().index == comm_->device(), "[nccl] ", op, ": the tensor is on ",
              t.device().str(), " but this group's communicator is on cuda:", comm_->device());
    TCV_CHECK(t.is_contiguous(), "[nccl] ", op, ": the tensor ", t.shape_str(),
              " must be contiguous");
  }

  static detail::Fingerprint fingerprint(detail::CollectiveKind kind, const Tensor& t,
                                         ReduceOp op = ReduceOp::sum) {
    detail::Fingerprint fp;
    fp.kind = kind;
    fp.op = op;
    fp.dtype = t.dtype();
    fp.count = t.numel();
    return fp;
  }

  // In the first checks_ collectives, every rank publishes its fingerprint in
  // the store and reads everyone's before NCCL sees the call: ranks that issue
  // different collectives fail here with a message, instead of in NCCL.
  void compare(detail::Fingerprint fp) {
    fp.seq = seq_++;
    if (size() == 1 || !(checks_ < 0 || fp.seq < static_cast<uint64_t>(checks_))) return;
    const std::string base = key_base_ + "/fp/" + std::to_string(fp.seq) + "/";
    std::string mine;
    for (int64_t w : fp.pack()) mine += std::to_string(w) + " ";
    store_->set(base + std::to_string(rank()), mine);
    std::vector<detail::Fingerprint> all(static_cast<size_t>(size()));
    for (int r = 0; r < size(); ++r) {
      std::string v = mine;
      if (r != rank()) {
        const Bytes got = store_->get(
            base + std::to_string(r), timeout_,
            "rank " + std::to_string(r) + " to issue collective #" + std::to_string(fp.seq));
        v.assign(got.begin(), got.end());
      }
      std::istringstream is(v);
      int64_t w[4] = {0, 0, 0, 0};
      is >> w[0] >> w[1] >> w[2] >> w[3];
      all[static_cast<size_t>(r)] = detail::Fingerprint::unpack(w);
    }
    // Every rank has published #seq, so all have read #seq-1: that key can go.
    if (fp.seq > 0)
      store_->delete_key(key_base_ + "/fp/" + std::to_string(fp.seq - 1) + "/" +
                         std::to_string(rank()));
    const std::string msg = detail::compare_fingerprints(all, "nccl");
    TCV_CHECK(msg.empty(), msg);
  }

  std::shared_ptr<TcpStore> store_;
  std::chrono::milliseconds timeout_;
  int64_t checks_;
  std::string key_base_;
  std::atomic<uint64_t> seq_{0};
  std::unique_ptr<detail::NcclComm> comm_;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<TcpStore> store, int rank, int size,
                                              ProcessGroupOptions options,
                                              const std::string& prefix) {
  return std::make_shared<NcclGroup>(std::move(store), rank, size, std::move(options), prefix);
}

#else

std::shared_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<TcpStore>, int, int,
                                              ProcessGroupOptions, const std::string&) {
  TCV_THROW(
      "[nccl] make_nccl_group: this build of tcv has no CUDA/NCCL backend (configure with "
      "TCV_WITH_CUDA=ON where nvcc and NCCL exist); use the gloo backend for CPU tensors");
}

#endif

}  // namespace tcv::dist
