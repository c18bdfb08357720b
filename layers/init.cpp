#include "layers/init.h"

#include <cmath>

#include "engine/autograd.h"
#include "layers/batch_norm.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/module.h"

namespace tcv::nn::init {

namespace {
thread_local bool skip_init = false;
}  // namespace

SkipInitGuard::SkipInitGuard() : previous_(skip_init) {
  skip_init = true;
}
SkipInitGuard::~SkipInitGuard() {
  skip_init = previous_;
}
bool SkipInitGuard::active() {
  return skip_init;
}

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t) {
  TCV_CHECK(t.dim() >= 2, "[init] fan in and fan out need a tensor of 2 or more dims, got ",
            t.shape_str());
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::linear:
    case Nonlinearity::sigmoid:
      return 1.0;
    case Nonlinearity::tanh:
      return 5.0 / 3.0;
    case Nonlinearity::relu:
      return std::sqrt(2.0);
    case Nonlinearity::leaky_relu:
      return std::sqrt(2.0 / (1.0 + param * param));
  }
  return 1.0;
}

void uniform_(const Tensor& t, double low, double high, Generator* gen) {
  if (skip_init) return;
  NoGradGuard no_grad;
  Tensor h = t;
  tcv::uniform_(h, low, high, gen);
}

void normal_(const Tensor& t, double mean, double std, Generator* gen) {
  if (skip_init) return;
  NoGradGuard no_grad;
  Tensor h = t;
  tcv::normal_(h, mean, std, gen);
}

void constant_(const Tensor& t, double value) {
  if (skip_init) return;
  Tensor h = t;
  h.fill_(value);
}
void zeros_(const Tensor& t) {
  constant_(t, 0.0);
}
void ones_(const Tensor& t) {
  constant_(t, 1.0);
}

namespace {
double kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity) {
  const auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  const int64_t fan = mode == FanMode::fan_in ? fan_in : fan_out;
  TCV_CHECK(fan > 0, "[init] kaiming initialisation of an empty tensor ", t.shape_str());
  return calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan));
}
}  // namespace

void kaiming_uniform_(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity,
                      Generator* gen) {
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nonlinearity);
  init::uniform_(t, -bound, bound, gen);
}

void kaiming_normal_(const Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity,
                     Generator* gen) {
  init::normal_(t, 0.0, kaiming_std(t, a, mode, nonlinearity), gen);
}

void xavier_uniform_(const Tensor& t, double gain, Generator* gen) {
  const auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  init::uniform_(t, -bound, bound, gen);
}

void xavier_normal_(const Tensor& t, double gain, Generator* gen) {
  const auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  init::normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)), gen);
}

void init_cnn_weights(Module& model, double linear_std) {
  for (auto& [name, m] : model.named_modules()) {
    if (auto* conv = dynamic_cast<Conv2d*>(m)) {
      init::kaiming_normal_(conv->weight, 0.0, FanMode::fan_out, Nonlinearity::relu);
      if (conv->bias.defined()) init::zeros_(conv->bias);
    } else if (auto* bn = dynamic_cast<BatchNorm2d*>(m)) {
      if (bn->weight.defined()) init::ones_(bn->weight);
      if (bn->bias.defined()) init::zeros_(bn->bias);
    } else if (auto* fc = dynamic_cast<Linear*>(m); fc && linear_std > 0) {
      init::normal_(fc->weight, 0.0, linear_std);
      if (fc->bias.defined()) init::zeros_(fc->bias);
    }
  }
}

}  // namespace tcv::nn::init
