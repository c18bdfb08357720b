#include "dist/ddp.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>

#include "engine/autograd.h"
#include "engine/json.h"

namespace tcv::dist {

namespace {

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ULL) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string describe(const std::string& kind, const std::string& name, const Tensor& t) {
  return kind + " " + name + " " + t.shape_str() + " " + dtype_name(t.dtype());
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<ProcessGroup> group,
                                                 DDPOptions opts)
    : module_(std::move(module)), group_(std::move(group)), opts_(std::move(opts)) {
  TCV_CHECK(module_ != nullptr, "[DistributedDataParallel] needs a module");
  TCV_CHECK(group_ != nullptr, "[DistributedDataParallel] needs a process group");
  register_module("module", module_);
  training_ = module_->is_training();
  if (opts_.timeline_path.empty())
    if (const char* p = std::getenv("TCV_TIMELINE")) opts_.timeline_path = p;
  if (opts_.timeline_step <= 0) {
    opts_.timeline_step = 3;
    if (const char* s = std::getenv("TCV_TIMELINE_STEP")) opts_.timeline_step = std::atoll(s);
  }
  if (opts_.timeline_steps <= 0) {
    opts_.timeline_steps = 1;
    if (const char* s = std::getenv("TCV_TIMELINE_STEPS"))
      opts_.timeline_steps = std::max<int64_t>(1, std::atoll(s));
  }
  if (group_->size() > 1) {
    verify_same_model();
    broadcast_state(/*params=*/true);
  }
  nn::StateDict params;
  for (auto& [name, p] : module_->named_parameters())
    if (p.requires_grad()) params.emplace_back(name, p);
  reducer_ = std::make_unique<Reducer>(std::move(params), group_, opts_.reducer);
}

void DistributedDataParallel::register_comm_hook(std::shared_ptr<CommHook> hook) {
  TCV_CHECK(hook != nullptr, "[DistributedDataParallel] register_comm_hook: the hook is null");
  TCV_CHECK(reducer_->comm_hook() == nullptr, "[DistributedDataParallel] register_comm_hook('",
            hook->name(), "'): a hook ('", reducer_->comm_hook()->name(),
            "') is registered already; register_comm_hook can only be called once (as in PyTorch)");
  reducer_->set_comm_hook(std::move(hook));
}

void DistributedDataParallel::register_comm_hook(std::string name, CommHookFn fn) {
  register_comm_hook(make_comm_hook(std::move(name), std::move(fn)));
}

void DistributedDataParallel::verify_same_model() {
  std::vector<std::string> entries;
  for (const auto& [name, p] : module_->named_parameters())
    entries.push_back(describe("parameter", name, p));
  for (const auto& [name, b] : module_->named_buffers())
    entries.push_back(describe("buffer", name, b));
  uint64_t all = 1469598103934665603ULL;
  for (const auto& e : entries) all = fnv1a(e + ";", all);
  const int world = group_->size();
  // On the model's device: NCCL moves only device memory.
  const auto ps = module_->parameters();
  const Device dev = ps.empty() ? kCPU : ps.front().device();
  Tensor mine =
      from_vector<int64_t>({static_cast<int64_t>(entries.size()), static_cast<int64_t>(all)})
          .to(dev);
  Tensor gathered = empty({2 * world}, {.dtype = DType::i64, .device = dev});
  group_->all_gather(gathered, mine)->wait();
  const auto g = gathered.to_vector<int64_t>();
  bool same = true;
  int64_t max_n = 0;
  for (int r = 0; r < world; ++r) {
    same = same && g[2 * r] == g[0] && g[2 * r + 1] == g[1];
    max_n = std::max(max_n, g[2 * r]);
  }
  if (same) return;
  // Find the first entry where each rank differs from rank 0.
  std::vector<int64_t> h(static_cast<size_t>(max_n), 0);
  for (size_t k = 0; k < entries.size(); ++k) h[k] = static_cast<int64_t>(fnv1a(entries[k]));
  Tensor per = from_vector<int64_t>(h).to(dev);
  Tensor per_all = empty({max_n * world}, {.dtype = DType::i64, .device = dev});
  group_->all_gather(per_all, per)->wait();
  const auto pa = per_all.to_vector<int64_t>();
  std::string detail;
  for (int r = 1; r < world; ++r) {
    for (int64_t k = 0; k < max_n; ++k) {
      if (pa[r * max_n + k] == pa[k]) continue;
      detail += "; rank " + std::to_string(r) + " first differs from rank 0 at entry #" +
                std::to_string(k) + " (" + std::to_string(g[2 * r]) + " entries vs " +
                std::to_string(g[0]) + ")";
      break;
    }
  }
  const int64_t me = group_->rank();
  int64_t first_bad = -1;
  for (int r = 0; r < world && first_bad < 0; ++r)
    for (int64_t k = 0; k < max_n; ++k)
      if (pa[r * max_n + k] != pa[me * max_n + k]) {
        first_bad = k;
        break;
      }
  std::string here;
  if (first_bad >= 0)
    here = first_bad < static_cast<int64_t>(entries.size())
               ? ", here entry #" + std::to_string(first_bad) + " is " + entries[first_bad]
               : ", here the model has only " + std::to_string(entries.size()) + " entries";
  TCV_THROW(
      "[DistributedDataParallel] the ranks hold different models (parameter/buffer "
      "names, shapes or dtypes differ); rank ",
      me, here, detail);
}

void DistributedDataParallel::broadcast_state(bool params) {
  // One broadcast per dtype: the tensors packed into a flat buffer.
  std::map<int, std::vector<Tensor>> by_dtype;
  if (params)
    for (auto& [name, p] : module_->named_parameters())
      by_dtype[static_cast<int>(p.dtype())].push_back(p);
  for (auto& [name, b] : module_->named_buffers())
    by_dtype[static_cast<int>(b.dtype())].push_back(b);
  NoGradGuard no_grad;
  std::vector<std::pair<Tensor, std::vector<Tensor>>> flats;
  std::vector<WorkPtr> works;
  for (auto& [dt, ts] : by_dtype) {
    int64_t n = 0;
    for (const Tensor& t : ts) n += t.numel();
    Tensor flat = empty({n}, {.dtype = static_cast<DType>(dt), .device = ts.front().device()});
    int64_t off = 0;
    for (const Tensor& t : ts) {
      flat.narrow(0, off, t.numel()).view(t.shape()).copy_(t.detach());
      off += t.numel();
    }
    works.push_back(group_->broadcast(flat, 0));
    flats.emplace_back(flat, ts);
  }
  for (auto& w : works) w->wait();
  if (group_->rank() == 0) return;
  for (auto& [flat, ts] : flats) {
    int64_t off = 0;
    for (Tensor& t : ts) {
      Tensor(t).detach().copy_(flat.narrow(0, off, t.numel()).view(t.shape()));
      off += t.numel();
    }
  }
}

void DistributedDataParallel::train(bool on) {
  Module::train(on);
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  return forward_with([&](nn::Module& m) { return std::vector<Tensor>{m.forward(x)}; }).front();
}

std::vector<Tensor> DistributedDataParallel::forward_with(
    const std::function<std::vector<Tensor>(nn::Module&)>& fn) {
  const bool grad = autograd::grad_enabled();
  if (grad) {
    if (!timeline_written_ && !opts_.timeline_path.empty() && group_->rank() == 0 &&
        reducer_->last_stats().step >= opts_.timeline_step) {
      double ms = 0;
      std::string trace = timeline_text(ms);
      timeline_candidates_.emplace_back(ms, std::move(trace));
      if (static_cast<int64_t>(timeline_candidates_.size()) >= opts_.timeline_steps) {
        auto& c = timeline_candidates_;
        std::nth_element(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(c.size() / 2), c.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        std::ofstream f(opts_.timeline_path);
        TCV_CHECK(f.good(), "[DistributedDataParallel] cannot write the timeline to ",
                  opts_.timeline_path, " (TCV_TIMELINE)");
        f << c[c.size() / 2].second << "\n";
        TCV_CHECK(f.good(), "[DistributedDataParallel] writing the timeline to ",
                  opts_.timeline_path, " failed");
        timeline_written_ = true;
        c.clear();
      }
    }
    reducer_->prepare_for_forward();
    if (opts_.broadcast_buffers && group_->size() > 1) broadcast_state(/*params=*/false);
  }
  const double t0 = reducer_->now_us();
  std::vector<Tensor> ys = fn(*module_);
  ++forwards_;
  std::vector<Tensor> with_grad;
  for (const Tensor& y : ys)
    if (y.defined() && y.requires_grad()) with_grad.push_back(y);
  if (grad && !with_grad.empty()) {
    reducer_->add_event({"forward", t0, reducer_->now_us(), -1, 0});
    reducer_->prepare_for_backward(with_grad);
  }
  return ys;
}

void DistributedDataParallel::write_timeline(const std::string& path) const {
  std::ofstream f(path);
  TCV_CHECK(f.good(), "[DistributedDataParallel] cannot write the timeline to ", path,
            " (TCV_TIMELINE)");
  double ms = 0;
  f << timeline_text(ms) << "\n";
  TCV_CHECK(f.good(), "[DistributedDataParallel] writing the timeline to ", path, " failed");
}

std::string DistributedDataParallel::timeline_text(double& step_ms) const {
  // Chrome's trace format (chrome://tracing, Perfetto): times in microseconds.
  // otherData carries what `tcv-bench ddp --project` reads: the step's span
  // (this forward to the next one, which is when this is written), each
  // gradient's ready time and bytes, and the fitted all-reduce cost.
  const Reducer& red = *reducer_;
  const double step_end_us = red.now_us();
  auto round_to = [](double v, double unit) { return std::round(v / unit) * unit; };
  auto meta = [](const char* name, int tid, const std::string& value) {
    Json e = Json::object();
    e["name"] = name;
    e["ph"] = "M";
    e["pid"] = 0;
    if (tid >= 0) e["tid"] = tid;
    e["args"] = Json::object({{"name", value}});
    return e;
  };
  const StepStats& s = red.last_stats();
  Json events = Json::array();
  events.push_back(meta(
      "process_name", -1,
      "rank 0 (" + group_->backend_name() + ", world " + std::to_string(group_->size()) + ")"));
  events.push_back(meta("thread_name", 0, "compute"));
  events.push_back(meta("thread_name", 1, "all-reduce"));
  double forward_us = 0, step_begin_us = -1;
  for (const TimelineEvent& e : red.timeline()) {
    const bool comm = e.bucket >= 0;
    if (e.name == "forward") {
      forward_us = e.end_us - e.begin_us;
      step_begin_us = e.begin_us;
    }
    Json x = Json::object();
    x["name"] = comm ? "allreduce bucket " + std::to_string(e.bucket) : e.name;
    x["ph"] = "X";
    x["pid"] = 0;
    x["tid"] = comm ? 1 : 0;
    x["ts"] = round_to(e.begin_us, 0.1);
    x["dur"] = round_to(std::max(0.0, e.end_us - e.begin_us), 0.1);
    if (comm) {
      Json args =
          Json::object({{"bucket", e.bucket},
                        {"bytes", e.bytes},
                        {"params", static_cast<int64_t>(red.bucket_params(e.bucket).size())}});
      if (e.start_us >= 0) args["started_us"] = round_to(e.start_us, 0.1);
      x["args"] = std::move(args);
    }
    events.push_back(std::move(x));
  }
  Json params = Json::array();
  const auto& ready = red.param_ready_us();
  for (size_t i = 0; i < red.params().size(); ++i) {
    const Tensor& p = red.params()[i].second;
    params.push_back(Json::object({{"name", red.params()[i].first},
                                   {"bytes", p.nbytes()},
                                   {"ready_us", round_to(ready[i], 0.1)}}));
  }
  Json other = Json::object({{"step", s.step},
                             {"world", group_->size()},
                             {"backend", group_->backend_name()},
                             {"bucket_plan", red.buckets_planned() ? "timed" : "cap"},
                             {"num_buckets", s.num_buckets},
                             {"forward_ms", round_to(1e-3 * forward_us, 1e-3)},
                             {"backward_begin_us", round_to(red.backward_begin_us(), 0.1)},
                             {"backward_end_us", round_to(red.backward_end_us(), 0.1)},
                             {"backward_ms", round_to(1e3 * s.backward_s, 1e-3)},
                             {"comm_ms", round_to(1e3 * s.comm_s, 1e-3)},
                             {"hidden_ms", round_to(1e3 * s.hidden_s, 1e-3)},
                             {"exposed_ms", round_to(1e3 * s.exposed_s, 1e-3)},
                             {"wait_ms", round_to(1e3 * s.wait_s, 1e-3)}});
  step_ms = step_begin_us >= 0 ? round_to(1e-3 * (step_end_us - step_begin_us), 1e-3) : 0.0;
  other["step_ms"] = step_ms;
  if (const auto& c = red.allreduce_cost())
    other["allreduce_cost"] =
        Json::object({{"latency_us", round_to(1e6 * c->latency_s, 1e-3)},
                      {"gbytes_per_s", round_to(1e-9 * c->bytes_per_s, 1e-6)}});
  other["params"] = std::move(params);
  Json trace = Json::object();
  trace["traceEvents"] = std::move(events);
  trace["otherData"] = std::move(other);
  return json_dump(trace);
}

std::shared_ptr<nn::SyncBNGroup> sync_bn_group(std::shared_ptr<ProcessGroup> group) {
  auto g = std::make_shared<nn::SyncBNGroup>();
  g->size = group->size();
  g->all_reduce_sum = [group](const Tensor& t) { group->all_reduce(t, ReduceOp::sum)->wait(); };
  return g;
}

}  // namespace tcv::dist
