// Layout-independent parameter initialisation: every element's initial value is a pure function of (seed, parameter
// name, global flat index), so a shard computes exactly the values the single-rank run has at the same positions.
#pragma once

#include <cstdint>

#include "tenax/model_state.hpp"

namespace tenax::detail {

// Writes the initial values of this rank's shard of `spec` (row-major, shape_numel(spec.shape) floats).
void fill_init_values(const ParameterSpec& spec, std::uint64_t seed, float* out);

}  // namespace tenax::detail
