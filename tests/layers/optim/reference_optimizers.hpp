#pragma once
// The PyTorch update rules written out naively in double precision on the host, one
// element at a time, to check the Kokkos kernels against. Nothing here is shared with the
// code under test.

#include <cmath>
#include <cstddef>
#include <vector>

#include "tests/layers/optim/parameter_values.hpp"

namespace tessera::testing {

// torch.optim.SGD, one parameter tensor.
struct ReferenceSgd {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  ReferenceSgd(double lr_, double momentum_, double dampening_, double weight_decay_, bool nesterov_)
      : lr(lr_), momentum(momentum_), dampening(dampening_), weight_decay(weight_decay_), nesterov(nesterov_) {}
  Values buf;
  bool started = false;

  void step(Values& w, const Values& grad) {
    if (buf.empty()) buf.assign(w.size(), 0.0);
    for (std::size_t i = 0; i < w.size(); ++i) {
      double g = grad[i] + weight_decay * w[i];
      if (momentum != 0) {
        buf[i] = started ? momentum * buf[i] + (1 - dampening) * g : g;
        g = nesterov ? g + momentum * buf[i] : buf[i];
      }
      w[i] -= lr * g;
    }
    started = true;
  }
};

// torch.optim.Adam / AdamW (amsgrad off), one parameter tensor.
struct ReferenceAdam {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;
  ReferenceAdam(double lr_, double beta1_, double beta2_, double eps_, double weight_decay_, bool decoupled_)
      : lr(lr_), beta1(beta1_), beta2(beta2_), eps(eps_), weight_decay(weight_decay_), decoupled(decoupled_) {}
  Values m, v;
  int t = 0;

  void step(Values& w, const Values& grad) {
    if (m.empty()) m.assign(w.size(), 0.0), v.assign(w.size(), 0.0);
    ++t;
    const double bc1 = 1 - std::pow(beta1, t), bc2 = 1 - std::pow(beta2, t);
    for (std::size_t i = 0; i < w.size(); ++i) {
      double g = grad[i];
      if (decoupled)
        w[i] *= 1 - lr * weight_decay;
      else
        g += weight_decay * w[i];
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
      w[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    }
  }
};

// You et al. 2017, Algorithm 1, for one whole (unsplit) parameter tensor; `adapted` false
// is the bias treatment: trust 1, no weight decay.
struct ReferenceLars {
  double lr, momentum, weight_decay, eta;
  bool adapted;
  ReferenceLars(double lr_, double momentum_, double weight_decay_, double eta_, bool adapted_)
      : lr(lr_), momentum(momentum_), weight_decay(weight_decay_), eta(eta_), adapted(adapted_) {}
  Values v;

  static double norm(const Values& x) {
    double s = 0;
    for (double e : x) s += e * e;
    return std::sqrt(s);
  }

  void step(Values& w, const Values& grad) {
    if (v.empty()) v.assign(w.size(), 0.0);
    const double wn = norm(w), gn = norm(grad);
    const double trust = adapted && wn > 0 && gn > 0 ? eta * wn / (gn + weight_decay * wn) : 1.0;
    const double wd = adapted ? weight_decay : 0.0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      v[i] = momentum * v[i] + lr * trust * (grad[i] + wd * w[i]);
      w[i] -= v[i];
    }
  }
};

}  // namespace tessera::testing
