// tenax-data: prepares token datasets for tenax training programs (docs/data-format.md, docs/user-guide.md).
//
//   tenax-data train-tokenizer --input DIR --vocab 8192 --output tokenizer.model
//   tenax-data encode --input DIR --tokenizer tokenizer.model --output DATASET
//   tenax-data verify DATASET | info DATASET | decode DATASET [--offset N --count M]
//
// Exit codes: 0 success; 1 a dataset is damaged (verify) or reading/writing failed; 64 bad options or inputs.
#include <cxxopts.hpp>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "corpus.hpp"
#include "tenax/env.hpp"
#include "tenax/error.hpp"
#include "tenax/runtime.hpp"

namespace {

using namespace tenax::datatool;
using tenax::UsageError;

const char* const kUsage =
    "usage: tenax-data COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  train-tokenizer  train a SentencePiece BPE tokenizer on text files\n"
    "  encode           turn text files into train/validation token shards\n"
    "  verify DIR       check a dataset's index and every file's checksum\n"
    "  info DIR         print what a dataset holds\n"
    "  decode DIR       print a dataset's tokens as text\n"
    "\n"
    "`tenax-data COMMAND --help` lists a command's options; --version prints the version.\n"
    "exit codes: 0 success, 1 damaged dataset or I/O failure, 64 bad options or inputs\n";

std::uint64_t parse_u64(const std::string& what, const std::string& value, long long min, long long max) {
  return static_cast<std::uint64_t>(tenax::env::parse_int(what, value, min, max));
}

double parse_fraction(const std::string& what, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0 || !std::isfinite(v))
    throw UsageError(what + " '" + value + "' is not a number (e.g. 0.01)");
  return v;
}

std::vector<std::int32_t> parse_ids(const std::string& text) {
  std::vector<std::int32_t> ids;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ','))
    ids.push_back(static_cast<std::int32_t>(tenax::env::parse_int("--ids", item, 0, 2147483647)));
  return ids;
}

void add_corpus_options(cxxopts::Options& p) {
  p.add_options()("input", "Text file or directory (walked recursively); repeatable",
                  cxxopts::value<std::vector<std::string>>())(
      "extension", "Only files whose names end with this, e.g. .txt", cxxopts::value<std::string>()->default_value(""));
}

CorpusOptions corpus_options(const cxxopts::ParseResult& r) {
  CorpusOptions c;
  if (r.count("input")) c.inputs = r["input"].as<std::vector<std::string>>();
  c.extension = r["extension"].as<std::string>();
  return c;
}

// Parses a command's options; positional arguments (the dataset directory) go to "dir".
cxxopts::ParseResult parse(cxxopts::Options& p, int argc, char** argv, bool positional_dir) {
  p.add_options()("h,help", "Show this help");
  if (positional_dir) {
    p.add_options()("dir", "Dataset directory", cxxopts::value<std::string>());
    p.parse_positional({"dir"});
    p.positional_help("");  // each command's custom_help names DIR
  }
  cxxopts::ParseResult r;
  try {
    r = p.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw UsageError(std::string(e.what()) + " (see `tenax-data " + p.program() + " --help`)");
  }
  // cxxopts keeps words no option takes aside without a word: `--input corpus/*.txt` would train on the first file.
  if (!r.unmatched().empty()) {
    std::string words;  // the first few: a wildcard can bring thousands
    const std::vector<std::string>& extra = r.unmatched();
    for (std::size_t i = 0; i < extra.size() && i < 3; ++i)
      words += (words.empty() ? "'" : " '") + extra[i] + "'";
    if (extra.size() > 3) words += " and " + std::to_string(extra.size() - 3) + " more";
    const std::string why =
        positional_dir ? "`tenax-data " + p.program() + "` takes one dataset directory: run it once for each"
                       : "an option takes one value: repeat --input for each file or directory (a shell wildcard "
                         "after --input gives it only the first match)";
    throw UsageError("unexpected argument" + std::string(r.unmatched().size() > 1 ? "s " : " ") + words + ": " + why +
                     " (see `tenax-data " + p.program() + " --help`)");
  }
  return r;
}

// Links inside input directories are not followed; a corpus that was meant to include them is then smaller than meant.
void print_skipped_links(std::uint64_t links) {
  if (links > 0)
    std::cout << "tenax-data: note: " << links
              << " symbolic link(s) inside the input directories were not followed (name the files they point to "
                 "with --input to include them)\n";
}

std::string need_dir(const cxxopts::ParseResult& r, const std::string& command) {
  if (!r.count("dir"))
    throw UsageError("`tenax-data " + command + "` needs the dataset directory: tenax-data " + command + " DIR");
  return r["dir"].as<std::string>();
}

int run(int argc, char** argv) {
  if (argc < 2) throw UsageError(std::string("no command given\n") + kUsage);
  const std::string command = argv[1];
  if (command == "-h" || command == "--help" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (command == "--version") {
    std::cout << version_text() << "\n";
    return 0;
  }
  // cxxopts sees "COMMAND [options]" as its argv.
  const int sub_argc = argc - 1;
  char** sub_argv = argv + 1;
  cxxopts::Options p(command, "");
  if (command == "train-tokenizer") {
    p.custom_help("--input PATH... --output MODEL [--vocab N] [options]");
    add_corpus_options(p);
    p.add_options()("output", "Model file to create", cxxopts::value<std::string>()->default_value(""))(
        "vocab", "Vocabulary size", cxxopts::value<std::string>()->default_value("8192"))(
        "max-sentences", "Lines sampled for training", cxxopts::value<std::string>()->default_value("2000000"))(
        "seed", "Seed of that sampling", cxxopts::value<std::string>()->default_value("1"))(
        "threads", "Training threads (0: all cores)", cxxopts::value<std::string>()->default_value("0"));
    const auto r = parse(p, sub_argc, sub_argv, false);
    if (r.count("help")) {
      std::cout << p.help();
      return 0;
    }
    TrainTokenizerOptions o;
    o.corpus = corpus_options(r);
    o.output = r["output"].as<std::string>();
    o.vocab = static_cast<std::uint32_t>(parse_u64("--vocab", r["vocab"].as<std::string>(), 16, 1 << 22));
    // SentencePiece's own limits (it samples more than 100 lines, trains on at most 128 threads), as options.
    o.max_sentences = parse_u64("--max-sentences", r["max-sentences"].as<std::string>(), 101, 1000000000);
    o.seed = static_cast<std::uint32_t>(parse_u64("--seed", r["seed"].as<std::string>(), 0, 0xffffffffll));
    o.threads = static_cast<int>(parse_u64("--threads", r["threads"].as<std::string>(), 0, 128));
    const TrainTokenizerResult t = train_tokenizer(o);
    std::cout << "tenax-data: trained " << o.output << ": " << t.vocab << " pieces from " << t.sentences << " lines ("
              << t.bytes << " bytes";
    if (t.split_lines > 0) std::cout << "; " << t.split_lines << " lines over 16384 bytes fed in pieces";
    std::cout << ") in " << t.seconds << " s\n";
    print_skipped_links(t.skipped_links);
    return 0;
  }
  if (command == "encode") {
    // encode writes its output for minutes; the other commands write nothing or their output at the very end.
    install_interrupt_handlers();
    p.custom_help("--input PATH... --tokenizer MODEL --output DIR [options]");
    add_corpus_options(p);
    p.add_options()("tokenizer", "Model from train-tokenizer", cxxopts::value<std::string>()->default_value(""))(
        "output", "Dataset directory to create", cxxopts::value<std::string>()->default_value(""))(
        "validation-fraction", "Share of the corpus held out (whole documents)",
        cxxopts::value<std::string>()->default_value("0.01"))("split-seed", "Which documents are held out",
                                                              cxxopts::value<std::string>()->default_value("0"))(
        "shard-tokens", "Most tokens per shard", cxxopts::value<std::string>()->default_value("67108864"))(
        "label", "Free text stored in the index", cxxopts::value<std::string>()->default_value(""))(
        "threads", "Encoding threads (0: all cores)", cxxopts::value<std::string>()->default_value("0"));
    const auto r = parse(p, sub_argc, sub_argv, false);
    if (r.count("help")) {
      std::cout << p.help();
      return 0;
    }
    EncodeOptions o;
    o.corpus = corpus_options(r);
    o.tokenizer = r["tokenizer"].as<std::string>();
    o.output = r["output"].as<std::string>();
    o.validation_fraction = parse_fraction("--validation-fraction", r["validation-fraction"].as<std::string>());
    o.split_seed = parse_u64("--split-seed", r["split-seed"].as<std::string>(), 0, 0x7fffffffffffffffll);
    // A shard per few tokens is no dataset anyone wants (and 32768 of them take minutes before the limit says so).
    o.shard_tokens = parse_u64("--shard-tokens", r["shard-tokens"].as<std::string>(), 4096, 1ll << 40);
    o.label = r["label"].as<std::string>();
    if (invalid_utf8_at(o.label) != std::string_view::npos)
      throw UsageError("--label is not UTF-8 text: the index stores text, and `verify --label` compares it exactly");
    o.threads = static_cast<int>(parse_u64("--threads", r["threads"].as<std::string>(), 0, 1024));
    const EncodeResult e = encode(o);
    for (const std::string& removed : e.removed_leftovers)
      std::cout << "tenax-data: removed " << removed << ", left by an encode of the same output that was killed\n";
    std::cout << "tenax-data: wrote " << o.output << ": " << e.documents << " documents (" << e.bytes << " bytes) -> "
              << e.train_tokens << " train tokens (" << e.train_documents << " documents), " << e.validation_tokens
              << " validation tokens (" << e.validation_documents << " documents), " << e.shards << " shard(s) in "
              << e.seconds << " s\n";
    print_skipped_links(e.skipped_links);
    return 0;
  }
  if (command == "verify") {
    p.custom_help("DIR [--label TEXT]");
    p.add_options()("label", "Also require this label (prepare-corpus.sh's cache key)",
                    cxxopts::value<std::string>()->default_value(""));
    const auto r = parse(p, sub_argc, sub_argv, true);
    if (r.count("help")) {
      std::cout << p.help();
      return 0;
    }
    const std::string dir = need_dir(r, command);
    const VerifyResult v = verify(dir, r["label"].as<std::string>(), std::cerr);
    if (v.problems > 0) {
      std::cerr << "tenax-data: " << dir << " is NOT a valid dataset (" << v.problems
                << " problem(s)); re-create it with `tenax-data encode`\n";
      return kExitDamaged;
    }
    std::cout << "tenax-data: " << dir << " is valid: " << v.files << " files, " << v.bytes_read << " bytes checked\n";
    return 0;
  }
  if (command == "info") {
    p.custom_help("DIR");
    const auto r = parse(p, sub_argc, sub_argv, true);
    if (r.count("help")) {
      std::cout << p.help();
      return 0;
    }
    info(need_dir(r, command), std::cout);
    return 0;
  }
  if (command == "decode") {
    p.custom_help("DIR [--split train|validation] [--offset N] [--count M] | DIR --ids A,B,C");
    p.add_options()("split", "train or validation", cxxopts::value<std::string>()->default_value("train"))(
        "offset", "First token of the split's stream", cxxopts::value<std::string>()->default_value("0"))(
        "count", "Tokens to decode", cxxopts::value<std::string>()->default_value("256"))(
        "ids", "Comma-separated ids to decode instead", cxxopts::value<std::string>()->default_value(""));
    const auto r = parse(p, sub_argc, sub_argv, true);
    if (r.count("help")) {
      std::cout << p.help();
      return 0;
    }
    DecodeOptions o;
    o.dir = need_dir(r, command);
    o.split = r["split"].as<std::string>();
    o.offset = parse_u64("--offset", r["offset"].as<std::string>(), 0, 0x7fffffffffffffffll);
    o.count = parse_u64("--count", r["count"].as<std::string>(), 1, 1 << 24);
    if (r.count("ids")) {
      if (r["ids"].as<std::string>().empty()) throw UsageError("--ids is empty: give the ids to decode, e.g. 1,2,3");
      if (r.count("split") || r.count("offset") || r.count("count"))
        throw UsageError("--ids decodes exactly the ids given: it takes no --split, --offset or --count");
      o.ids = parse_ids(r["ids"].as<std::string>());
    }
    decode(o, std::cout);
    std::cout << "\n";
    return 0;
  }
  throw UsageError("unknown command '" + command + "'\n" + kUsage);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const Interrupted& e) {
    std::cerr << "tenax-data: interrupted (signal " << e.signal << "); nothing was written\n";
    // End by the signal itself, as without the handler: a shell running a script of such commands stops there too.
    std::signal(e.signal, SIG_DFL);
    std::raise(e.signal);
    return 128 + e.signal;
  } catch (const UsageError& e) {
    std::cerr << "tenax-data: usage error: " << e.what() << "\n";
    return tenax::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "tenax-data: error: " << e.what() << "\n";
    return kExitDamaged;
  }
}
