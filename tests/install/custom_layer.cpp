// An out-of-tree program using an installed Tessera (find_package(Tessera)): it registers
// the custom layer of box_blur.hpp under the spec name "blur", builds a model mixing it
// with built-in layers, and checks on whatever ranks it gets that the tiled run equals one
// rank — output and input gradient — and that blur alone matches a naive reference.
// Exit 0: all equal within 1e-5; 1: a difference (printed). docs/custom-layer.md.
#include <cmath>
#include <cstdio>
#include <random>

#include "box_blur.hpp"
#include "distarray/gather_scatter.hpp"
#include "distarray/runtime.hpp"
#include "models/layer_registry.hpp"
#include "models/sequential.hpp"

using namespace tessera;

namespace {

struct Result {
  HostArray<float> output, input_gradient;  // rank 0 of the grid
};

// Forward, then backward of sum(output): dy = 1 everywhere.
Result run(const std::string& spec, const Shape4& shape, const ProcessGrid& grid, const HostArray<float>& x) {
  models::Sequential<float> model(spec, shape, grid, /*seed=*/3);
  scatter(x, model.input());
  const auto& y = model.forward(model.input());
  model.output_gradient().fill(1.0f);
  model.zero_grad();
  const auto& dx = model.backward(model.output_gradient());
  return {gather(y), gather(dx)};
}

double max_difference(const HostArray<float>& a, const HostArray<float>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::fmax(d, std::fabs(double(a.data()[i]) - double(b.data()[i])));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  Runtime runtime(argc, argv);
  // One add() makes "blur" a layer of every spec, like the built-in ones.
  models::LayerRecipe recipe;
  recipe.make = [](std::string_view options, const Shape4&, std::uint64_t) {
    return std::make_unique<blur::BoxBlur>(options);
  };
  models::LayerRegistry::global().add("blur", recipe);

  const Shape4 shape{2, 3, 23, 19};  // odd sizes: uneven tiles on 2 or 3 ranks
  HostArray<float> x("x", shape[0], shape[1], shape[2], shape[3]);
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = uniform(gen);

  const std::string spec = "blur(k=5),conv(out=4,k=3,pad=1),relu,blur(k=3)";
  const ProcessGrid grid(MPI_COMM_WORLD, default_grid(runtime.size()));
  const Result tiled = run(spec, shape, grid, x);
  const Result blurred = run("blur(k=5)", shape, grid, x);
  if (runtime.rank() != 0) return 0;

  const ProcessGrid alone(MPI_COMM_SELF, {1, 1, 1});
  const Result one = run(spec, shape, alone, x);
  double reference_error = 0;  // blur(k=5) alone against the definition, in double
  for (std::int64_t n = 0; n < shape[0]; ++n)
    for (std::int64_t c = 0; c < shape[1]; ++c)
      for (std::int64_t h = 0; h < shape[2]; ++h)
        for (std::int64_t w = 0; w < shape[3]; ++w) {
          double sum = 0;
          for (std::int64_t i = h - 2; i <= h + 2; ++i)
            for (std::int64_t j = w - 2; j <= w + 2; ++j)
              if (i >= 0 && i < shape[2] && j >= 0 && j < shape[3]) sum += x(n, c, i, j);
          reference_error = std::fmax(reference_error, std::fabs(sum / 25 - blurred.output(n, c, h, w)));
        }
  const double output_error = max_difference(tiled.output, one.output);
  const double gradient_error = max_difference(tiled.input_gradient, one.input_gradient);
  std::printf("custom layer on %d rank(s), grid %s: |blur - reference| %.2g, |tiled - one rank| output %.2g, "
              "input gradient %.2g\n", runtime.size(), format_grid(grid.dims()).c_str(), reference_error, output_error,
              gradient_error);
  if (reference_error > 1e-5 || output_error > 1e-5 || gradient_error > 1e-5) {
    std::fprintf(stderr, "custom layer: the tiled result differs\n");
    return 1;
  }
  std::printf("custom layer: ok\n");
  return 0;
}
