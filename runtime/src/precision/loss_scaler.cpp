#include "tenax/loss_scaler.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "tenax/error.hpp"
#include "tenax/log.hpp"

namespace tenax {

void LossScalerConfig::validate() const {
  auto fail = [](const std::string& what) { throw UsageError("loss scaler: " + what); };
  if (!(std::isfinite(initial_scale) && initial_scale > 0)) fail("initial scale must be a finite value > 0");
  if (!(growth_factor > 1)) fail("growth factor must be > 1 (e.g. 2)");
  if (!(backoff_factor > 0 && backoff_factor < 1)) fail("back-off factor must be in (0, 1) (e.g. 0.5)");
  if (growth_interval < 1) fail("growth interval must be >= 1 clean steps (e.g. 1000)");
  if (hysteresis < 1) fail("hysteresis must be >= 1 (1 backs off at every overflow)");
  if (!(min_scale > 0 && min_scale <= initial_scale)) fail("minimum scale must be in (0, initial scale]");
}

DynamicLossScaler::DynamicLossScaler(LossScalerConfig config)
    : config_(config), scale_(config.initial_scale), hysteresis_tracker_(config.hysteresis) {
  config_.validate();
}

bool DynamicLossScaler::update(bool found_overflow) {
  if (found_overflow) {
    ++skipped_;
    growth_tracker_ = 0;
    --hysteresis_tracker_;
    // Hysteresis: isolated overflows (one bad batch) skip the step without giving up precision; repeated ones back off.
    if (hysteresis_tracker_ <= 0) {
      scale_ = std::max(scale_ * config_.backoff_factor, config_.min_scale);
      TENAX_LOG(Info, "precision") << "gradient overflow: loss scale backed off to " << scale_;
    } else {
      TENAX_LOG(Info, "precision") << "gradient overflow: step skipped, loss scale kept at " << scale_;
    }
    return true;
  }
  if (++growth_tracker_ == config_.growth_interval) {
    growth_tracker_ = 0;
    hysteresis_tracker_ = config_.hysteresis;
    scale_ *= config_.growth_factor;
  }
  return false;
}

void DynamicLossScaler::restore(const State& s) {
  if (!(std::isfinite(s.scale) && s.scale > 0) || s.growth_tracker < 0 || s.skipped < 0)
    throw UsageError("loss scaler: restored state is invalid (scale " + std::to_string(s.scale) +
                     "); the checkpoint is corrupt or from another program");
  scale_ = s.scale;
  growth_tracker_ = s.growth_tracker;
  hysteresis_tracker_ = s.hysteresis_tracker;
  skipped_ = s.skipped;
}

bool agree_on_overflow(Communicator& group, float local_flag) {
  float flag = local_flag != 0.0f ? 1.0f : 0.0f;
  group.all_reduce(&flag, &flag, 1, DType::F32, ReduceOp::Max);
  return flag != 0.0f;
}

}  // namespace tenax
