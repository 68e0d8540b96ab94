// tenax-example-gpt: trains a GPT on a real-text token dataset (scripts/prepare-corpus.sh makes one from the Python
// documentation) with any mix of tensor, pipeline and data parallelism, on CPUs or GPUs, fault-tolerant: asynchronous
// checkpoints resumed in any layout, preemption, node-local data staging, step metrics with the validation loss, and
// at the end a text sample from the trained model. Everything but the options below is the library's.
//
//   scripts/prepare-corpus.sh data/pydoc
//   tenax-launch -n 4 --checkpoint-dir ckpt -- tenax-example-gpt --data data/pydoc --tp 2 --pp 2 --steps 300
//
// World rank 0 prints, every --log-every steps, the mean training loss and tokens/s of the interval, the validation
// loss when one was measured, and at the end the sample and a layout-independent checksum of the parameters.
#include <cxxopts.hpp>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "command_line.hpp"
#include "tenax/agreement.hpp"
#include "tenax/data_staging.hpp"
#include "tenax/engine.hpp"
#include "tenax/error.hpp"
#include "tenax/models.hpp"
#include "tenax/runtime.hpp"
#include "tenax/token_dataset.hpp"
#include "tenax/tokenizer.hpp"

namespace {

cxxopts::Options make_options() {
  cxxopts::Options o("tenax-example-gpt", "Train a GPT on a token dataset with tensor, pipeline and data parallelism");
  // clang-format off
  o.add_options("data")
    ("data", "dataset directory (tenax-data encode, scripts/prepare-corpus.sh)", cxxopts::value<std::string>())
    ("validate-every", "validation loss every N steps (0: only at the end)", cxxopts::value<int>()->default_value("50"))
    ("validation-samples", "sequences in each validation pass", cxxopts::value<std::size_t>()->default_value("64"))
    ("verify-data", "check every shard's payload checksum at start (reads the dataset once per rank): on, off, or auto "
     "(on for a dataset of up to 1 GiB read in place; a staged copy was checked by staging)",
     cxxopts::value<std::string>()->default_value("auto"));
  o.add_options("layout (default: TENAX_LAYOUT, else data parallelism over every rank)")
    ("tp", "tensor-parallel size", cxxopts::value<int>())
    ("pp", "pipeline-parallel size (stages)", cxxopts::value<int>())
    ("dp", "data-parallel size (default: world size / (tp*pp))", cxxopts::value<int>())
    ("schedule", "pipeline schedule: 1f1b, gpipe or interleaved", cxxopts::value<std::string>()->default_value("1f1b"))
    ("virtual-stages", "model chunks per pipeline stage (interleaved)", cxxopts::value<int>()->default_value("1"));
  o.add_options("model")
    ("hidden", "hidden size", cxxopts::value<std::size_t>()->default_value("256"))
    ("layers", "transformer blocks", cxxopts::value<std::size_t>()->default_value("4"))
    ("heads", "attention heads", cxxopts::value<std::size_t>()->default_value("4"))
    ("seq-len", "tokens per sequence", cxxopts::value<std::uint32_t>()->default_value("128"))
    ("recompute", "recompute the attention probabilities in backward (less memory)")
    ("tie-embeddings", "the output head uses the token embedding's table (GPT-2's tied weights)");
  o.add_options("training")
    ("precision", "fp32, bf16 or fp16 (fp32 master weights in every mode)", cxxopts::value<std::string>()->default_value("fp32"))
    ("device", "cpu, or cuda: one GPU per rank, NCCL groups", cxxopts::value<std::string>()->default_value("cpu"))
    ("steps", "optimizer steps", cxxopts::value<long>()->default_value("300"))
    ("batch", "sequences per step, all data-parallel ranks together", cxxopts::value<int>()->default_value("16"))
    ("micro-batch", "sequences per micro-batch", cxxopts::value<int>()->default_value("4"))
    ("lr", "peak learning rate (AdamW)", cxxopts::value<float>()->default_value("0.002"))
    ("warmup", "learning-rate warm-up steps, then cosine decay to lr/10", cxxopts::value<long>()->default_value("30"))
    ("weight-decay", "decoupled weight decay", cxxopts::value<float>()->default_value("0.1"))
    ("grad-clip", "clip the global gradient norm (0: off)", cxxopts::value<float>()->default_value("1.0"))
    ("seed", "seed of the weights and of the sample order", cxxopts::value<std::uint64_t>()->default_value("1234"))
    ("zero1", "shard the optimizer state over data-parallel ranks (ZeRO-1)")
    ("log-every", "print the training loss every N steps", cxxopts::value<int>()->default_value("10"));
  o.add_options("fault tolerance")
    ("checkpoint-dir", "checkpoint directory (default: TENAX_CHECKPOINT_DIR; none: no checkpoints)", cxxopts::value<std::string>())
    ("checkpoint-every", "save every N steps (0: only at the end and on preemption), or auto: the Young/Daly interval from the measured save cost and the MTBF (TENAX_MTBF, or this run's own under tenax-launch)", cxxopts::value<std::string>()->default_value(tenax::CheckpointPolicy::every_default("50")))
    ("keep", "complete checkpoints kept (default: TENAX_CKPT_KEEP)", cxxopts::value<int>())
    ("checkpoint-local-every", "with a node-local checkpoint directory (TENAX_CKPT_LOCAL_DIR), also keep a node-local copy every N steps between the shared saves (0: only with each shared save), or auto: the Young/Daly interval from the measured cost of a node-local save", cxxopts::value<std::string>()->default_value(tenax::CheckpointPolicy::local_every_default("0")))
    ("run-dir", "write step metrics and the loss curves to <dir>/metrics/ (default: TENAX_RUN_DIR)", cxxopts::value<std::string>());
  o.add_options("sample")
    ("prompt", "text the sample at the end continues", cxxopts::value<std::string>()->default_value("The list"))
    ("sample-tokens", "tokens to generate (0: no sample)", cxxopts::value<std::size_t>()->default_value("48"))
    ("temperature", "sampling temperature (0: greedy)", cxxopts::value<float>()->default_value("0.7"));
  o.add_options()("h,help", "print this help");
  // clang-format on
  return o;
}

int body(int argc, char** argv) {
  tenax::Runtime runtime(argc, argv);
  cxxopts::Options options = make_options();
  const cxxopts::ParseResult a = tenax::examples::parse_command_line(options, argc, argv);
  if (a.count("help")) {
    if (runtime.rank() == 0) std::printf("%s\n", options.help().c_str());
    return tenax::kExitSuccess;
  }
  if (!a.count("data")) throw tenax::UsageError("--data is missing: give a dataset (scripts/prepare-corpus.sh DIR)");

  tenax::EngineConfig c;
  if (a.count("tp") || a.count("pp") || a.count("dp")) {
    const int tp = a.count("tp") ? a["tp"].as<int>() : 1, pp = a.count("pp") ? a["pp"].as<int>() : 1;
    if (tp < 1 || pp < 1) throw tenax::UsageError("layout: --tp and --pp must be >= 1");
    c.layout = a.count("dp") ? tenax::ParallelLayout{tp, pp, a["dp"].as<int>()}
                             : tenax::ParallelLayout::infer(runtime.size(), tp, pp);
  }
  c.schedule = tenax::parse_pipeline_kind(a["schedule"].as<std::string>());
  c.virtual_stages = a["virtual-stages"].as<int>();
  c.precision = tenax::PrecisionPolicy::parse(a["precision"].as<std::string>());
  c.device = tenax::parse_device(a["device"].as<std::string>());
  c.steps = a["steps"].as<long>();
  c.global_batch = a["batch"].as<int>();
  c.micro_batch = a["micro-batch"].as<int>();
  const std::uint32_t seq_len = a["seq-len"].as<std::uint32_t>();
  c.seq_len = seq_len;
  c.seed = a["seed"].as<std::uint64_t>();
  c.lr = {.lr = a["lr"].as<float>(),
          .min_lr = a["lr"].as<float>() / 10,
          .warmup_steps = a["warmup"].as<long>(),
          .decay_steps = c.steps};
  c.optimizer.adamw.weight_decay = a["weight-decay"].as<float>();
  c.grad_clip = a["grad-clip"].as<float>();
  c.data_parallel.zero1 = a.count("zero1") > 0;
  if (a.count("checkpoint-dir")) c.checkpoint.dir = a["checkpoint-dir"].as<std::string>();
  c.checkpoint = tenax::CheckpointPolicy::parse_every(a["checkpoint-every"].as<std::string>(), c.checkpoint);
  if (a.count("keep")) c.checkpoint.keep = a["keep"].as<int>();
  c.checkpoint =
      tenax::CheckpointPolicy::parse_local_every(a["checkpoint-local-every"].as<std::string>(), c.checkpoint);
  if (a.count("run-dir")) c.run_dir = a["run-dir"].as<std::string>();
  const int log_every = a["log-every"].as<int>();
  if (log_every < 1) throw tenax::UsageError("--log-every must be at least 1, not " + std::to_string(log_every));
  tenax::Engine::check_generation(a["sample-tokens"].as<std::size_t>(), a["temperature"].as<float>());

  // Each node copies the dataset to local disk first when TENAX_DATA_STAGE_DIR is set (else it is read in place).
  const std::string verify = a["verify-data"].as<std::string>();
  if (verify != "on" && verify != "off" && verify != "auto")
    throw tenax::UsageError("--verify-data must be on, off or auto, not '" + verify + "'");
  tenax::StagingResult staged;
  try {  // every rank raises the same error for a damaged dataset, which no restart can mend
    staged = tenax::stage_dataset(runtime.world(), a["data"].as<std::string>());
  } catch (const tenax::DataError& e) {
    throw tenax::UsageError(std::string(e.what()));
  }
  std::shared_ptr<tenax::TokenDataset> train;
  std::optional<tenax::Tokenizer> tokenizer;       // for the sample; loaded (and checked) before any training is spent
  tenax::run_on_every_rank(runtime.world(), [&] {  // this node's copy: a failure here must stop every rank
    try {
      tenax::TokenDatasetOptions train_options{.split = tenax::Split::Train, .seq_len = seq_len, .seed = c.seed};
      train = std::make_shared<tenax::TokenDataset>(staged.dir, train_options);
      // Opening checks every shard's header; the payloads' checksums are read only when asked for, since at scale
      // every rank would read the whole dataset. A small one read in place is checked: a flipped byte would train
      // silently.
      const tenax::TokenDatasetInfo& info = train->info();
      const bool staged_copy =
          staged.outcome == tenax::StagingOutcome::Copied || staged.outcome == tenax::StagingOutcome::Reused;
      const double dataset_bytes = static_cast<double>(info.tokens + info.validation_tokens) * info.token_bytes;
      const bool verify_payloads =
          verify == "on" || (verify == "auto" && !staged_copy && dataset_bytes <= 1024.0 * 1024 * 1024);
      if (verify_payloads) {
        train_options.verify_checksums = true;
        train = std::make_shared<tenax::TokenDataset>(staged.dir, train_options);
      }
      if (train->info().validation_tokens > 0)  // a dataset encoded with --validation-fraction 0 has none
        c.validation = {.source = std::make_shared<tenax::TokenDataset>(
                            staged.dir, tenax::TokenDatasetOptions{.split = tenax::Split::Validation,
                                                                   .seq_len = seq_len,
                                                                   .shuffle = false,
                                                                   .verify_checksums = verify_payloads}),
                        .every = a["validate-every"].as<int>(),
                        .samples = a["validation-samples"].as<std::size_t>()};
      if (a["sample-tokens"].as<std::size_t>() > 0) tokenizer.emplace(tenax::Tokenizer::for_dataset(staged.dir));
    } catch (const tenax::DataError& e) {  // a dataset that fails its checks now fails them at every restart too
      throw tenax::UsageError(std::string(e.what()));
    }
  });
  if (!c.validation.source && runtime.rank() == 0)
    std::printf("no validation split in %s: training without a validation loss\n", staged.dir.c_str());

  tenax::models::GptConfig model{.vocab = train->info().vocab_size,
                                 .hidden = a["hidden"].as<std::size_t>(),
                                 .layers = a["layers"].as<std::size_t>(),
                                 .heads = a["heads"].as<std::size_t>(),
                                 .max_positions = c.seq_len,
                                 .recompute_attention = a.count("recompute") > 0,
                                 .tie_embeddings = a.count("tie-embeddings") > 0};
  c.model_description = model.description();  // a resume with other --heads or --tie-embeddings is refused
  tenax::Engine engine(runtime.world(), c, tenax::models::gpt(model), train);
  const bool talk = engine.rank() == 0;
  if (talk) {
    std::printf("data %s (staging: %s%s%s), %" PRIu64 " training tokens, vocabulary %zu\n", staged.dir.c_str(),
                std::string(tenax::staging_outcome_name(staged.outcome)).c_str(), staged.reason.empty() ? "" : ", ",
                staged.reason.c_str(), train->info().tokens, model.vocab);
    std::printf(
        "GPT %zu layers, hidden %zu, %zu heads, %.2fM parameters; layout %s, %s, %ld steps of %d x %zu "
        "tokens; loss of an untrained model ~%.2f\n",
        model.layers, model.hidden, model.heads, static_cast<double>(model.parameters()) / 1e6,
        engine.layout().to_string().c_str(), std::string(c.precision.name()).c_str(), c.steps, c.global_batch,
        c.seq_len, std::log(static_cast<double>(model.vocab)));
    std::fflush(stdout);
  }
  double interval_loss = 0, interval_seconds = 0;
  std::size_t interval_tokens = 0, interval_steps = 0;
  const int code = engine.run([&](const tenax::StepResult& r) {
    if (!talk) return;
    interval_loss += r.loss, interval_seconds += r.seconds, interval_tokens += r.tokens, ++interval_steps;
    if (r.step % log_every == 0 || r.step == c.steps) {
      std::printf("step %5ld  loss %.4f  lr %.2e  %7.0f tokens/s\n", r.step,
                  interval_loss / static_cast<double>(interval_steps), r.lr,
                  static_cast<double>(interval_tokens) / interval_seconds);
      interval_loss = interval_seconds = 0, interval_tokens = interval_steps = 0;
    }
    if (r.validation_loss)
      std::printf("step %5ld  validation loss %.4f (perplexity %.1f)\n", r.step, *r.validation_loss,
                  std::exp(*r.validation_loss));
    std::fflush(stdout);
  });
  if (code != tenax::kExitSuccess) return code;

  const std::size_t sample_tokens = a["sample-tokens"].as<std::size_t>();
  if (sample_tokens > 0) {
    const std::string prompt = a["prompt"].as<std::string>();
    const std::vector<std::int32_t> text =
        engine.generate(tokenizer->encode(prompt), sample_tokens, a["temperature"].as<float>(), c.seed);
    if (talk) std::printf("sample: %s\n", tokenizer->decode(text).c_str());
  }
  const std::uint64_t checksum = engine.parameters_checksum();
  if (talk) std::printf("final parameters checksum: %016" PRIx64 "\n", checksum);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  return tenax::run_main(body, argc, argv);
}
