// The fused optimizer steps (sgd_step_, adam_step_), the gradient norm
// (sum_of_squares, clip_grad_norm_) and sync_batch_norm on a group of one.
//
// The steps update clones of their inputs in place and return them. Every
// output is a few pointwise roundings of values of magnitude at most 4
// (parameters in [1, 2], gradients and moments in [-1, 1], learning rates
// below 1): ulps counts those roundings, scale = 4 covers the cancellation
// in a momentum buffer or a decayed parameter near zero. sum_of_squares sums n
// exact f64 squares (an f32 product fits f64's 53 bits): γ_n of the sum.
// clip_grad_norm_ scales each gradient by max_norm / (norm + 1e-6), a factor
// whose relative error is that of the sum (γ_n / 2 after the square root) plus
// three roundings, then one more rounding per element.
// sync_batch_norm runs batch_norm's kernels on statistics combined over the
// group in f64 (mean(v) + mean(m²) − M², which for a group of one is the
// rank's own v): sums over the n = N·H·W values of a channel, so each output is
// within (8n)·u·(|y| + 4), each gradient within (16n)·u·(|dx| + 4), as for
// batch_norm on inputs in [−1, 3]. With a fused relu the mask may differ where
// y is within that of 0 (the kink allowance of the gradient check).
#include "ops/cases.h"

namespace tcv::testing {
namespace {

const Shape kA = {5, 7}, kB = {3};

Tensor scalar(double v) {
  return from_vector(std::vector<double>{v});
}

Input param(const Shape& s) {
  return {.shape = s, .lo = 1, .hi = 2, .grad = false};
}
Input signed_state(const Shape& s) {
  return {.shape = s, .lo = -1, .hi = 1, .grad = false};
}
Input positive_state(const Shape& s) {
  return {.shape = s, .lo = 0.1, .hi = 1, .grad = false};
}

void add_sgd(OpRegistry& r, const char* name, ops::SgdParams p) {
  const bool momentum = p.momentum != 0.0;
  OpCase c{.op = "sgd_step_",
           .name = name,
           .inputs = {param(kA), signed_state(kA), param(kB), signed_state(kB)},
           .fn =
               [p, momentum](const In& v) {
                 std::vector<Tensor> out;
                 std::vector<ops::ParamSlot> slots;
                 for (size_t i = 0; i < v.size(); i += momentum ? 3 : 2) {
                   ops::ParamSlot s{.param = v[i].clone(), .grad = v[i + 1].clone()};
                   if (momentum) s.state0 = v[i + 2].clone();
                   slots.push_back(s);
                 }
                 ops::sgd_step_(slots, p);
                 for (const ops::ParamSlot& s : slots) {
                   out.push_back(s.param);
                   if (momentum) out.push_back(s.state0);
                 }
                 return out;
               },
           .check = Check::parity_only,
           .tol = {.ulps = 8, .scale = 4}};
  if (momentum) {
    c.inputs = {param(kA), signed_state(kA), signed_state(kA),
                param(kB), signed_state(kB), signed_state(kB)};
  }
  r.add(std::move(c));
}

void add_adam(OpRegistry& r, const char* name, ops::AdamParams p) {
  r.add({.op = "adam_step_",
         .name = name,
         .inputs = {param(kA), signed_state(kA), signed_state(kA), positive_state(kA), param(kB),
                    signed_state(kB), signed_state(kB), positive_state(kB)},
         .fn =
             [p](const In& v) {
               std::vector<ops::ParamSlot> slots;
               for (size_t i = 0; i < v.size(); i += 4)
                 slots.push_back({.param = v[i].clone(),
                                  .grad = v[i + 1].clone(),
                                  .state0 = v[i + 2].clone(),
                                  .state1 = v[i + 3].clone()});
               ops::adam_step_(slots, p);
               std::vector<Tensor> out;
               for (const ops::ParamSlot& s : slots) {
                 out.push_back(s.param);
                 out.push_back(s.state0);
                 out.push_back(s.state1);
               }
               return out;
             },
         .check = Check::parity_only,
         // The bias corrections, the square root and the division: 16 roundings.
         .tol = {.ulps = 16, .scale = 4}});
}

}  // namespace

void register_optim_cases(OpRegistry& r) {
  add_sgd(r, "plain", {.lr = 0.1});
  add_sgd(r, "momentum_dampening_decay",
          {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
  add_sgd(r, "nesterov", {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  add_adam(r, "adam_l2_step3", {.lr = 0.01, .weight_decay = 0.01, .step = 3});
  add_adam(r, "adamw_step1",
           {.lr = 0.01, .weight_decay = 0.05, .decay = ops::AdamDecay::decoupled, .step = 1});

  const int64_t n = 5 * 7 + 3 + 4 * 6;  // the elements summed below
  r.add({.op = "sum_of_squares",
         .name = "three_tensors_one_strided",
         .inputs = {signed_state(kA),
                    signed_state(kB),
                    {.shape = {4, 6},
                     .lo = -1,
                     .hi = 1,
                     .grad = false,
                     .layout = Layout::permuted({1, 0})}},
         .fn =
             [](const In& v) {
               return scalar(ops::sum_of_squares({v[0], v[1], v[2]}));
             },
         .check = Check::parity_only,
         .tol = {.terms = n}});
  for (const double max_norm : {0.5, 100.0}) {  // clipped, and left as it is
    r.add({.op = "clip_grad_norm_",
           .name = max_norm < 1 ? "clipped" : "below_max",
           .inputs = {signed_state(kA), signed_state(kB)},
           .fn =
               [max_norm](const In& v) {
                 Tensor a = v[0].clone(), b = v[1].clone();
                 const double norm = ops::clip_grad_norm_({a, b}, max_norm);
                 return std::vector<Tensor>{a, b, scalar(norm)};
               },
           .check = Check::parity_only,
           .tol = {.ulps = static_cast<double>(38 / 2 + 4)}});
  }

  // A group of one: the op's own backward against finite differences, and the
  // devices against the exact result.
  using SyncAct = ops::SyncBatchNormParams::Act;
  for (const auto& [running, act] :
       {std::pair{false, SyncAct::none}, {true, SyncAct::none}, {true, SyncAct::relu}}) {
    const Shape x = {2, 3, 4, 5};
    const double nc = 2 * 4 * 5;
    const bool relu = act == SyncAct::relu;
    OpCase c{.op = "sync_batch_norm",
             .name = relu      ? "group_of_one_relu"
                     : running ? "group_of_one_running"
                               : "group_of_one",
             .inputs = {{.shape = x, .lo = -1, .hi = 3},
                        {.shape = {3}, .lo = 0.5, .hi = 1.5},
                        {.shape = {3}, .lo = -0.5, .hi = 0.5}},
             .fn =
                 [running, act](const In& v) {
                   const ops::SyncBNGroup one{.size = 1, .all_reduce_sum = [](const Tensor&) {}};
                   Tensor rm = running ? v[3] : Tensor(), rv = running ? v[4] : Tensor();
                   Tensor y = ops::sync_batch_norm(v[0], v[1], v[2], rm, rv, one, {.act = act});
                   if (!running) return std::vector<Tensor>{y};
                   return std::vector<Tensor>{y, rm.clone(), rv.clone()};
                 },
             .grad = {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-5, .kink = relu ? 1e-4 : 0.0},
             .tol = {.ulps = 8 * nc, .scale = 4, .grad_ulps = 16 * nc, .grad_scale = 4}};
    if (running) {
      c.inputs.push_back({.shape = {3}, .lo = -0.5, .hi = 0.5, .grad = false});
      c.inputs.push_back({.shape = {3}, .lo = 0.5, .hi = 2.0, .grad = false});
    }
    r.add(std::move(c));
  }
}

}  // namespace tcv::testing
