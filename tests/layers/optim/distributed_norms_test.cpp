// Norms of shared parameters on every process grid the rank count allows: a tiled
// parameter cut over the spatial group has the norm of the whole tensor (summed over the
// spatial group only — ranks of the sample group hold copies), a replicated one its local
// norm; LARS on the tiled parameter makes the same update, step after step, as LARS on the
// unsplit parameter on one rank; global_grad_norm is the same on every rank and equals the
// norm of all gradients written out in full.
#include <gtest/gtest.h>

#include <mpi.h>

#include <cmath>
#include <string>
#include <vector>

#include "distarray/distribution.hpp"
#include "layers/optim/lars.hpp"
#include "layers/optim/norms.hpp"
#include "tests/layers/optim/parameter_values.hpp"
#include "tests/support/grid_cases.hpp"

namespace tessera::layers {
namespace {

using testing::all_grids;
using testing::host_values;
using testing::Values;
using testing::world_size;

// A locally connected layer's untied weight: one (5 x 3) filter per output row, 9 rows,
// cut by rows over the spatial group; plus a replicated bias.
const std::vector<std::int64_t> kWeightShape{9, 5, 3};
const std::vector<std::int64_t> kBiasShape{5};
constexpr std::int64_t kRowSize = 5 * 3;
constexpr int kSteps = 4;

struct SpatialPlace {
  int rank = 0, size = 1;
  explicit SpatialPlace(const ProcessGrid& grid) {
    MPI_Comm_rank(grid.spatial_comm(), &rank);
    MPI_Comm_size(grid.spatial_comm(), &size);
  }
};

Values slice(const Values& whole, const Block& rows) {
  return Values(whole.begin() + rows.begin * kRowSize, whole.begin() + rows.end * kRowSize);
}

// This rank's rows of the weight, as a tiled Parameter.
template <class T>
Parameter<T> tiled_weight(const Block& rows) {
  Parameter<T> p;
  p.name = "weight";
  p.shape = kWeightShape;
  p.offset = {rows.begin, 0, 0};
  p.extent = {rows.end - rows.begin, kWeightShape[1], kWeightShape[2]};
  p.sharing = Sharing::tiled;
  p.value = typename Parameter<T>::View("tiled.weight", Parameter<T>::element_count(p.extent));
  p.grad = typename Parameter<T>::View("tiled.weight.grad", Parameter<T>::element_count(p.extent));
  return p;
}

double squared(const Values& v) {
  double s = 0;
  for (double e : v) s += e * e;
  return s;
}

template <class T>
class TiledNorms : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TiledNorms, ElementTypes);

TYPED_TEST(TiledNorms, LarsOnATiledParameterMatchesTheUnsplitOne) {
  using T = TypeParam;
  for (const GridDims& dims : all_grids(world_size())) {
    SCOPED_TRACE(format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    const SpatialPlace place(grid);
    const Block rows = balanced_block(kWeightShape[0], place.size, place.rank);

    // Every rank holds the unsplit parameters too, to run the one-rank optimizer beside.
    Parameter<T> whole_weight("weight", kWeightShape, "whole"), whole_bias("bias", kBiasShape, "whole");
    Parameter<T> part_weight = tiled_weight<T>(rows), part_bias("bias", kBiasShape, "part");
    const Values w0 = testing::rounded_to<T>(testing::random_values(whole_weight.local_size(), 17));
    const Values b0 = testing::rounded_to<T>(testing::random_values(whole_bias.local_size(), 18));
    testing::set_values(whole_weight.value, w0);
    testing::set_values(part_weight.value, slice(w0, rows));
    testing::set_values(whole_bias.value, b0);
    testing::set_values(part_bias.value, b0);

    const ProcessGrid alone(MPI_COMM_SELF, {1, 1, 1});
    const LarsOptions options{.lr = 0.4, .momentum = 0.9, .weight_decay = 1e-2, .eta = 0.01};
    Lars<T> whole({&whole_weight, &whole_bias}, alone, options);
    Lars<T> split({&part_weight, &part_bias}, grid, options);

    for (int step = 1; step <= kSteps; ++step) {
      const Values g = testing::rounded_to<T>(testing::random_values(whole_weight.local_size(), 40 + step));
      const Values gb = testing::rounded_to<T>(testing::random_values(whole_bias.local_size(), 80 + step));
      testing::set_values(whole_weight.grad, g);
      testing::set_values(part_weight.grad, slice(g, rows));
      testing::set_values(whole_bias.grad, gb);
      testing::set_values(part_bias.grad, gb);
      whole.step();
      split.step();
      EXPECT_NEAR(split.trust_ratios()[0], whole.trust_ratios()[0], 1e-12 * whole.trust_ratios()[0]) << step;
      EXPECT_LE(testing::max_relative_error(host_values(part_weight.value), slice(host_values(whole_weight.value), rows)),
                testing::kOptimizerTolerance<T>)
          << "weight after step " << step;
      EXPECT_LE(testing::max_relative_error(host_values(part_bias.value), host_values(whole_bias.value)),
                testing::kOptimizerTolerance<T>)
          << "bias after step " << step;
    }
  }
}

TYPED_TEST(TiledNorms, TiledNormsSumTheSpatialGroupAndReplicatedOnesStayLocal) {
  using T = TypeParam;
  for (const GridDims& dims : all_grids(world_size())) {
    SCOPED_TRACE(format_grid(dims));
    const ProcessGrid grid(MPI_COMM_WORLD, dims);
    const SpatialPlace place(grid);
    const Block rows = balanced_block(kWeightShape[0], place.size, place.rank);
    Parameter<T> weight = tiled_weight<T>(rows), bias("bias", kBiasShape, "layer");
    const std::int64_t weight_size = Parameter<T>::element_count(kWeightShape);
    const Values w = testing::rounded_to<T>(testing::random_values(weight_size, 1));
    const Values g = testing::rounded_to<T>(testing::random_values(weight_size, 2));
    const Values gb = testing::rounded_to<T>(testing::random_values(bias.local_size(), 3));
    testing::set_values(weight.value, slice(w, rows));
    testing::set_values(weight.grad, slice(g, rows));
    testing::set_values(bias.grad, gb);

    const std::vector<SquaredNorms> norms = squared_norms<T>({&weight, &bias}, grid);
    EXPECT_NEAR(norms[0].value, squared(w), 1e-12 * squared(w));
    EXPECT_NEAR(norms[0].grad, squared(g), 1e-12 * squared(g));
    EXPECT_NEAR(norms[1].grad, squared(gb), 1e-12 * squared(gb));
    const double total = std::sqrt(squared(g) + squared(gb));
    EXPECT_NEAR(global_grad_norm<T>({&weight, &bias}, grid), total, 1e-12 * total);
  }
}

}  // namespace
}  // namespace tessera::layers
