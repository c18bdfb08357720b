// Fused optimizer steps: parameters grouped by device and dtype, one kernel
// call per group through TCV_KERNEL (kernels/cpu/optim.h, kernels/cuda/optim.h).
#include "engine/ops/optim.h"

#include <algorithm>
#include <cmath>

#include "engine/autograd.h"
#include "engine/backend.h"
#include "kernels/cpu/optim.h"
#include "kernels/cuda/optim.h"

namespace tcv::ops {

namespace {

/// The slots of one device and dtype: one kernel call updates them all.
struct SlotGroup {
  Device device;
  DType dtype = DType::f32;
  std::vector<kernels::MultiTensorEntry> entries;
  std::vector<Tensor> touched;  // parameters and states whose version to bump
  std::vector<Tensor> keep;     // contiguous copies of gradients, alive until the call
};

void* opt_data(const Tensor& t) {
  return t.defined() ? t.data_ptr() : nullptr;
}

std::vector<SlotGroup> group_slots(const char* op, const std::vector<ParamSlot>& slots,
                                   bool needs_state0, bool needs_state1) {
  std::vector<SlotGroup> groups;
  for (const ParamSlot& s : slots) {
    TCV_CHECK(s.param.defined() && s.grad.defined(), "[", op,
              "] a slot without parameter or gradient");
    TCV_CHECK(fused_step_supported(s.param, s.grad, {&s.state0, &s.state1}), "[", op,
              "] takes contiguous f32/f64 parameters with gradients and states of their dtype, "
              "device and shape, got a ",
              dtype_name(s.param.dtype()), " parameter ", s.param.shape_str(), " on ",
              s.param.device().str(), " with a ", dtype_name(s.grad.dtype()), " gradient on ",
              s.grad.device().str());
    TCV_CHECK(!needs_state0 || s.state0.defined(), "[", op, "] needs the first state");
    TCV_CHECK(!needs_state1 || s.state1.defined(), "[", op, "] needs the second state");
    SlotGroup* g = nullptr;
    for (SlotGroup& c : groups)
      if (c.device == s.param.device() && c.dtype == s.param.dtype()) g = &c;
    if (!g) g = &groups.emplace_back(SlotGroup{s.param.device(), s.param.dtype(), {}, {}, {}});
    const Tensor grad = s.grad.is_contiguous() ? s.grad : s.grad.contiguous();
    g->entries.push_back({.p = s.param.data_ptr(),
                          .g = grad.data_ptr(),
                          .s0 = opt_data(s.state0),
                          .s1 = opt_data(s.state1),
                          .n = s.param.numel(),
                          .first = s.first});
    g->keep.push_back(grad);
    g->touched.push_back(s.param);
    for (const Tensor* t : {&s.state0, &s.state1})
      if (t->defined()) g->touched.push_back(*t);
  }
  return groups;
}

}  // namespace

bool fused_step_supported(const Tensor& p, const Tensor& g,
                          std::initializer_list<const Tensor*> states) {
  if ((p.dtype() != DType::f32 && p.dtype() != DType::f64) || !p.is_contiguous() ||
      g.dtype() != p.dtype() || g.device() != p.device() || g.shape() != p.shape())
    return false;
  for (const Tensor* s : states)
    if (s->defined() && (!s->is_contiguous() || s->dtype() != p.dtype() ||
                         s->device() != p.device() || s->shape() != p.shape()))
      return false;
  return true;
}

void sgd_step_(const std::vector<ParamSlot>& slots, const SgdParams& p) {
  NoGradGuard no_grad;
  for (SlotGroup& g : group_slots("sgd_step_", slots, p.momentum != 0.0, false)) {
    TCV_KERNEL(g.device, sgd_step_multi, g.dtype, g.entries, p);
    for (const Tensor& t : g.touched) t.bump_version();
  }
}

void adam_step_(const std::vector<ParamSlot>& slots, const AdamParams& p) {
  TCV_CHECK(p.step >= 1, "[adam_step_] step counts from 1, got ", p.step);
  NoGradGuard no_grad;
  for (SlotGroup& g : group_slots("adam_step_", slots, true, true)) {
    TCV_KERNEL(g.device, adam_step_multi, g.dtype, g.entries, p);
    for (const Tensor& t : g.touched) t.bump_version();
  }
}

double sum_of_squares(const std::vector<Tensor>& ts) {
  NoGradGuard no_grad;
  // Per device: contiguous views (copies where needed) of its tensors.
  std::vector<std::pair<Device, std::vector<Tensor>>> by_device;
  for (const Tensor& t : ts) {
    TCV_CHECK(t.defined() && is_floating(t.dtype()),
              "[sum_of_squares] takes floating tensors, got ",
              t.defined() ? dtype_name(t.dtype()) : "an undefined one");
    if (t.numel() == 0) continue;
    auto it = std::find_if(by_device.begin(), by_device.end(),
                           [&](const auto& e) { return e.first == t.device(); });
    if (it == by_device.end()) it = by_device.insert(by_device.end(), {t.device(), {}});
    it->second.push_back(t.is_contiguous() ? t : t.contiguous());
  }
  double total = 0.0;
  for (const auto& [device, group] : by_device) {
    std::vector<kernels::KTensor> descs;
    descs.reserve(group.size());
    for (const Tensor& t : group) descs.push_back(t.strided_desc());
    double sum = 0.0;
    TCV_KERNEL(device, sum_squares_multi, descs, &sum);
    total += sum;
  }
  return total;
}

double clip_grad_norm_(const std::vector<Tensor>& grads, double max_norm) {
  NoGradGuard no_grad;
  const double norm = std::sqrt(sum_of_squares(grads));
  if (max_norm > 0.0) {
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0)
      for (Tensor g : grads) g.mul_(coef);
  }
  return norm;
}

}  // namespace tcv::ops
