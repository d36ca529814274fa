#include "models/optimizer_factory.hpp"

#include <sstream>
#include <stdexcept>

#include "layers/optim/optim.hpp"

namespace tessera::models {

std::vector<std::string> optimizer_names() { return {"adam", "adamw", "lars", "sgd"}; }

std::unique_ptr<layers::Optimizer<float>> make_optimizer(const OptimizerSettings& s,
                                                         std::vector<layers::Parameter<float>*> params,
                                                         const ProcessGrid& grid) {
  if (s.warmup < 0) throw std::invalid_argument("--warmup must be 0 or more steps, got " + std::to_string(s.warmup));
  const layers::LrSchedule schedule = layers::LrSchedule::linear_warmup(s.lr, s.warmup);
  if (s.kind == "sgd") {
    layers::SgdOptions o;
    o.lr = schedule, o.momentum = s.momentum, o.weight_decay = s.weight_decay;
    return std::make_unique<layers::Sgd<float>>(std::move(params), o);
  }
  if (s.kind == "adam" || s.kind == "adamw") {
    if (s.momentum != 0)
      throw std::invalid_argument(s.kind + " takes no --momentum (its betas are PyTorch's 0.9, 0.999)");
    layers::AdamOptions o;
    o.lr = schedule, o.weight_decay = s.weight_decay, o.decoupled_weight_decay = s.kind == "adamw";
    return std::make_unique<layers::Adam<float>>(std::move(params), o);
  }
  if (s.kind == "lars") {
    layers::LarsOptions o;
    o.lr = schedule, o.momentum = s.momentum, o.weight_decay = s.weight_decay;
    return std::make_unique<layers::Lars<float>>(std::move(params), grid, o);
  }
  throw std::invalid_argument("unknown optimizer '" + s.kind + "' (known: adam, adamw, lars, sgd)");
}

std::string describe(const OptimizerSettings& s) {
  std::ostringstream out;
  out << "lr=" << s.lr << ",momentum=" << s.momentum << ",weight_decay=" << s.weight_decay << ",warmup=" << s.warmup;
  return out.str();
}

}  // namespace tessera::models
