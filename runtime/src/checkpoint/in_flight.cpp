// What moves a checkpoint in flight on between public calls: taking the node-local write's result, the blocking settle
// of the node-local tier (wait() and the next save), and progress()'s question posted at one call and answered at the
// next (DeferredAgreement).
#include <chrono>
#include <future>
#include <vector>

#include "checkpoint/checkpointer_state.hpp"
#include "tenax/log.hpp"

namespace tenax {

void Checkpointer::State::finish_local(bool block) {
  if (!local_writing) return;
  if (!block && local_done.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
  LocalResult result;
  try {
    result = local_done.get();
  } catch (const std::exception& e) {
    result.failure = e.what();
  }
  const std::string& failure = result.failure;
  const std::uint64_t step = *local_writing;
  local_writing.reset();
  if (partner && partner->step == step) partner->out = std::move(result.packed);
  if (failure.empty()) {
    last_local = step;
  } else {
    TENAX_LOG(Warn, "ckpt") << "node-local copy of step " << step << " failed on rank " << rank << ": " << failure
                            << " (a restart reads the shared directory instead; fix or unset TENAX_CKPT_LOCAL_DIR)";
  }
}

void Checkpointer::State::settle_local() {
  drain_poll();
  finish_local(true);
  confirm_local();
  finish_partner();
}

void Checkpointer::State::confirm_local() {
  if (!local_unconfirmed) return;
  finish_local(true);
  if (every_rank(world, last_local == local_unconfirmed)) record_local_commit(local_unconfirmed);
  local_unconfirmed.reset();
}

namespace {
enum Flag { kLocalIdle, kLocalCommitted, kPartnerDone, kWritten, kCommitted };
}  // namespace

void Checkpointer::State::drain_poll() {
  if (!poll.posted()) return;
  // Nothing that a posted question asks about changes before its answer is read: only poll_progress() and the
  // blocking paths (which come here first) move the in-flight state. The answer is acted on here too, not dropped:
  // a save_local() at every step comes here before each progress(), and dropping its answers would leave a shared
  // checkpoint uncommitted until the next save() or wait().
  const std::vector<bool> every = poll.answer();
  if (asked.local && every[kLocalIdle]) {
    if (every[kLocalCommitted]) record_local_commit(local_unconfirmed);
    local_unconfirmed.reset();
  }
  if (asked.partner && every[kPartnerDone]) store_partner();
  if (asked.writing && every[kWritten])
    finish_write();
  else if (asked.committing && every[kCommitted])
    finish_commit();
}

void Checkpointer::State::poll_progress() {
  finish_local(false);
  drain_poll();
  // A partner exchange starts once every rank's local write of its step is known to be done (its packed copy taken).
  if (partner && !partner->started && local_unconfirmed != partner->step) start_partner();
  asked = Asked{local_unconfirmed.has_value(), partner && partner->started, writing.has_value(),
                !writing && committing.has_value()};
  if (!asked.local && !asked.partner && !asked.writing && !asked.committing) return;
  auto ready = [](auto& future) { return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready; };
  poll.post({!local_writing, last_local == local_unconfirmed, asked.partner && partner->work.is_completed(),
             asked.writing && ready(write_done), asked.committing && (rank != 0 || ready(commit_done))});
}

}  // namespace tenax
