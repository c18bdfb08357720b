#include "train/distributed.h"

#include <cmath>
#include <cstdio>
#include <map>

#include "engine/cuda.h"
#include "layers/sync_batch_norm.h"

namespace tcv::train {

namespace {

// A config value as one line of text (for comparing ranks' configs).
std::string value_text(const ConfigValue& v) {
  struct V {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const {
      char buf[40];
      std::snprintf(buf, sizeof(buf), "%.17g", d);
      return buf;
    }
    std::string operator()(const std::string& s) const { return "\"" + s + "\""; }
    std::string operator()(const std::vector<double>& a) const {
      std::string o = "[";
      for (size_t i = 0; i < a.size(); ++i) o += (i ? ", " : "") + (*this)(a[i]);
      return o + "]";
    }
    std::string operator()(const std::vector<int64_t>& a) const {
      std::string o = "[";
      for (size_t i = 0; i < a.size(); ++i) o += (i ? ", " : "") + std::to_string(a[i]);
      return o + "]";
    }
    std::string operator()(const std::vector<std::string>& a) const {
      std::string o = "[";
      for (size_t i = 0; i < a.size(); ++i) o += (i ? ", " : "") + (*this)(a[i]);
      return o + "]";
    }
    std::string operator()(const std::vector<std::vector<double>>& a) const {
      std::string o = "[";
      for (size_t i = 0; i < a.size(); ++i) o += (i ? ", " : "") + (*this)(a[i]);
      return o + "]";
    }
  };
  return std::visit(V{}, v);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string encode(const std::vector<std::pair<std::string, std::string>>& values) {
  std::string s;
  for (const auto& [k, v] : values) s += k + "\n" + v + "\n";
  return s;
}

std::vector<std::pair<std::string, std::string>> decode(const std::string& s) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t a = s.find('\n', pos);
    if (a == std::string::npos) break;
    const size_t b = s.find('\n', a + 1);
    if (b == std::string::npos) break;
    out.emplace_back(s.substr(pos, a - pos), s.substr(a + 1, b - a - 1));
    pos = b + 1;
  }
  return out;
}

// "file:line: key", or the key alone for a default.
std::string at_key(const Config& cfg, const std::string& key) {
  const std::string src = cfg.source(key);
  return (src == "default" ? "" : src + ": ") + key;
}

}  // namespace

DistContext::DistContext(const Config& cfg, Device device) {
  const dist::EnvMap env = dist::process_dist_env();
  if (!dist::has_dist_env(env))
    throw ConfigError(at_key(cfg, "network.distributed") +
                      " = true needs a distributed launch (RANK, "
                      "WORLD_SIZE, MASTER_ADDR, MASTER_PORT, as tcv-run or torchrun set them, or "
                      "srun's SLURM_PROCID, SLURM_NTASKS); start it with tcv-run --nproc-per-node "
                      "N -- tcv-train ...");
  env_ = dist::resolve_dist_env(env);
  device_ = device;
  if (device.is_cuda()) {
    const int n = cuda::device_count();
    if (n > 1) device_ = Device(DeviceType::CUDA, env_.local_rank % n);
    cuda::set_device(device_.index);
  }
  const NetworkConfig& net = cfg.settings().network;
  const auto timeout = dist::seconds_to_ms(net.timeout, "network.timeout", /*allow_zero=*/false);
  const auto wait_log = dist::seconds_to_ms(net.wait_log_interval, "network.wait_log_interval",
                                            /*allow_zero=*/true);
  dist::TcpStoreOptions so;
  so.timeout = timeout;
  so.wait_log_interval = wait_log;
  store_ = dist::connect_job_store(env_, so);
  dist::ProcessGroupOptions po;
  po.timeout = timeout;
  po.wait_log_interval = wait_log;
  group_ = device.is_cpu() ? dist::make_gloo_group(store_, env_.rank, env_.world_size, po)
                           : dist::make_nccl_group(store_, env_.rank, env_.world_size, po);

  // Ranks given different configs (e.g. solver.max_iters) would issue
  // different collectives; data.workers only changes this process's threads.
  std::vector<std::pair<std::string, std::string>> keys;
  for (const auto& spec : config_schema())
    if (spec.key != "data.workers") keys.emplace_back(spec.key, value_text(cfg.get(spec.key)));
  check_same("config", keys);
}

void DistContext::check_same(const std::string& what,
                             const std::vector<std::pair<std::string, std::string>>& values) {
  if (env_.world_size == 1) return;
  const std::string mine = encode(values);
  const auto h = static_cast<int64_t>(fnv1a(mine) >> 1);
  // max over ranks of (h, -h): every rank has the same h when the maximum is -(minimum).
  Tensor t = from_vector<int64_t>({h, -h});
  if (!device_.is_cpu()) t = t.to(device_);
  group_->all_reduce(t, dist::ReduceOp::max)->wait();
  const std::vector<int64_t> r = t.to(kCPU).to_vector<int64_t>();
  if (r[0] == -r[1]) return;

  // They differ: every rank publishes its values and names what differs.
  const std::string prefix = "/tcv/check_same/" + what + "/";
  store_->set(prefix + std::to_string(env_.rank), mine);
  std::vector<std::vector<std::pair<std::string, std::string>>> all(env_.world_size);
  for (int q = 0; q < env_.world_size; ++q) {
    const dist::Bytes b = store_->get(prefix + std::to_string(q), store_->timeout(),
                                      "rank " + std::to_string(q) + "'s " + what);
    all[q] = decode(std::string(b.begin(), b.end()));
  }
  std::string diff;
  int shown = 0;
  for (size_t i = 0; i < values.size() && shown < 8; ++i) {
    std::map<std::string, std::vector<int>> by_value;
    std::vector<std::string> order;
    for (int q = 0; q < env_.world_size; ++q) {
      const std::string v = i < all[q].size() ? all[q][i].second : "(missing)";
      if (!by_value.count(v)) order.push_back(v);
      by_value[v].push_back(q);
    }
    if (by_value.size() == 1) continue;
    ++shown;
    diff += "\n  " + values[i].first + ":";
    for (const auto& v : order) {
      const auto& ranks = by_value[v];
      diff += " " + v + " on rank" + (ranks.size() > 1 ? "s " : " ");
      for (size_t j = 0; j < ranks.size() && j < 8; ++j) {
        if (j) diff += ",";
        diff += std::to_string(ranks[j]);
      }
      if (ranks.size() > 8) diff += ",...";
      diff += v == order.back() ? "" : ";";
    }
  }
  throw ConfigError("ranks disagree on the " + what +
                    " (every rank must run the same one, or "
                    "they issue different collectives and hang):" +
                    diff);
}

std::shared_ptr<dist::DistributedDataParallel> DistContext::wrap(
    const Config& cfg, std::shared_ptr<nn::Module> model) {
  const NetworkConfig& net = cfg.settings().network;
  if (net.sync_bn) nn::convert_sync_batchnorm(*model, dist::sync_bn_group(group_));
  dist::DDPOptions o;
  o.reducer.bucket_cap_mb = net.bucket_cap_mb;
  o.reducer.bucket_plan =
      net.bucket_plan == BucketPlanChoice::cap ? dist::BucketPlan::cap : dist::BucketPlan::timed;
  o.reducer.find_unused_parameters = net.find_unused_parameters;
  auto ddp = std::make_shared<dist::DistributedDataParallel>(std::move(model), group_, o);
  if (auto hook = dist::make_builtin_comm_hook(net.comm_hook, net.powersgd))
    ddp->register_comm_hook(std::move(hook));
  return ddp;
}

void DistContext::all_reduce_sum(std::vector<double>& values) {
  if (values.empty()) return;
  // f64 on the CPU (Gloo); f32 on the device for NCCL, which moves only device memory.
  Tensor t = from_vector<double>(values);
  if (!device_.is_cpu()) t = t.to(DType::f32).to(device_);
  group_->all_reduce(t, dist::ReduceOp::sum)->wait();
  values = t.to(kCPU).to(DType::f64).to_vector<double>();
}

void DistContext::barrier() {
  group_->barrier()->wait();
}

namespace {

std::string mib_text(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

std::string ddp_summary(dist::DistributedDataParallel& ddp) {
  const dist::StepStats& s = ddp.reducer().last_stats();
  const auto& hook = ddp.reducer().comm_hook();
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "ddp: %lld buckets; last step: backward %.1f ms, all-reduce %.1f ms (%.0f%% hidden "
                "behind backward), end-of-backward wait %.1f ms; gradients %s/step on the wire",
                static_cast<long long>(s.num_buckets), 1e3 * s.backward_s, 1e3 * s.comm_s,
                s.comm_s > 0 ? 100.0 * s.hidden_s / s.comm_s : 0.0, 1e3 * s.wait_s,
                mib_text(s.bytes).c_str());
  std::string out = buf;
  if (hook && s.bytes > 0) {
    std::snprintf(buf, sizeof(buf), " (%s: %.1fx fewer than the buckets' %s)", hook->name().c_str(),
                  static_cast<double>(s.bucket_bytes) / static_cast<double>(s.bytes),
                  mib_text(s.bucket_bytes).c_str());
    out += buf;
  }
  return out;
}

std::unique_ptr<DistContext> init_distributed(const Config& cfg, Device device) {
  if (cfg.settings().network.distributed) return std::make_unique<DistContext>(cfg, device);
  // Launched as one of several without asking for data parallelism: each rank
  // would train alone into the same run directory.
  const dist::EnvMap env = dist::process_dist_env();
  const auto world = env.find("WORLD_SIZE");
  if (world != env.end() && world->second != "1" && world->second != "0")
    throw ConfigError(at_key(cfg, "network.distributed") +
                      " is false, but WORLD_SIZE=" + world->second +
                      " says this process is one of several (tcv-run, torchrun); each would "
                      "train alone and write the same run directory. Set "
                      "network.distributed = true (--set network.distributed=true), or start one "
                      "process without WORLD_SIZE");
  if (world == env.end() && dist::has_slurm_env(env) && env.at("SLURM_PROCID") != "0" &&
      env.at("SLURM_NTASKS") != "1")
    throw ConfigError(at_key(cfg, "network.distributed") +
                      " is false, but this is Slurm task SLURM_PROCID=" + env.at("SLURM_PROCID") +
                      " of SLURM_NTASKS=" + env.at("SLURM_NTASKS") +
                      "; the tasks would each train alone and write the same run directory. Set "
                      "network.distributed = true, or run one task (srun -n 1)");
  return nullptr;
}

}  // namespace tcv::train
