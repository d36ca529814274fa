#include "models/tica.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "layers/collectives.hpp"
#include "layers/linear_backend.hpp"
#include "layers/windowed.hpp"
#include "models/tica_kernels.hpp"

namespace tessera::models {

TicaMode parse_tica_mode(const std::string& text) {
  if (text == "greedy") return TicaMode::greedy;
  if (text == "joint") return TicaMode::joint;
  throw std::invalid_argument("TICA training must be greedy or joint, got '" + text + "'");
}

namespace {

// The decoder has the encoder's geometry and no bias (W2 in the objective).
layers::LocalOptions decoder_options(layers::LocalOptions encoder) {
  encoder.bias = layers::Bias::without;
  return encoder;
}

}  // namespace

template <class T>
struct TicaObjectiveOf<T>::Stage {
  Stage(Sequential<T>& model, const ProcessGrid& grid, std::size_t encoder_index, const layers::LocalOptions& options,
        std::uint64_t seed)
      : encoder(encoder_index),
        pool(encoder_index + 1),
        decoder(decoder_options(options), model.shape(encoder), seed),
        x_hat(layers::make_input(grid, model.shape(encoder), decoder, "tessera::tica::x_hat")),
        d_x_hat(layers::make_input(grid, model.shape(encoder), decoder, "tessera::tica::d_x_hat")),
        dh(grid, model.shape(pool), HaloWidths{}, "tessera::tica::dh") {
    decoder.place(model.activation(pool).owned_box());
  }

  std::size_t encoder, pool;  // layer indices: local, l2pool
  layers::LocallyConnected2d<T> decoder;
  layers::Tensor<T> x_hat, d_x_hat, dh;
};

template <class T>
TicaObjectiveOf<T>::TicaObjectiveOf(Sequential<T>& model, const ProcessGrid& grid, std::uint64_t seed,
                                    TicaSettings settings)
    : model_(model), grid_(grid), settings_(settings) {
  if (!(settings.lambda >= 0)) throw std::invalid_argument("TICA: lambda must be >= 0");
  // bf16 has been validated on the CPU backend only: a build whose GEMMs have no bf16 path
  // (CUDA: cuBLAS) refuses it here, as its convolution and linear layers do.
  layers::require_gemm_precision<T>(*layers::make_linear_backend(), "reconstruction TICA");
  if (settings.stage_steps < 0) throw std::invalid_argument("TICA: steps per stage must be >= 0");
  for (std::size_t i = 0; i < model.size(); ++i) {
    auto* local = dynamic_cast<layers::LocallyConnected2d<T>*>(&model.layer(i));
    if (!local) continue;
    if (i + 1 == model.size() || model.layer(i + 1).kind() != "l2pool")
      throw std::invalid_argument("TICA: layer " + std::to_string(i) +
                                  " (local) must be followed by l2pool, the fixed pooling H of the sparsity penalty");
    if (&model.activation(i).grid() != &grid)
      throw std::invalid_argument("TICA: layer " + std::to_string(i) + " (local) is not on the model's grid");
    stages_.push_back(std::make_unique<Stage>(model, grid, i, local->local_options(),
                                              layer_seed(seed, model.size() + stages_.size())));
  }
  if (stages_.empty())
    throw std::invalid_argument("TICA needs a model with at least one stage local(...),l2pool(...) (e.g. le2012)");
  // The objective reads the stages' activations between the model's passes.
  if (model.passes() != Passes::training_with_activations_kept)
    throw std::logic_error("TICA: build the model with Passes::training_with_activations_kept");
}

template <class T>
TicaObjectiveOf<T>::~TicaObjectiveOf() = default;

template <class T>
std::vector<std::size_t> TicaObjectiveOf<T>::stages_at(std::int64_t step, std::int64_t total) const {
  std::vector<std::size_t> all(stages_.size());
  for (std::size_t s = 0; s < all.size(); ++s) all[s] = s;
  if (settings_.mode == TicaMode::joint) return all;
  const auto count = static_cast<std::int64_t>(stages_.size());
  const std::int64_t share =
      settings_.stage_steps > 0 ? settings_.stage_steps : std::max<std::int64_t>((total + count - 1) / count, 1);
  const std::int64_t stage = std::clamp<std::int64_t>((step - 1) / share, 0, count - 1);
  return {static_cast<std::size_t>(stage)};
}

template <class T>
TicaTerms TicaObjectiveOf<T>::gradients(const std::vector<std::size_t>& stages) {
  return run(stages, true);
}
template <class T>
TicaTerms TicaObjectiveOf<T>::evaluate(const std::vector<std::size_t>& stages) {
  return run(stages, false);
}

template <class T>
TicaTerms TicaObjectiveOf<T>::run(const std::vector<std::size_t>& chosen, bool backward) {
  if (chosen.empty()) throw std::invalid_argument("TICA: no stage to train");
  std::vector<Stage*> stages;
  for (std::size_t s : chosen) stages.push_back(stages_.at(s).get());
  std::sort(stages.begin(), stages.end(), [](const Stage* a, const Stage* b) { return a->encoder < b->encoder; });
  const std::size_t top = stages.back()->pool;
  const std::size_t lowest = settings_.mode == TicaMode::joint ? 0 : stages.front()->encoder;
  const double samples = static_cast<double>(model_.shape(0)[N]);
  const auto per_sample = static_cast<float>(1.0 / samples);

  model_.forward_through(model_.input(), top);
  double sums[2] = {0, 0};  // squared reconstruction error, pooled activity
  for (Stage* s : stages) {
    s->decoder.transpose_forward(model_.activation(s->pool), s->x_hat);
    sums[0] += tica::squared_error(s->x_hat.owned(), model_.activation(s->encoder).owned(), s->d_x_hat.owned(),
                                   per_sample);
    sums[1] += tica::cell_sum(model_.activation(s->pool + 1).owned());
  }
  layers::Collectives(grid_).allreduce_sum(sums, 2, layers::SumGroup::all);
  TicaTerms terms;
  terms.reconstruction = sums[0] / samples;
  terms.sparsity = sums[1] / samples;
  terms.objective = terms.reconstruction + settings_.lambda * terms.sparsity;
  if (!backward) return terms;

  auto stage_with = [&](std::size_t layer, std::size_t Stage::*role) -> Stage* {
    for (Stage* s : stages)
      if (s->*role == layer) return s;
    return nullptr;
  };
  const auto sparsity_gradient = static_cast<float>(settings_.lambda / samples);
  for (std::size_t i = top + 1; i-- > lowest;) {
    if (Stage* s = stage_with(i, &Stage::pool)) {
      // d/d(pooled) of lambda/N sum sqrt(eps + H h^2), plus what the layers above sent down.
      if (i == top) model_.gradient(i + 1).fill(sparsity_gradient);
      else tica::add_constant(model_.gradient(i + 1).owned(), sparsity_gradient);
      model_.layer(i).backward(model_.gradient(i + 1), model_.gradient(i));
      // The reconstruction's share of d/dh: W2 d(x_hat); and W2's own gradient.
      s->decoder.transpose_backward(model_.activation(i), s->d_x_hat, s->dh);
      tica::add_scaled(model_.gradient(i).owned(), s->dh.owned(), 1.0f);
      continue;
    }
    // Nothing reads the gradient below the lowest layer trained: it adds its weights' alone.
    if (i == lowest) model_.layer(i).backward_parameters(model_.gradient(i + 1), model_.gradient(i));
    else model_.layer(i).backward(model_.gradient(i + 1), model_.gradient(i));
    // Joint: the stage input is also the reconstruction's target, d/dx ||x_hat - x||^2 (not
    // below the lowest layer trained: nothing reads that gradient).
    if (Stage* s = stage_with(i, &Stage::encoder); s && i > lowest)
      tica::add_scaled(model_.gradient(i).owned(), s->d_x_hat.owned(), -1.0f);
  }
  return terms;
}

template <class T>
std::vector<layers::Parameter<T>*> TicaObjectiveOf<T>::trained_parameters(const std::vector<std::size_t>& chosen) {
  std::vector<layers::Parameter<T>*> out;
  std::size_t top = 0;
  for (std::size_t s : chosen) top = std::max(top, stages_.at(s)->pool);
  for (std::size_t i = 0; i <= top; ++i) {
    const bool trained =
        settings_.mode == TicaMode::joint ||
        std::any_of(chosen.begin(), chosen.end(), [&](std::size_t s) { return stages_.at(s)->encoder == i; });
    if (!trained) continue;
    for (layers::Parameter<T>* p : model_.layer(i).params()) out.push_back(p);
  }
  for (std::size_t s : chosen)
    for (layers::Parameter<T>* p : stages_.at(s)->decoder.params()) out.push_back(p);
  return out;
}

template <class T>
NamedParameters<T> TicaObjectiveOf<T>::decoder_params() {
  NamedParameters<T> out;
  for (std::size_t s = 0; s < stages_.size(); ++s)
    for (layers::Parameter<T>* p : stages_[s]->decoder.params())
      out.emplace_back(std::to_string(model_.size() + s), p);
  return out;
}

template <class T>
void TicaObjectiveOf<T>::set_halo_config(const layers::WindowedConfig& config) {
  for (auto& s : stages_) s->decoder.set_halo_config(config);
}

template <class T>
std::string TicaObjectiveOf<T>::describe() const {
  std::ostringstream out;
  out << "reconstruction TICA, lambda " << settings_.lambda << ", "
      << (settings_.mode == TicaMode::greedy ? "greedy" : "joint") << " over " << stages_.size() << " stage"
      << (stages_.size() == 1 ? "" : "s") << " (local layers";
  for (std::size_t s = 0; s < stages_.size(); ++s) out << (s == 0 ? " " : ", ") << stages_[s]->encoder;
  out << "; decoders are /params/" << model_.size() << (stages_.size() > 1 ? "..." : "") << ")";
  return out.str();
}

template class TicaObjectiveOf<float>;
template class TicaObjectiveOf<bf16>;

}  // namespace tessera::models
