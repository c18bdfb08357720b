#include "dist/comm_hook.h"

#include <algorithm>
#include <map>

#include "engine/autograd.h"
#include "engine/ops.h"
#include "engine/rng.h"

namespace tcv::dist {

GradBucket::GradBucket(int64_t index, Tensor buffer, std::vector<std::string> names,
                       std::vector<Shape> shapes, std::vector<int64_t> offsets, bool is_last)
    : index_(index),
      buffer_(std::move(buffer)),
      names_(std::move(names)),
      shapes_(std::move(shapes)),
      offsets_(std::move(offsets)),
      is_last_(is_last) {
  TCV_CHECK(names_.size() == shapes_.size() && shapes_.size() == offsets_.size(), "[GradBucket] ",
            names_.size(), " names, ", shapes_.size(), " shapes and ", offsets_.size(),
            " offsets: one of each per parameter");
}

std::vector<Tensor> GradBucket::gradients() const {
  std::vector<Tensor> out;
  out.reserve(shapes_.size());
  for (size_t k = 0; k < shapes_.size(); ++k)
    out.push_back(buffer_.narrow(0, offsets_[k], shape_numel(shapes_[k])).view(shapes_[k]));
  return out;
}

// ---- futures -------------------------------------------------------------------

namespace {

class AllWork final : public Work {
 public:
  explicit AllWork(std::vector<WorkPtr> works) : works_(std::move(works)) {}
  void wait() override {
    // Every one is waited for, so none is left running; the first error wins.
    std::string error;
    for (auto& w : works_) {
      try {
        w->wait();
      } catch (const std::exception& e) {
        if (error.empty()) error = e.what();
      }
    }
    if (!error.empty()) throw Error(error);
  }
  bool is_completed() override {
    for (auto& w : works_)
      if (!w->is_completed()) return false;
    return true;
  }

 private:
  std::vector<WorkPtr> works_;
};

}  // namespace

WorkPtr when_all(std::vector<WorkPtr> works) {
  works.erase(std::remove(works.begin(), works.end(), nullptr), works.end());
  if (works.empty()) return nullptr;
  if (works.size() == 1) return works.front();
  return std::make_shared<AllWork>(std::move(works));
}

CommFuture::CommFuture(WorkPtr first) : current_(std::move(first)) {}

CommFuture& CommFuture::then_collective(std::function<WorkPtr()> fn) {
  steps_.push_back({std::move(fn), true});
  ++collective_steps_left_;
  return *this;
}

CommFuture& CommFuture::then(std::function<void()> fn) {
  steps_.push_back({[fn = std::move(fn)]() -> WorkPtr {
                      fn();
                      return nullptr;
                    },
                    false});
  return *this;
}

bool CommFuture::step(bool block) {
  if (!error_.empty()) throw Error(error_);
  try {
    if (current_) {
      if (!block && !current_->is_completed()) return false;
      const WorkPtr w = std::move(current_);
      w->wait();  // also orders the caller's stream after it (NCCL)
      note_times(*w);
    }
    if (steps_.empty()) return true;
    Step s = std::move(steps_.front());
    steps_.pop_front();
    if (s.collective) --collective_steps_left_;
    current_ = s.fn();
  } catch (const std::exception& e) {
    error_ = e.what();
    steps_.clear();
    collective_steps_left_ = 0;
    current_.reset();
    throw;
  }
  return true;
}

void CommFuture::note_times(Work& w) {
  const std::chrono::steady_clock::time_point zero{};
  if (started_ == zero) started_ = w.started_at();
  if (w.finished_at() != zero) finished_ = w.finished_at();
}

std::chrono::steady_clock::time_point CommFuture::started_at() {
  if (started_ == std::chrono::steady_clock::time_point{} && current_)
    return current_->started_at();
  return started_;
}

std::chrono::steady_clock::time_point CommFuture::finished_at() {
  // The collective in flight, once finished, is the last one so far.
  if (current_ && current_->is_completed()) return current_->finished_at();
  return finished_;
}

void CommFuture::issue_collectives() {
  while (collective_steps_left_ > 0) step(/*block=*/true);
}

bool CommFuture::poll() {
  if (!error_.empty()) return true;
  while (!steps_.empty() && !steps_.front().collective)
    if (!step(/*block=*/false)) return false;
  return steps_.empty() && (!current_ || current_->is_completed());
}

void CommFuture::wait() {
  while (!steps_.empty()) step(/*block=*/true);
  if (current_) step(/*block=*/true);
  if (!error_.empty()) throw Error(error_);
}

bool CommFuture::is_completed() {
  if (!error_.empty()) return true;
  return steps_.empty() && (!current_ || current_->is_completed());
}

void CommFuture::abandon() noexcept {
  steps_.clear();
  collective_steps_left_ = 0;
  if (!current_) return;
  try {
    current_->wait();
  } catch (...) {  // NOLINT: abandoned; the error was (or will be) reported elsewhere
  }
  current_.reset();
}

// ---- hooks ---------------------------------------------------------------------

namespace {

class FnHook final : public CommHook {
 public:
  FnHook(std::string name, CommHookFn fn, int64_t state_from)
      : name_(std::move(name)), fn_(std::move(fn)), state_from_(state_from) {}
  CommFuturePtr run(ProcessGroup& group, const GradBucket& bucket) override {
    return fn_(group, bucket);
  }
  std::string name() const override { return name_; }
  int64_t keeps_bucket_state_from() const override { return state_from_; }

 private:
  std::string name_;
  CommHookFn fn_;
  int64_t state_from_;
};

class AllreduceHook final : public CommHook {
 public:
  CommFuturePtr run(ProcessGroup& group, const GradBucket& bucket) override {
    return std::make_shared<CommFuture>(group.all_reduce(bucket.buffer(), ReduceOp::avg));
  }
  std::string name() const override { return "allreduce"; }
};

class CompressHook final : public CommHook {
 public:
  explicit CompressHook(DType wire) : wire_(wire) {}
  CommFuturePtr run(ProcessGroup& group, const GradBucket& bucket) override {
    NoGradGuard no_grad;
    Tensor buffer = bucket.buffer();
    // As PyTorch: cast, then divide by the world size in the narrow type, then sum.
    const Tensor wire = ops::cast(buffer, wire_) / static_cast<double>(group.size());
    auto f = std::make_shared<CommFuture>(group.all_reduce(wire, ReduceOp::sum));
    f->then([buffer, wire]() mutable {
      NoGradGuard ng;
      buffer.copy_(wire);
    });
    return f;
  }
  std::string name() const override { return wire_ == DType::f16 ? "fp16" : "bf16"; }

 private:
  DType wire_;
};

}  // namespace

std::shared_ptr<CommHook> make_comm_hook(std::string name, CommHookFn fn,
                                         int64_t keeps_bucket_state_from) {
  TCV_CHECK(fn != nullptr, "[make_comm_hook] hook '", name, "' has no function");
  return std::make_shared<FnHook>(std::move(name), std::move(fn), keeps_bucket_state_from);
}

std::shared_ptr<CommHook> allreduce_hook() {
  return std::make_shared<AllreduceHook>();
}
std::shared_ptr<CommHook> fp16_compress_hook() {
  return std::make_shared<CompressHook>(DType::f16);
}
std::shared_ptr<CommHook> bf16_compress_hook() {
  return std::make_shared<CompressHook>(DType::bf16);
}

// ---- PowerSGD ------------------------------------------------------------------

void orthogonalize_(Tensor& m, double epsilon) {
  TCV_CHECK(m.dim() == 2, "[orthogonalize_] expects an (n, r) matrix, got ", m.shape_str());
  NoGradGuard no_grad;
  const int64_t r = m.size(1);
  for (int64_t i = 0; i < r; ++i) {
    Tensor col = m.narrow(1, i, 1);                                  // (n, 1)
    Tensor norm = ops::sqrt(ops::sum(ops::square(col), {0}, true));  // (1, 1)
    if (epsilon != 0) norm = norm + epsilon;
    col.copy_(col / norm);
    if (i + 1 < r) {
      Tensor rest = m.narrow(1, i + 1, r - i - 1);                   // (n, r - i - 1)
      const Tensor dots = ops::sum(ops::mul(col, rest), {0}, true);  // (1, r - i - 1)
      rest.add_(ops::mul(dots, col), -1.0);
    }
  }
}

PowerSGDHook::PowerSGDHook(PowerSGDOptions opts) : opts_(opts), rng_(opts.random_seed) {
  TCV_CHECK(opts_.matrix_approximation_rank >= 1,
            "[PowerSGD] matrix_approximation_rank must be >= 1, got ",
            opts_.matrix_approximation_rank);
  TCV_CHECK(opts_.start_powerSGD_iter >= 0, "[PowerSGD] start_powerSGD_iter must be >= 0, got ",
            opts_.start_powerSGD_iter);
  TCV_CHECK(opts_.min_compression_rate > 0 && opts_.min_compression_rate < 1e300,
            "[PowerSGD] min_compression_rate must be positive, got ", opts_.min_compression_rate);
  TCV_CHECK(opts_.orthogonalization_epsilon >= 0,
            "[PowerSGD] orthogonalization_epsilon must be >= 0, got ",
            opts_.orthogonalization_epsilon);
  // PyTorch's rule: buckets are rebuilt after the first step, so state kept
  // per bucket must start after it.
  TCV_CHECK(!(opts_.use_error_feedback || opts_.warm_start) || opts_.start_powerSGD_iter > 1,
            "[PowerSGD] start_powerSGD_iter must be > 1 when error feedback or warm start is on "
            "(DDP rebuilds its buckets after the first step), got ",
            opts_.start_powerSGD_iter);
}

std::string PowerSGDHook::name() const {
  return "powersgd rank " + std::to_string(opts_.matrix_approximation_rank);
}

std::shared_ptr<PowerSGDHook::Memory> PowerSGDHook::memory(int64_t bucket) {
  if (static_cast<int64_t>(memory_.size()) <= bucket)
    memory_.resize(static_cast<size_t>(bucket) + 1);
  if (!memory_[bucket]) memory_[bucket] = std::make_shared<Memory>();
  return memory_[bucket];
}

Tensor PowerSGDHook::error(int64_t bucket) const {
  return bucket < static_cast<int64_t>(memory_.size()) && memory_[bucket] ? memory_[bucket]->error
                                                                          : Tensor();
}
Tensor PowerSGDHook::p_memory(int64_t bucket) const {
  return bucket < static_cast<int64_t>(memory_.size()) && memory_[bucket] ? memory_[bucket]->p
                                                                          : Tensor();
}
Tensor PowerSGDHook::q_memory(int64_t bucket) const {
  return bucket < static_cast<int64_t>(memory_.size()) && memory_[bucket] ? memory_[bucket]->q
                                                                          : Tensor();
}

CommFuturePtr PowerSGDHook::run(ProcessGroup& group, const GradBucket& bucket) {
  NoGradGuard no_grad;
  const double world = static_cast<double>(group.size());
  Tensor input = bucket.buffer();
  if (iter_ < opts_.start_powerSGD_iter) {
    if (bucket.is_last()) ++iter_;
    input.copy_(input / world);  // PyTorch's _allreduce_fut: divide first, then sum
    return std::make_shared<CommFuture>(group.all_reduce(input, ReduceOp::sum));
  }
  const TensorOptions like{.dtype = input.dtype(), .device = input.device()};
  const int64_t total = input.numel();
  const std::shared_ptr<Memory> mem = memory(bucket.index());  // the steps below hold it

  Tensor input_cp;
  if (opts_.use_error_feedback) {
    if (mem->error.defined()) {
      TCV_CHECK(mem->error.numel() == total, "[PowerSGD] bucket ", bucket.index(), " has ", total,
                " elements but its error feedback has ", mem->error.numel(),
                " (the buckets changed after PowerSGD started)");
      input.add_(mem->error);
    } else {
      mem->error = zeros({total}, like);
    }
    input_cp = input.clone();
  }

  // Each gradient as an (n, m) matrix: compressed when worth it, else all-reduced as it is.
  struct Matrix {
    Tensor m;  // (n, cols) view of the bucket
    int64_t r = 0;
  };
  std::vector<Tensor> uncompressed;
  std::vector<std::pair<Shape, std::vector<Matrix>>> by_shape;  // first appearance order
  int64_t total_p = 0, total_q = 0, total_u = 0;
  for (const Tensor& g : bucket.gradients()) {
    const int64_t n = g.dim() == 0 ? 1 : g.size(0);
    const int64_t cols = n == 0 ? 0 : g.numel() / n;
    const int64_t r = std::min({n, cols, opts_.matrix_approximation_rank});
    const int64_t before = n * cols, after = (n + cols) * r;
    numel_before_ += before;
    if (static_cast<double>(after) * opts_.min_compression_rate < static_cast<double>(before)) {
      const Shape shape{n, cols};
      auto it = std::find_if(by_shape.begin(), by_shape.end(),
                             [&](const auto& e) { return e.first == shape; });
      if (it == by_shape.end()) {
        by_shape.push_back({shape, {}});
        it = std::prev(by_shape.end());
      }
      it->second.push_back({g.view(shape), r});
      total_p += n * r;
      total_q += cols * r;
      numel_after_ += after;
    } else {
      uncompressed.push_back(g);
      total_u += g.numel();
      numel_after_ += before;
    }
  }

  Tensor u_memory = empty({total_u}, like);
  {
    int64_t off = 0;
    for (const Tensor& g : uncompressed) {
      u_memory.narrow(0, off, g.numel()).copy_(g.reshape({g.numel()}));
      off += g.numel();
    }
  }

  const bool randomize = !opts_.warm_start || !mem->p.defined();
  if (randomize) {
    mem->p = empty({total_p}, like);
    mem->q = empty({total_q}, like);
  }
  std::vector<Tensor> ms, ps, qs;
  int64_t p_off = 0, q_off = 0;
  for (auto& [shape, mats] : by_shape)
    for (Matrix& mat : mats) {
      const int64_t n = shape[0], cols = shape[1];
      ms.push_back(mat.m);
      ps.push_back(mem->p.narrow(0, p_off, n * mat.r).view({n, mat.r}));
      qs.push_back(mem->q.narrow(0, q_off, cols * mat.r).view({cols, mat.r}));
      p_off += n * mat.r;
      q_off += cols * mat.r;
    }
  if (randomize) {
    // One seed per bucket from the state's generator, the same on every rank.
    Generator gen(rng_() % 1000000000ULL);
    for (Tensor& q : qs) {
      q.copy_(randn(q.shape(), {.dtype = input.dtype()}, &gen).to(input.device()));
      orthogonalize_(q, opts_.orthogonalization_epsilon);
    }
  } else {
    for (Tensor& q : qs) orthogonalize_(q, opts_.orthogonalization_epsilon);
  }
  for (size_t k = 0; k < ms.size(); ++k) ps[k].copy_(ops::matmul(ms[k], qs[k]));

  // The rest and the P's leave together (PyTorch sends the P's once the rest
  // has arrived; neither needs the other).
  WorkPtr u_work = total_u > 0 ? group.all_reduce(u_memory, ReduceOp::sum) : nullptr;
  WorkPtr p_work = total_p > 0 ? group.all_reduce(mem->p, ReduceOp::sum) : nullptr;
  auto f = std::make_shared<CommFuture>(when_all({u_work, p_work}));
  ProcessGroup* g = &group;
  const double eps = opts_.orthogonalization_epsilon;
  const bool is_last = bucket.is_last();
  f->then_collective([=]() mutable -> WorkPtr {
    NoGradGuard ng;
    if (total_u > 0) {
      u_memory.copy_(u_memory / world);
      int64_t off = 0;
      for (Tensor& t : uncompressed) {
        t.copy_(u_memory.narrow(0, off, t.numel()).view(t.shape()));
        off += t.numel();
      }
    }
    for (Tensor& p : ps) orthogonalize_(p, eps);
    for (size_t k = 0; k < ms.size(); ++k) qs[k].copy_(ops::matmul(ms[k].t(), ps[k]));
    return total_q > 0 ? g->all_reduce(mem->q, ReduceOp::sum) : nullptr;
  });
  f->then([=, this]() mutable {
    NoGradGuard ng;
    if (total_q > 0) mem->q.copy_(mem->q / world);
    for (size_t k = 0; k < ms.size(); ++k) ms[k].copy_(ops::matmul(ps[k], qs[k].t()));
    if (opts_.use_error_feedback) {
      mem->error.copy_(input_cp);
      mem->error.add_(input, -1.0);
    }
    // PyTorch clears every bucket's P and Q here; each bucket's own is enough
    // (the others may still be in flight), as the next step draws new ones.
    if (!opts_.warm_start) mem->p = mem->q = Tensor();
    if (is_last) ++iter_;
  });
  return f;
}

std::shared_ptr<PowerSGDHook> powersgd_hook(PowerSGDOptions opts) {
  return std::make_shared<PowerSGDHook>(opts);
}

const std::vector<std::string>& comm_hook_names() {
  static const std::vector<std::string> names = {"none", "bf16", "fp16", "powersgd"};
  return names;
}

std::shared_ptr<CommHook> make_builtin_comm_hook(const std::string& name,
                                                 const PowerSGDOptions& powersgd) {
  if (name == "none") return nullptr;
  if (name == "bf16") return bf16_compress_hook();
  if (name == "fp16") return fp16_compress_hook();
  if (name == "powersgd") return powersgd_hook(powersgd);
  std::string valid;
  for (const auto& n : comm_hook_names()) valid += (valid.empty() ? "" : ", ") + n;
  TCV_THROW("[DistributedDataParallel] unknown comm hook '", name, "' (valid: ", valid, ")");
}

}  // namespace tcv::dist
