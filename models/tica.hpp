#pragma once
// Reconstruction TICA (Le et al. 2011, "ICA with reconstruction cost"; the objective of
// Le et al. 2012) for a network of stages local(...) -> l2pool(eps=...) [-> lcn ...]:
//
//   J = 1/N sum_i [ ||W2 W1^T x_i - x_i||^2 + lambda sum_j sqrt(eps + H_j (W1^T x_i)^2) ]
//
// per stage, with x the stage's input, W1^T x the stage's locally connected layer (its
// bias included: the encoder is affine), H the fixed L2 pooling after it (the model's
// l2pool; eps is its option) and W2 a decoder this objective owns: a second locally
// connected map back to the stage's input, with the encoder's connectivity and tiling —
// LocallyConnected2d::transpose_forward of a bias-free layer of the same geometry. Its
// weights sit with the feature positions, as W1's do, so a rank holds its own positions'
// decoder too; the halo of the reconstruction is added into its owners.
//
// Greedy (layer-wise): the steps are split evenly over the stages in order; a step trains
// one stage's W1 and W2 on the output of the stages below, which stay fixed (the optimizer
// leaves their values and state alone). Joint: every stage's J at once, each stage's
// gradient flowing down through the layers below it — including through the stage input
// x that its reconstruction term aims at.
//
// The decoders are parameters like the model's: in checkpoints /params/<size + s>/weight
// for stage s (size: the model's layer count), so a run resumes on any grid.
//
// T is the model's element type: float, or bf16 (--precision bf16). In bf16 the decoder is
// a bf16 local layer (fp32 master and gradient, as every bf16 parameter), x_hat and the
// gradients sent down the model are bf16 activations; the objective's differences,
// squares and sums and the gradient arithmetic are fp32 per cell, summed in double, and
// each stored bf16 cell is rounded once (models/tica_kernels.hpp).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/locally_connected.hpp"
#include "models/sequential.hpp"

namespace tessera::models {

enum class TicaMode { greedy, joint };

// "greedy" / "joint"; std::invalid_argument for anything else.
TicaMode parse_tica_mode(const std::string& text);

struct TicaSettings {
  double lambda = 0.1;
  TicaMode mode = TicaMode::greedy;
  std::int64_t stage_steps = 0;  // greedy: steps per stage (the last stage takes the rest); 0: an even split
};

// Per-sample means of the two terms over the stages a step trains.
struct TicaTerms {
  double reconstruction = 0;  // 1/N sum_i ||x_hat_i - x_i||^2
  double sparsity = 0;        // 1/N sum_i sum_j sqrt(eps + H_j h_i^2)
  double objective = 0;       // reconstruction + lambda * sparsity
};

template <class T>
class TicaObjectiveOf {
 public:
  // Finds the stages of `model` (every local layer followed by an l2pool) and makes a
  // decoder for each, drawn from `seed` (the same on every grid). Throws
  // std::invalid_argument naming the problem when the model has no such stage, a local
  // layer is not followed by l2pool, or lambda is negative. `model` and `grid` must
  // outlive the objective.
  TicaObjectiveOf(Sequential<T>& model, const ProcessGrid& grid, std::uint64_t seed, TicaSettings settings);
  ~TicaObjectiveOf();
  TicaObjectiveOf(const TicaObjectiveOf&) = delete;
  TicaObjectiveOf& operator=(const TicaObjectiveOf&) = delete;

  std::size_t stages() const { return stages_.size(); }
  const TicaSettings& settings() const { return settings_; }

  // The stages step `step` (1-based) of `total` trains: joint, all; greedy, one — stage s
  // for steps s*k+1 .. (s+1)*k with k = stage_steps (or the even share of `total`), the
  // last stage also for any steps after.
  std::vector<std::size_t> stages_at(std::int64_t step, std::int64_t total) const;

  // Forward from model.input() as it stands, the objective of `stages`, and backward: the
  // local gradient contributions of those stages' encoders and decoders (and, joint, of
  // every layer below) are ADDED to their parameters' gradients (zero them first;
  // reduce_gradients after). Collective over the grid.
  TicaTerms gradients(const std::vector<std::size_t>& stages);
  // The objective alone (no backward).
  TicaTerms evaluate(const std::vector<std::size_t>& stages);

  // The parameters whose gradients gradients(stages) computes: the optimizer updates only
  // these (greedy: the stages' encoders and decoders; joint: every layer up to the top
  // stage too).
  std::vector<layers::Parameter<T>*> trained_parameters(const std::vector<std::size_t>& stages);
  // The decoders' weights with their checkpoint paths: the index model size + stage (the
  // model is a chain, so these follow its own layer indices).
  NamedParameters<T> decoder_params();
  void set_halo_config(const layers::WindowedConfig& config);
  // "reconstruction TICA, lambda 0.1, greedy over 3 stages (local layers 0, 3, 6)"
  std::string describe() const;

 private:
  struct Stage;
  TicaTerms run(const std::vector<std::size_t>& stages, bool backward);

  Sequential<T>& model_;
  const ProcessGrid& grid_;
  TicaSettings settings_;
  std::vector<std::unique_ptr<Stage>> stages_;
};

using TicaObjective = TicaObjectiveOf<float>;

extern template class TicaObjectiveOf<float>;
extern template class TicaObjectiveOf<bf16>;

}  // namespace tessera::models
