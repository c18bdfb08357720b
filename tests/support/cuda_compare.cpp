#include "support/cuda_compare.h"

#include "engine/autograd.h"
#include "engine/rng.h"
#include "support/gradcheck.h"

namespace tcv::testing {

int& cuda_compare_count() {
  static int n = 0;
  return n;
}

Tensor random_input(const Shape& shape, uint64_t seed, DType dtype, bool requires_grad, double lo,
                    double hi) {
  Generator g(seed);
  Tensor t =
      is_floating(dtype)
          ? uniform(shape, lo, hi, {.dtype = DType::f64}, &g).to(dtype)
          : randint(0, dtype == DType::b8 ? 2 : 100, shape, {.dtype = DType::i64}, &g).to(dtype);
  if (requires_grad && is_floating(dtype)) t.set_requires_grad(true);
  return t;
}

namespace {

/// A leaf copy of t on `device`, requiring grad like t.
Tensor leaf_on(const Tensor& t, Device device) {
  Tensor c = t.detach().to(device);
  if (c.device() == t.device()) c = c.clone();
  if (t.requires_grad()) c.set_requires_grad(true);
  return c;
}

}  // namespace

void expect_cuda_matches_cpu(const std::string& name, const MultiFn& fn,
                             const std::vector<Tensor>& inputs, CudaCompareOptions opts) {
  const Device gpu(DeviceType::CUDA, 0);
  std::vector<Tensor> in_cpu, in_gpu;
  for (const Tensor& t : inputs) {
    in_cpu.push_back(leaf_on(t, kCPU));
    in_gpu.push_back(leaf_on(t, gpu));
  }
  std::vector<Tensor> out_cpu = fn(in_cpu);
  std::vector<Tensor> out_gpu = fn(in_gpu);
  ASSERT_EQ(out_cpu.size(), out_gpu.size()) << name;
  ++cuda_compare_count();
  for (size_t i = 0; i < out_cpu.size(); ++i) {
    ASSERT_TRUE(out_gpu[i].device().is_cuda()) << name << ": output " << i << " left the GPU";
    expect_close(out_gpu[i].to(kCPU), out_cpu[i], opts.atol, opts.rtol,
                 name + " output " + std::to_string(i));
  }
  if (!opts.grads) return;

  std::vector<Tensor> roots_cpu, roots_gpu, grads_cpu, grads_gpu;
  Generator gen(opts.seed);
  for (size_t i = 0; i < out_cpu.size(); ++i) {
    if (!out_cpu[i].requires_grad() || !is_floating(out_cpu[i].dtype())) continue;
    Tensor w = uniform(out_cpu[i].shape(), -1.0, 1.0, {.dtype = out_cpu[i].dtype()}, &gen);
    roots_cpu.push_back(out_cpu[i]);
    roots_gpu.push_back(out_gpu[i]);
    grads_cpu.push_back(w);
    grads_gpu.push_back(w.to(gpu));
  }
  if (roots_cpu.empty()) return;
  autograd::backward(roots_cpu, grads_cpu);
  autograd::backward(roots_gpu, grads_gpu);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    const Tensor& gc = in_cpu[i].grad();
    const Tensor& gg = in_gpu[i].grad();
    ASSERT_EQ(gc.defined(), gg.defined()) << name << ": gradient of input " << i;
    if (!gc.defined()) continue;
    ASSERT_TRUE(gg.device().is_cuda()) << name << ": gradient of input " << i << " not on the GPU";
    expect_close(gg.to(kCPU), gc, opts.atol, opts.rtol,
                 name + " gradient of input " + std::to_string(i));
  }
}

void expect_cuda_matches_cpu(const std::string& name,
                             const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                             const std::vector<Tensor>& inputs, CudaCompareOptions opts) {
  expect_cuda_matches_cpu(
      name, MultiFn([&fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in)}; }),
      inputs, opts);
}

}  // namespace tcv::testing
