// Trains y = 2x + 1 with tcv's autograd: prints "ok" when the fit is right.
#include <cmath>
#include <cstdio>

#include <engine/autograd.h>
#include <engine/ops.h>
#include <engine/rng.h>

int main() {
  using namespace tcv;
  Tensor x = arange(0.0, 1.0, 0.1, {.dtype = DType::f32}).reshape({-1, 1});
  Tensor y = ops::add(ops::mul(x, 2.0), 1.0);
  Tensor w = zeros({1, 1}, {.requires_grad = true});
  Tensor b = zeros({1}, {.requires_grad = true});
  for (int step = 0; step < 2000; ++step) {
    Tensor loss = ops::mean(ops::square(ops::sub(ops::add(ops::mul(x, w), b), y)));
    w.set_grad(Tensor());
    b.set_grad(Tensor());
    loss.backward();
    NoGradGuard ng;
    w.add_(w.grad(), -0.5);
    b.add_(b.grad(), -0.5);
  }
  const double wv = w.item(), bv = b.item();
  std::printf("w=%.4f b=%.4f\n", wv, bv);
  if (std::abs(wv - 2.0) > 1e-2 || std::abs(bv - 1.0) > 1e-2) return 1;
  std::printf("ok\n");
  return 0;
}
