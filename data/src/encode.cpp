// encode: documents -> token shards. Which documents are held out for validation depends only on their names and
// the split seed; documents are encoded on several threads (one Tokenizer each) in batches and written in input
// order, so the output is byte-identical for any thread count.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "checkpoint/crc32c.hpp"
#include "commands.hpp"
#include "core/file_system.hpp"
#include "corpus.hpp"
#include "data/dataset_writer.hpp"
#include "tenax/error.hpp"
#include "tenax/tokenizer.hpp"

namespace tenax::datatool {
namespace {

// A dataset is only as faithful as its tokenizer. A SentencePiece model made elsewhere may normalise (NFKC folds
// ligatures and full-width letters), collapse whitespace, map characters it lacks to <unk> or have no end-of-document
// id; its dataset would then not decode to its corpus, and nothing later could tell. The probe holds each of those.
void check_lossless(const Tokenizer& tokenizer, const std::string& path) {
  static const std::string probe =
      "Tab\tand  two spaces\nnext line \xef\xac\x81 \xef\xbc\xa1 \xe4\xb8\xad\xe6\x96\x87 \xe2\x98\x83 "
      "\xf0\x9f\x8e\x89 e\xcc\x81 \x7f";
  if (tokenizer.decode(tokenizer.encode(probe)) != probe)
    throw UsageError("--tokenizer " + path +
                     " does not give back the text it encodes (it normalises, collapses whitespace or lacks byte "
                     "fallback), so the dataset would not be the corpus: train one with `tenax-data train-tokenizer`, "
                     "whose models are lossless");
  if (tokenizer.eos_id() < 0)
    throw UsageError("--tokenizer " + path +
                     " has no end-of-sequence id, so documents could not be told apart in the token stream: train "
                     "one with `tenax-data train-tokenizer`");
}

using data::SplitId;

// Documents per batch, bounded by their text's size: the batch's text and tokens are in memory together.
constexpr std::size_t kBatchDocuments = 256;
constexpr std::uint64_t kBatchBytes = 64ull << 20;

// The validation documents: sorted by a keyed hash of their names, the first ones until their bytes reach the
// fraction of the corpus (at least one when the fraction is above 0). Returns a flag per document.
std::vector<bool> choose_validation(const std::vector<Document>& docs, double fraction, std::uint64_t seed,
                                    std::uint64_t total_bytes) {
  std::vector<bool> validation(docs.size(), false);
  if (fraction <= 0) return validation;
  std::vector<std::pair<std::uint32_t, std::size_t>> keyed;
  unsigned char seed_bytes[8];
  for (int i = 0; i < 8; ++i)
    seed_bytes[i] = static_cast<unsigned char>(seed >> (8 * i));
  const std::uint32_t seed_crc = ckpt::crc32c_extend(0, seed_bytes, sizeof seed_bytes);
  for (std::size_t i = 0; i < docs.size(); ++i)
    if (docs[i].bytes > 0)
      keyed.emplace_back(ckpt::crc32c_extend(seed_crc, docs[i].name.data(), docs[i].name.size()), i);
  std::sort(keyed.begin(), keyed.end());
  if (keyed.size() < 2)
    throw UsageError("the corpus has " + std::to_string(keyed.size()) +
                     " non-empty document(s): holding out a validation split needs at least 2; add documents or use "
                     "--validation-fraction 0");
  const double want = fraction * static_cast<double>(total_bytes);
  double have = 0;
  for (std::size_t k = 0; k + 1 < keyed.size() && (k == 0 || have < want); ++k) {
    validation[keyed[k].second] = true;
    have += static_cast<double>(docs[keyed[k].second].bytes);
  }
  return validation;
}

}  // namespace

EncodeResult encode(const EncodeOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.output.empty()) throw UsageError("--output is missing: name the dataset directory to create");
  if (o.tokenizer.empty()) throw UsageError("--tokenizer is missing: name the model from `tenax-data train-tokenizer`");
  if (!std::isfinite(o.validation_fraction) || o.validation_fraction < 0 || o.validation_fraction >= 0.5)
    throw UsageError("--validation-fraction " + std::to_string(o.validation_fraction) +
                     " is outside [0, 0.5): it is the share of the corpus held out, e.g. 0.01");
  if (o.shard_tokens == 0) throw UsageError("--shard-tokens must be at least 1 (e.g. 67108864)");
  if (fs::exists(o.output))
    throw UsageError("--output " + o.output +
                     " already exists; tenax-data never overwrites a dataset: remove it or "
                     "name a new directory");
  if (!fs::exists(o.tokenizer))
    throw UsageError("--tokenizer " + o.tokenizer + " does not exist: train one with `tenax-data train-tokenizer`");
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<Tokenizer> tokenizers;
  try {
    for (int i = 0; i < threads; ++i)
      tokenizers.emplace_back(o.tokenizer);
  } catch (const IoError& e) {
    throw UsageError(std::string("--tokenizer: ") + e.what());
  }
  check_lossless(tokenizers.front(), o.tokenizer);
  const std::string model_bytes = fs::read_file(o.tokenizer);
  const Corpus corpus = collect_documents(o.corpus);
  const std::vector<Document>& docs = corpus.documents;
  std::uint64_t total_bytes = 0;
  for (const Document& d : docs)
    total_bytes += d.bytes;
  const std::vector<bool> validation = choose_validation(docs, o.validation_fraction, o.split_seed, total_bytes);

  const Tokenizer& tok = tokenizers.front();
  data::DatasetWriter writer(o.output, static_cast<std::uint32_t>(tok.vocab_size()), tok.eos_id(), o.shard_tokens);
  writer.set_tokenizer(model_bytes);
  EncodeResult r;
  r.removed_leftovers = writer.removed_leftovers();
  r.skipped_links = corpus.skipped_links;
  std::size_t next = 0;
  while (next < docs.size()) {
    throw_if_interrupted();  // the writer's destructor removes the unfinished dataset
    // A batch of documents read here, encoded in parallel, written in order.
    std::vector<std::size_t> batch;
    std::vector<std::string> texts;
    std::uint64_t batch_bytes = 0;
    while (next < docs.size() && batch.size() < kBatchDocuments && (batch.empty() || batch_bytes < kBatchBytes)) {
      texts.push_back(read_document(docs[next]));
      batch_bytes += texts.back().size();
      batch.push_back(next++);
    }
    std::vector<std::vector<std::int32_t>> ids(batch.size());
    std::vector<std::exception_ptr> errors(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        try {
          for (std::size_t i = static_cast<std::size_t>(t); i < batch.size(); i += static_cast<std::size_t>(threads))
            ids[i] = tokenizers[static_cast<std::size_t>(t)].encode(texts[i]);
        } catch (...) {
          errors[static_cast<std::size_t>(t)] = std::current_exception();
        }
      });
    for (std::thread& th : pool)
      th.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    throw_if_interrupted();  // a large batch takes a while: not a moment longer
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (texts[i].empty()) continue;  // an empty file is no document
      const SplitId split = validation[batch[i]] ? SplitId::Validation : SplitId::Train;
      writer.append(split, ids[i]);
      writer.end_document(split);
      ++(split == SplitId::Train ? r.train_documents : r.validation_documents);
      r.bytes += texts[i].size();
    }
  }
  r.documents = r.train_documents + r.validation_documents;
  if (r.documents == 0)
    throw UsageError("the corpus has no text (" + std::to_string(docs.size()) +
                     " input files, all empty): name inputs that hold text");
  data::SourceInfo source;
  source.documents = r.documents;
  source.bytes = r.bytes;
  source.validation_fraction = o.validation_fraction + 0.0;  // "-0" is 0 (the index would record -0.0)
  source.split_seed = o.split_seed;
  source.label = o.label;
  writer.set_source(source);
  throw_if_interrupted();
  const data::DatasetIndex index = writer.commit();
  r.train_tokens = index.train.tokens;
  r.validation_tokens = index.validation.tokens;
  r.shards = index.train.shards.size() + index.validation.shards.size();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace tenax::datatool
