// Dynamic loss scaling for fp16 training, and the cross-rank agreement on overflow.
//
// The scaler follows the usual recipe (Megatron's DynamicGradScaler):
//   - start at initial_scale (2^16);
//   - a step whose gradients contain inf/NaN on ANY rank is skipped; each such step decrements a hysteresis counter
//     and, once it reaches zero, multiplies the scale by backoff_factor (0.5), never below min_scale;
//   - after growth_interval consecutive clean steps the scale is multiplied by growth_factor (2) and the hysteresis
//     counter is restored.
// Every rank must feed update() the SAME decision, which is what agree_on_overflow() provides: ranks hold different
// shards of the gradients (tensor/pipeline parallel, ZeRO), so only a reduction over all of them sees every overflow.
#pragma once

#include "tenax/communicator.hpp"

namespace tenax {

struct LossScalerConfig {
  float initial_scale = 65536.0f;
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int growth_interval = 1000;
  int hysteresis = 2;
  float min_scale = 1.0f;

  // Throws UsageError naming the field and the allowed range.
  void validate() const;
};

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(LossScalerConfig config = {});

  float scale() const { return scale_; }
  float inverse_scale() const { return 1.0f / scale_; }
  // Applies one step's agreed decision. Returns true when the step must be skipped (overflow).
  bool update(bool found_overflow);

  long skipped_steps() const { return skipped_; }
  int clean_steps_in_a_row() const { return growth_tracker_; }
  int hysteresis_left() const { return hysteresis_tracker_; }
  const LossScalerConfig& config() const { return config_; }

  // The whole state, for checkpoints.
  struct State {
    float scale;
    int growth_tracker;
    int hysteresis_tracker;
    long skipped;
  };
  State state() const { return {scale_, growth_tracker_, hysteresis_tracker_, skipped_}; }
  void restore(const State& s);

 private:
  LossScalerConfig config_;
  float scale_;
  int growth_tracker_ = 0;
  int hysteresis_tracker_;
  long skipped_ = 0;
};

// Max all-reduce of this rank's non-finite flag (0 or 1) over `group` (use the world): true on every rank if any rank
// saw a non-finite gradient. A collective: every rank of the group calls it once per step.
bool agree_on_overflow(Communicator& group, float local_flag);

}  // namespace tenax
