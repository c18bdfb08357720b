#include "train/optim.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/autograd.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/optim.h"
#include "engine/ops/reduce.h"

namespace tcv::train {

namespace {

/// State tensor for `p`: same dtype/device, contiguous, owned (not an alias of `src`).
Tensor adopt_state(const Tensor& src, const Tensor& p) {
  return src.detach().to(p.device()).to(p.dtype()).clone().detach();
}

std::map<std::string, Tensor> to_map(const nn::StateDict& state) {
  std::map<std::string, Tensor> m;
  for (const auto& [k, t] : state) m[k] = t;
  return m;
}

int64_t load_step(const char* op, std::map<std::string, Tensor>& state) {
  auto it = state.find("step");
  TCV_CHECK(it != state.end(), "[", op, "::load_state_dict] missing entry \"step\"");
  TCV_CHECK(it->second.defined() && it->second.numel() == 1, "[", op,
            "::load_state_dict] \"step\" must hold one value, got shape ",
            it->second.defined() ? it->second.shape_str() : std::string("undefined"));
  // From a file: anything but a count (NaN, a fraction, past int64) is refused
  // before it is converted, which would be undefined for NaN and huge values.
  const double v = it->second.item();
  TCV_CHECK(v >= 0 && v < 9223372036854775808.0 && v == std::floor(v), "[", op,
            "::load_state_dict] \"step\" must be a whole number in [0, 2^63), got ", v);
  const int64_t step = static_cast<int64_t>(v);
  state.erase(it);
  return step;
}

/// Takes "<prefix>.<param name>" out of `state`, checked against the parameter's shape.
Tensor take_state(const char* op, std::map<std::string, Tensor>& state, const std::string& prefix,
                  const std::string& name, const Tensor& p) {
  const std::string key = prefix + "." + name;
  auto it = state.find(key);
  if (it == state.end()) return Tensor();
  Tensor t = it->second;
  state.erase(it);
  TCV_CHECK(t.defined() && t.shape() == p.shape(), "[", op, "::load_state_dict] \"", key,
            "\" has shape ", t.defined() ? t.shape_str() : std::string("undefined"),
            " but parameter \"", name, "\" has shape ", p.shape_str());
  return adopt_state(t, p);
}

void check_no_leftovers(const char* op, const std::map<std::string, Tensor>& state,
                        const char* valid) {
  if (state.empty()) return;
  std::string keys;
  for (const auto& [k, t] : state) keys += (keys.empty() ? "\"" : ", \"") + k + "\"";
  TCV_THROW("[", op, "::load_state_dict] unexpected keys: ", keys, " (expected \"step\" and ",
            valid, " for this optimizer's parameters)");
}

Tensor step_tensor(int64_t step) {
  return scalar_tensor(static_cast<double>(step), {.dtype = DType::i64});
}

}  // namespace

// ---------------------------------------------------------------- Optimizer

Optimizer::Optimizer(nn::StateDict named_params, double lr)
    : params_(std::move(named_params)), lr_(lr) {
  TCV_CHECK(lr >= 0.0, "[Optimizer] learning rate must be non-negative, got ", lr);
  std::map<std::string, int> seen;
  for (const auto& [name, p] : params_) {
    TCV_CHECK(p.defined(), "[Optimizer] parameter \"", name, "\" is undefined");
    TCV_CHECK(is_floating(p.dtype()), "[Optimizer] parameter \"", name, "\" must be floating, got ",
              dtype_name(p.dtype()));
    TCV_CHECK(seen[name]++ == 0, "[Optimizer] parameter name \"", name, "\" appears twice");
  }
}

void Optimizer::make_groups(double weight_decay, NoDecay no_decay) {
  ParamGroup decay{"decay", weight_decay, {}}, skip{"no_decay", 0.0, {}};
  for (size_t i = 0; i < params_.size(); ++i)
    (no_decay == NoDecay::bn_and_bias && params_[i].second.dim() <= 1 ? skip : decay)
        .params.push_back(i);
  groups_.clear();
  groups_.push_back(std::move(decay));
  if (no_decay == NoDecay::bn_and_bias) groups_.push_back(std::move(skip));
}

double clip_grad_norm(const nn::StateDict& params, double max_norm) {
  std::vector<Tensor> grads;
  for (const auto& [name, p] : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  return ops::clip_grad_norm_(grads, max_norm);
}

bool all_finite(const std::vector<Tensor>& ts) {
  NoGradGuard no_grad;
  std::vector<Tensor> cuda;  // summed together: one pass per device, one host sync per GPU
  for (const Tensor& t : ts) {
    if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) continue;
    if (t.device().is_cuda()) {
      cuda.push_back(t);
      continue;
    }
    // One pass: an inf or NaN makes the sum inf or NaN. Finite values may
    // overflow it too; then 0·x, 0 for finite x and NaN otherwise, decides.
    const Tensor x = t.dtype() == DType::f32 || t.dtype() == DType::f64 ? t : t.to(DType::f32);
    if (std::isfinite(ops::sum(x).item())) continue;
    if (!std::isfinite(ops::sum(ops::mul(x, 0.0)).item())) return false;
  }
  return cuda.empty() || std::isfinite(ops::sum_of_squares(cuda));
}

std::string first_nonfinite(const nn::StateDict& named) {
  for (const auto& [name, t] : named)
    if (!all_finite({t})) return name;
  return "";
}

Tensor nonfinite_seed(const Tensor& loss) {
  NoGradGuard no_grad;
  return ops::add(ops::mul(loss.detach(), 0.0), 1.0);
}

std::vector<Tensor> grads_of(const nn::StateDict& params) {
  std::vector<Tensor> out;
  for (const auto& [name, p] : params)
    if (Tensor g = p.grad(); g.defined()) out.push_back(std::move(g));
  return out;
}

nn::StateDict named_grads(const nn::StateDict& params) {
  nn::StateDict out;
  for (const auto& [name, p] : params)
    if (Tensor g = p.grad(); g.defined()) out.emplace_back(name, std::move(g));
  return out;
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& [name, p] : params_) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      g.zero_();
    }
  }
}

// ---------------------------------------------------------------- SGD

SGD::SGD(nn::StateDict named_params, SGDOptions opts)
    : Optimizer(std::move(named_params), opts.lr), opts_(opts), momentum_(params_.size()) {
  TCV_CHECK(opts.momentum >= 0.0, "[SGD] momentum must be non-negative, got ", opts.momentum);
  TCV_CHECK(opts.weight_decay >= 0.0, "[SGD] weight_decay must be non-negative, got ",
            opts.weight_decay);
  make_groups(opts.weight_decay, opts.no_decay);
  TCV_CHECK(!opts.nesterov || (opts.momentum > 0.0 && opts.dampening == 0.0),
            "[SGD] nesterov needs momentum > 0 and dampening 0, got momentum ", opts.momentum,
            ", dampening ", opts.dampening);
}

void SGD::step() {
  NoGradGuard no_grad;
  const double mom = opts_.momentum;
  for (const ParamGroup& group : groups_) {
    // Parameters the fused step takes go in one call (one kernel per device and
    // dtype); any others take the same rule through tensor ops.
    std::vector<ops::ParamSlot> fused;
    for (const size_t i : group.params) {
      Tensor& p = params_[i].second;
      Tensor g = p.grad();
      if (!g.defined()) continue;
      const bool first = !momentum_[i].defined();
      if (mom != 0.0 && first)
        momentum_[i] = empty(p.shape(), {.dtype = p.dtype(), .device = p.device()});
      if (ops::fused_step_supported(p, g, {&momentum_[i]}))
        fused.push_back({.param = p,
                         .grad = g,
                         .state0 = mom != 0.0 ? momentum_[i] : Tensor(),
                         .first = first});
      else
        step_one(i, group.weight_decay, first);
    }
    ops::sgd_step_(fused, {.lr = lr_,
                           .momentum = mom,
                           .dampening = opts_.dampening,
                           .weight_decay = group.weight_decay,
                           .nesterov = opts_.nesterov});
  }
  ++step_count_;
}

void SGD::step_one(size_t i, double wd, bool first) {
  Tensor& p = params_[i].second;
  const Tensor g = p.grad();
  const double mom = opts_.momentum;
  Tensor d = wd != 0.0 ? ops::add(g, ops::mul(p, wd)) : g;
  if (mom != 0.0) {
    Tensor& buf = momentum_[i];
    if (first) {
      buf.copy_(d);
    } else {
      buf.mul_(mom);
      buf.add_(d, 1.0 - opts_.dampening);
    }
    d = opts_.nesterov ? ops::add(d, ops::mul(buf, mom)) : buf;
  }
  p.add_(d, -lr_);
}

nn::StateDict SGD::state_dict() const {
  nn::StateDict out;
  for (size_t i = 0; i < params_.size(); ++i)
    if (momentum_[i].defined())
      out.emplace_back("momentum_buffer." + params_[i].first, momentum_[i].detach());
  out.emplace_back("step", step_tensor(step_count_));
  return out;
}

void SGD::load_state_dict(const nn::StateDict& state) {
  auto m = to_map(state);
  const int64_t step = load_step("SGD", m);
  std::vector<Tensor> bufs(params_.size());
  for (size_t i = 0; i < params_.size(); ++i)
    bufs[i] = take_state("SGD", m, "momentum_buffer", params_[i].first, params_[i].second);
  check_no_leftovers("SGD", m, "\"momentum_buffer.<param>\"");
  momentum_ = std::move(bufs);
  step_count_ = step;
}

// ---------------------------------------------------------------- Adam, AdamW

Adam::Adam(nn::StateDict named_params, AdamOptions opts)
    : Adam(std::move(named_params), opts, false, "Adam") {}

Adam::Adam(nn::StateDict named_params, AdamOptions opts, bool decoupled, const char* name)
    : Optimizer(std::move(named_params), opts.lr),
      opts_(opts),
      decoupled_(decoupled),
      name_(name),
      exp_avg_(params_.size()),
      exp_avg_sq_(params_.size()) {
  TCV_CHECK(opts.beta1 >= 0.0 && opts.beta1 < 1.0 && opts.beta2 >= 0.0 && opts.beta2 < 1.0, "[",
            name, "] betas must be in [0, 1), got (", opts.beta1, ", ", opts.beta2, ")");
  TCV_CHECK(opts.eps >= 0.0, "[", name, "] eps must be non-negative, got ", opts.eps);
  TCV_CHECK(opts.weight_decay >= 0.0, "[", name, "] weight_decay must be non-negative, got ",
            opts.weight_decay);
  make_groups(opts.weight_decay, opts.no_decay);
}

AdamW::AdamW(nn::StateDict named_params, AdamWOptions o)
    : Adam(std::move(named_params),
           AdamOptions{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.no_decay}, true, "AdamW") {}

void Adam::step() {
  NoGradGuard no_grad;
  // One step count for all parameters (torch keeps one per parameter; they agree
  // unless a parameter skips steps for lack of a gradient).
  const int64_t step = step_count_ + 1;
  const double lr = lr_;
  for (const ParamGroup& group : groups_) {
    const double wd = group.weight_decay;
    std::vector<ops::ParamSlot> fused;
    for (const size_t i : group.params) {
      Tensor& p = params_[i].second;
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (!exp_avg_[i].defined()) {
        exp_avg_[i] = zeros(p.shape(), {.dtype = p.dtype(), .device = p.device()});
        exp_avg_sq_[i] = zeros(p.shape(), {.dtype = p.dtype(), .device = p.device()});
      }
      Tensor& m = exp_avg_[i];
      Tensor& v = exp_avg_sq_[i];
      if (ops::fused_step_supported(p, g, {&m, &v})) {
        fused.push_back({.param = p, .grad = g, .state0 = m, .state1 = v});
        continue;
      }
      const double bc1 = 1.0 - std::pow(opts_.beta1, static_cast<double>(step));
      const double bc2 = 1.0 - std::pow(opts_.beta2, static_cast<double>(step));
      if (decoupled_)
        p.mul_(1.0 - lr * wd);
      else if (wd != 0.0)
        g = ops::add(g, ops::mul(p, wd));
      m.mul_(opts_.beta1);
      m.add_(g, 1.0 - opts_.beta1);
      v.mul_(opts_.beta2);
      v.add_(ops::mul(g, g), 1.0 - opts_.beta2);
      Tensor denom = ops::add(ops::sqrt(v) / std::sqrt(bc2), opts_.eps);
      p.add_(ops::div(m, denom), -lr / bc1);
    }
    ops::adam_step_(fused, {.lr = lr,
                            .beta1 = opts_.beta1,
                            .beta2 = opts_.beta2,
                            .eps = opts_.eps,
                            .weight_decay = wd,
                            .decay = decoupled_ ? ops::AdamDecay::decoupled : ops::AdamDecay::l2,
                            .step = step});
  }
  step_count_ = step;
}

nn::StateDict Adam::state_dict() const {
  nn::StateDict out;
  for (size_t i = 0; i < params_.size(); ++i)
    if (exp_avg_[i].defined())
      out.emplace_back("exp_avg." + params_[i].first, exp_avg_[i].detach());
  for (size_t i = 0; i < params_.size(); ++i)
    if (exp_avg_sq_[i].defined())
      out.emplace_back("exp_avg_sq." + params_[i].first, exp_avg_sq_[i].detach());
  out.emplace_back("step", step_tensor(step_count_));
  return out;
}

void Adam::load_state_dict(const nn::StateDict& state) {
  auto m = to_map(state);
  const int64_t step = load_step(name_, m);
  std::vector<Tensor> avg(params_.size()), avg_sq(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    avg[i] = take_state(name_, m, "exp_avg", name, p);
    avg_sq[i] = take_state(name_, m, "exp_avg_sq", name, p);
    TCV_CHECK(avg[i].defined() == avg_sq[i].defined(), "[", name_,
              "::load_state_dict] missing entry \"", avg[i].defined() ? "exp_avg_sq." : "exp_avg.",
              name, "\" (the other moment is present)");
  }
  check_no_leftovers(name_, m, "\"exp_avg.<param>\", \"exp_avg_sq.<param>\"");
  exp_avg_ = std::move(avg);
  exp_avg_sq_ = std::move(avg_sq);
  step_count_ = step;
}

}  // namespace tcv::train
