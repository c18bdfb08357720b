// A custom layer with its own autograd function: Swish with a learnable slope per
// feature, y = x · sigmoid(β·x), its backward written by hand. The program checks
// the gradients against central finite differences in f64, then trains with it.
#include <tcv/nn.h>
#include <tcv/train.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace tcv;

// x (N, F), beta (F). With s = sigmoid(β·x): dy/dx = s + β·x·s·(1 − s) and
// dy/dβ = x²·s·(1 − s), summed over the N rows β was broadcast to. The forward's
// ops record nothing (NoGradGuard): the node that record() adds stands for them,
// keeping what backward needs (SavedTensor::get() throws if it changed in place).
Tensor swish(const Tensor& x, const Tensor& beta) {
  const Tensor y = [&] {
    NoGradGuard no_grad;
    return x * ops::sigmoid(beta * x);
  }();
  autograd::record("swish", {x, beta}, {y},
                   [sx = SavedTensor(x), sb = SavedTensor(beta)](std::vector<Tensor>& grads) {
                     const Tensor x = sx.get(), beta = sb.get(), dy = grads[0];
                     const Tensor s = ops::sigmoid(beta * x), ds = s * (1.0 - s);
                     return std::vector<Tensor>{dy * (s + beta * x * ds),  // one per input
                                                ops::sum(dy * x * x * ds, {0})};
                   });
  return y;
}

struct Swish : nn::Module {
  Tensor beta;  // (features)
  explicit Swish(int64_t features) { beta = register_parameter("beta", ones({features})); }
  Tensor forward(const Tensor& x) override { return swish(x, beta); }
  std::string type_name() const override { return "Swish"; }
};

int main() {
  // 1. d/dθ sum(w · swish(x, β)) against (L(θ + h) − L(θ − h)) / 2h, element by element.
  manual_seed(0);
  Tensor x = randn({4, 3}, {.dtype = DType::f64, .requires_grad = true});
  Tensor beta = uniform({3}, 0.5, 2.0, {.dtype = DType::f64, .requires_grad = true});
  const Tensor w = randn({4, 3}, {.dtype = DType::f64});
  auto loss = [&] { return ops::sum(w * swish(x, beta)); };
  loss().backward();
  double worst = 0.0;
  for (Tensor* t : {&x, &beta}) {
    NoGradGuard no_grad;
    const std::vector<double> analytic = t->grad().to_vector<double>();
    double* p = t->data<double>();
    for (int64_t i = 0; i < t->numel(); ++i) {
      const double keep = p[i], h = 1e-6;
      p[i] = keep + h;
      const double up = loss().item();
      p[i] = keep - h;
      const double down = loss().item();
      p[i] = keep;
      worst = std::max(worst, std::abs((up - down) / (2 * h) - analytic[i]));
    }
  }
  std::printf("largest gradient error against finite differences: %.1e\n", worst);
  if (worst > 1e-6) return 1;

  // 2. A model with the layer learns |p|² for points p in [-2, 2]².
  manual_seed(1);
  nn::Sequential model({std::make_shared<nn::Linear>(2, 32), std::make_shared<Swish>(32),
                        std::make_shared<nn::Linear>(32, 1)});
  train::Adam adam(model.named_parameters(), {.lr = 0.01});
  const Tensor points = uniform({256, 2}, -2.0, 2.0);
  const Tensor target = ops::sum(ops::square(points), {1}, /*keepdim=*/true);  // (256, 1)
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 300; ++step) {
    adam.zero_grad();
    Tensor mse = ops::mse_loss(model(points), target);
    mse.backward();
    adam.step();
    (step == 0 ? first : last) = mse.item();
  }
  std::printf("%s\nmse %.4f -> %.4f\n", model.str().c_str(), first, last);
  return last < 0.05 * first ? 0 : 1;
}
