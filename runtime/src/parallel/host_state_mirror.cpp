#include <utility>

#include "tenax/model_state.hpp"

namespace tenax {

HostStateMirror::HostStateMirror(std::vector<StateEntry> entries, ExecutionContext& context)
    : ctx_(context), device_(std::move(entries)), host_(device_) {
  storage_.resize(device_.size());
  for (std::size_t i = 0; i < device_.size(); ++i) {
    if (device_[i].device == Device::Host) continue;
    storage_[i].resize(static_cast<std::size_t>(shape_numel(device_[i].shape)) * dtype_size(device_[i].dtype));
    host_[i].data = storage_[i].data();
    host_[i].device = Device::Host;
  }
}

void HostStateMirror::pull() {
  for (std::size_t i = 0; i < device_.size(); ++i)
    if (device_[i].device != Device::Host) ctx_.download(storage_[i].data(), device_[i].data, storage_[i].size());
}

void HostStateMirror::push() {
  for (std::size_t i = 0; i < device_.size(); ++i)
    if (device_[i].device != Device::Host) ctx_.upload(device_[i].data, storage_[i].data(), storage_[i].size());
}

}  // namespace tenax
