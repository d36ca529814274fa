#pragma once
// Parameter: one learnable tensor of a layer (a weight or a bias) with its gradient.
//
// A parameter is either replicated — every rank holds the whole tensor, as for a
// convolution's filters — or tiled — each rank holds only the part that belongs to the
// output positions it owns, as for a locally connected layer's untied weights. After the
// backward pass a replicated parameter's gradient is summed over every rank (its
// contributions come from every tile of every sample); a tiled parameter's gradient is
// summed only over the sample group (ranks holding the same tile of other samples), as is
// a replicated parameter marked head_replica.
// Optimizers reduce norms over the same ranks that share the tensor.
//
// Precision: `value` is what the layer computes with, in the model's element type T.
// `grad` and `master` are always Compute<T> (fp32 for a bf16 model): gradients are summed
// and reduced in fp32, and the optimizer updates the fp32 master weights, then
// refresh_value() rounds them into `value` once per step. For an fp32 model master and
// value are one allocation and refresh_value() does nothing.

#include <Kokkos_Core.hpp>

#include "distarray/bf16.hpp"
#include "distarray/fill.hpp"

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#include "distarray/held_instance.hpp"
#include "distarray/kernel_label.hpp"

namespace tessera {
class ProcessGrid;
}

namespace tessera::layers {

enum class Sharing {
  replicated,  // whole tensor on every rank; gradient allreduced over all ranks
  tiled,       // this rank's slice only; gradient allreduced over the sample group
};

// While a ParameterPlanning scope is alive on this thread, new Parameters record their shape,
// offset and extent but allocate nothing (value and grad stay empty): a model is built once
// this way to learn what it would allocate (models/memory_plan.hpp) before it allocates.
inline bool& parameter_planning_flag() {
  static thread_local bool planning = false;
  return planning;
}
class ParameterPlanning {
 public:
  ParameterPlanning() : previous_(parameter_planning_flag()) { parameter_planning_flag() = true; }
  ~ParameterPlanning() { parameter_planning_flag() = previous_; }
  ParameterPlanning(const ParameterPlanning&) = delete;
  ParameterPlanning& operator=(const ParameterPlanning&) = delete;

 private:
  bool previous_;
};

// to(i) = from(i), converted (bf16 <-> fp32: rounded to nearest even one way, exact the other).
template <class From, class To>
struct CopyElements {
  From from;
  To to;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    to(i) = static_cast<typename To::value_type>(from(i));
  }
};

template <class T>
struct Parameter {
  using View = Kokkos::View<T*, Kokkos::DefaultExecutionSpace::memory_space>;
  using MasterView = Kokkos::View<Compute<T>*, Kokkos::DefaultExecutionSpace::memory_space>;
  static constexpr bool kSeparateMaster = !std::is_same_v<T, Compute<T>>;

  std::string name;                   // "weight" or "bias": the state_dict key's last part
  std::vector<std::int64_t> shape;    // global shape (e.g. OIHW for a conv weight)
  std::vector<std::int64_t> offset;   // where this rank's slice starts in the global tensor
  std::vector<std::int64_t> extent;   // this rank's slice; == shape when replicated
  Sharing sharing = Sharing::replicated;
  // A replicated parameter of a layer whose input lives on a head grid (linear after gap or
  // linear): each of the ph*pw replicas of a spatial group computes the same, whole
  // gradient of its samples, so reduce_gradients sums it over the sample group only (over
  // all ranks it would count it ph*pw times). Set by the layer's forward.
  bool head_replica = false;
  // The grid of the layer that owns it, when the model runs layers on more than one layout
  // (regrid, layers/regrid.hpp): its gradient is summed over that grid's groups
  // (gradient_group.hpp). Null: the grid the reduction is given. Set by the model.
  const ProcessGrid* grid = nullptr;
  View value;                         // this rank's elements, row-major over `extent`
  MasterView grad;                    // same layout; backward() adds into it
  MasterView master;                  // the optimizer's copy; aliases value when T is Compute<T>

  Parameter() = default;
  Parameter(std::string param_name, std::vector<std::int64_t> global_shape, const std::string& owner)
      : name(std::move(param_name)), shape(global_shape), offset(global_shape.size(), 0), extent(global_shape),
        value(owner + "." + name, allocated_count(global_shape)),
        grad(owner + "." + name + ".grad", allocated_count(global_shape)),
        master(make_master(value, owner + "." + name + ".master")) {}

  // A tiled parameter: this rank's block [offset, offset + extent) of a tensor of global
  // shape `global_shape`, held row-major over `extent`.
  static Parameter tiled(std::string param_name, std::vector<std::int64_t> global_shape,
                         std::vector<std::int64_t> block_offset, std::vector<std::int64_t> block_extent,
                         const std::string& owner) {
    Parameter p;
    p.name = std::move(param_name);
    p.shape = std::move(global_shape);
    p.offset = std::move(block_offset);
    p.extent = std::move(block_extent);
    p.sharing = Sharing::tiled;
    p.value = View(owner + "." + p.name, allocated_count(p.extent));
    p.grad = MasterView(owner + "." + p.name + ".grad", allocated_count(p.extent));
    p.master = make_master(p.value, owner + "." + p.name + ".master");
    return p;
  }

  static std::size_t element_count(const std::vector<std::int64_t>& dims) {
    std::size_t n = 1;
    for (auto d : dims) n *= static_cast<std::size_t>(d);
    return n;
  }
  static std::size_t allocated_count(const std::vector<std::int64_t>& dims) {
    return parameter_planning_flag() ? 0 : element_count(dims);
  }
  // Elements this rank holds (or, built under ParameterPlanning, would hold).
  std::size_t local_elements() const { return element_count(extent); }
  std::size_t local_size() const { return value.extent(0); }
  void zero_grad() const { tessera::fill(grad, Compute<T>(0)); }

  // The fp32 master as everything that updates, reads or saves it must see it: `master` in a
  // bf16 model, `value` itself in an fp32 one — read through here so that code assigning
  // `value` directly (tests, hand-built parameters) still has one array for both.
  const MasterView& master_values() const {
    if constexpr (kSeparateMaster) return master;
    else return value;
  }

  // After the optimizer wrote `master`: the layer's copy follows (rounded to T). Every step
  // in a bf16 model: a functor on the held instance, nothing allocated per call on CUDA.
  void refresh_value() const {
    if constexpr (kSeparateMaster) copy_elements("param.refresh", master, value);
  }
  // After something wrote `value` (initialisation, a checkpoint read in T): master follows.
  void adopt_value() const {
    if constexpr (kSeparateMaster) copy_elements("param.adopt", value, master);
  }

 private:
  template <class From, class To>
  static void copy_elements(const char* label, const From& from, const To& to) {
    using Exec = Kokkos::DefaultExecutionSpace;
    Kokkos::parallel_for(kernel_label(label),
                         Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>(
                             held_instance<Exec>(), 0, static_cast<std::int64_t>(to.extent(0))),
                         CopyElements<From, To>{from, to});
  }
  static MasterView make_master(const View& value, const std::string& label) {
    if constexpr (kSeparateMaster) return MasterView(label, value.extent(0));
    else return value;
  }
};

}  // namespace tessera::layers
