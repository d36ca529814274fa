#include "models/optimizer_factory.hpp"

#include <sstream>
#include <stdexcept>

#include "layers/optim/optim.hpp"

namespace tessera::models {

std::vector<std::string> optimizer_names() { return {"adam", "adamw", "lars", "sgd"}; }

template <class T>
std::unique_ptr<layers::Optimizer<T>> make_optimizer(const OptimizerSettings& s, std::vector<layers::Parameter<T>*> params,
                                                     const ProcessGrid& grid) {
  if (s.warmup < 0) throw std::invalid_argument("--warmup must be 0 or more steps, got " + std::to_string(s.warmup));
  const layers::LrSchedule schedule = layers::LrSchedule::linear_warmup(s.lr, s.warmup);
  if (s.kind == "sgd") {
    layers::SgdOptions o;
    o.lr = schedule, o.momentum = s.momentum, o.weight_decay = s.weight_decay;
    return std::make_unique<layers::Sgd<T>>(std::move(params), o);
  }
  if (s.kind == "adam" || s.kind == "adamw") {
    if (s.momentum != 0)
      throw std::invalid_argument(s.kind + " takes no --momentum (its betas are PyTorch's 0.9, 0.999)");
    layers::AdamOptions o;
    o.lr = schedule, o.weight_decay = s.weight_decay, o.decoupled_weight_decay = s.kind == "adamw";
    return std::make_unique<layers::Adam<T>>(std::move(params), o);
  }
  if (s.kind == "lars") {
    layers::LarsOptions o;
    o.lr = schedule, o.momentum = s.momentum, o.weight_decay = s.weight_decay;
    return std::make_unique<layers::Lars<T>>(std::move(params), grid, o);
  }
  throw std::invalid_argument("unknown optimizer '" + s.kind + "' (known: adam, adamw, lars, sgd)");
}

template std::unique_ptr<layers::Optimizer<float>> make_optimizer<float>(const OptimizerSettings&,
                                                                         std::vector<layers::Parameter<float>*>,
                                                                         const ProcessGrid&);
template std::unique_ptr<layers::Optimizer<bf16>> make_optimizer<bf16>(const OptimizerSettings&,
                                                                       std::vector<layers::Parameter<bf16>*>,
                                                                       const ProcessGrid&);

std::unique_ptr<layers::Optimizer<float>> make_optimizer(const OptimizerSettings& s,
                                                         std::vector<layers::Parameter<float>*> params,
                                                         const ProcessGrid& grid) {
  return make_optimizer<float>(s, std::move(params), grid);
}

std::string describe(const OptimizerSettings& s) {
  std::ostringstream out;
  out << "lr=" << s.lr << ",momentum=" << s.momentum << ",weight_decay=" << s.weight_decay << ",warmup=" << s.warmup;
  return out.str();
}

}  // namespace tessera::models
