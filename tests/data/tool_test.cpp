// tenax-data's commands on real text (the Python documentation's reST sources from python3.11-doc): the tokenizer is
// lossless on text it was not trained on, encoding is deterministic for any thread count and holds out whole
// documents, verify finds damage, and every bad input is a UsageError that names the problem and leaves nothing
// behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "commands.hpp"
#include "data/dataset_index.hpp"
#include "data/dataset_writer.hpp"
#include "data_test_util.hpp"
#include "tenax/error.hpp"
#include "tenax/token_dataset.hpp"
#include "tenax/tokenizer.hpp"

namespace tenax::test {
namespace {

using ::testing::HasSubstr;
namespace stdfs = std::filesystem;

// A small real corpus: two folders of the Python docs (about 1 MB), copied so the tests own it.
class RealText : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(have_python_docs()) << kPythonDocSources
                                    << " is missing: install python3.11-doc (scripts/install-deps.sh does)";
    for (const char* sub : {"tutorial", "howto"})
      stdfs::copy(std::string(kPythonDocSources) + "/" + sub, corpus_ / sub, stdfs::copy_options::recursive);
    datatool::TrainTokenizerOptions t;
    t.corpus.inputs = {corpus_.path()};
    t.corpus.extension = ".txt";
    t.output = scratch_ / "tok.model";
    t.vocab = 2000;
    datatool::train_tokenizer(t);
  }

  datatool::EncodeOptions encode_options(const std::string& output) const {
    datatool::EncodeOptions e;
    e.corpus.inputs = {corpus_.path()};
    e.corpus.extension = ".txt";
    e.tokenizer = scratch_ / "tok.model";
    e.output = output;
    e.validation_fraction = 0.05;
    e.shard_tokens = 50000;
    return e;
  }

  ScratchDir corpus_{"corpus"};
  ScratchDir scratch_{"tool"};
};

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

TEST_F(RealText, TokenizerRoundTripsRealTextItWasNotTrainedOn) {
  const Tokenizer tok(scratch_ / "tok.model");
  EXPECT_EQ(tok.vocab_size(), 2000);
  EXPECT_GE(tok.eos_id(), 0);
  // Library reference pages: not in the training folders; reST with indentation, tables, code and non-ASCII.
  std::uint64_t bytes = 0, tokens = 0;
  for (const char* page : {"library/functions.rst.txt", "library/stdtypes.rst.txt", "library/unicodedata.rst.txt",
                           "whatsnew/3.11.rst.txt"}) {
    const std::string text = read_file(std::string(kPythonDocSources) + "/" + page);
    ASSERT_FALSE(text.empty()) << page;
    const std::vector<std::int32_t> ids = tok.encode(text);
    EXPECT_EQ(tok.decode(ids), text) << page;
    bytes += text.size();
    tokens += ids.size();
  }
  // BPE compresses: well under one token per byte.
  EXPECT_LT(static_cast<double>(tokens) / static_cast<double>(bytes), 0.6);
  const std::string odd = "tabs\tand  double spaces\n\n  indented\r\nemoji \xF0\x9F\x99\x82 and \xC3\xA9t\xC3\xA9\n";
  EXPECT_EQ(tok.decode(tok.encode(odd)), odd);
  EXPECT_THROW(tok.decode(std::vector<std::int32_t>{5, 2000}), UsageError);
}

TEST_F(RealText, EncodeIsDeterministicAndHoldsOutWholeDocuments) {
  auto one = encode_options(scratch_ / "one");
  one.threads = 1;
  auto three = encode_options(scratch_ / "three");
  three.threads = 3;
  const datatool::EncodeResult r = datatool::encode(one);
  datatool::encode(three);
  for (const auto& f : stdfs::directory_iterator(scratch_ / "one"))
    EXPECT_EQ(read_file(f.path().string()), read_file(scratch_ / "three/" + f.path().filename().string()))
        << f.path().filename();
  EXPECT_GT(r.validation_documents, 0u);
  EXPECT_GT(r.train_documents, 10 * r.validation_documents);
  EXPECT_GT(r.shards, 2u);
  EXPECT_EQ(r.documents, r.train_documents + r.validation_documents);

  // The streams decode to the documents themselves, each followed by the end-of-document id.
  const Tokenizer tok = Tokenizer::for_dataset(scratch_ / "one");
  TokenDataset train(scratch_ / "one", {.split = Split::Train, .seq_len = 1024, .shuffle = false});
  EXPECT_EQ(train.info().tokens, r.train_tokens);
  EXPECT_EQ(train.info().documents, r.train_documents);
  const std::size_t n = static_cast<std::size_t>(r.train_tokens - 1) / 1024 * 1024 + 1;
  std::vector<std::int32_t> stream(n);
  // Samples of an unshuffled split overlap by one token: stitch the stream back together.
  for (std::uint64_t k = 0; k * 1024 + 1 < n; ++k)
    train.fill(k, 1, stream.data() + k * 1024);
  std::ostringstream decoded;
  std::size_t start = 0;
  int documents = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (stream[i] == tok.eos_id()) {
      decoded << tok.decode(std::span(stream).subspan(start, i - start)) << "\x1e";
      start = i + 1;
      ++documents;
    }
  ASSERT_GT(documents, 3);
  // The first training documents, in corpus order (sorted relative paths), minus the held-out ones.
  std::vector<std::string> names;
  for (const auto& f : stdfs::recursive_directory_iterator(corpus_.path()))
    if (f.is_regular_file()) names.push_back(stdfs::relative(f.path(), corpus_.path()).generic_string());
  std::sort(names.begin(), names.end());
  const std::string all = decoded.str();
  std::size_t found = 0;
  for (const std::string& name : names) {
    const std::string text = read_file(corpus_ / name);
    if (all.find(text + "\x1e") != std::string::npos) ++found;
  }
  EXPECT_EQ(found, static_cast<std::size_t>(documents));

  std::ostringstream problems;
  EXPECT_EQ(datatool::verify(scratch_ / "one", "", problems).problems, 0u) << problems.str();
}

TEST_F(RealText, VerifyFindsDamage) {
  datatool::encode(encode_options(scratch_ / "ds"));
  std::ostringstream out;
  EXPECT_EQ(datatool::verify(scratch_ / "ds", "", out).problems, 0u) << out.str();
  flip_byte(scratch_ / "ds/train-00001.tok", 64 + 1234);
  flip_byte(scratch_ / "ds/tokenizer.model", 10);
  const datatool::VerifyResult r = datatool::verify(scratch_ / "ds", "other label", out);
  EXPECT_EQ(r.problems, 3u) << out.str();
  EXPECT_THAT(out.str(), AllOf(HasSubstr("train-00001.tok: payload checksum mismatch"),
                               HasSubstr("tokenizer.model: checksum mismatch"), HasSubstr("other label")));
  EXPECT_THROW(Tokenizer::for_dataset(scratch_ / "ds"), IoError);

  // Consistent checksums, but a tokenizer of another vocabulary than the ids': found by verify, not by the first
  // text sample after training.
  {
    data::DatasetWriter writer(scratch_ / "mixed", 1000, 2, 50000);
    writer.append(data::SplitId::Train, std::vector<std::int32_t>(5000, 7));
    writer.end_document(data::SplitId::Train);
    writer.set_tokenizer(read_file(scratch_ / "tok.model"));  // 2000 pieces
    writer.commit();
  }
  std::ostringstream mixed;
  EXPECT_EQ(datatool::verify(scratch_ / "mixed", "", mixed).problems, 1u) << mixed.str();
  EXPECT_THAT(mixed.str(), HasSubstr("has 2000 pieces but the dataset's vocab_size is 1000"));
}

TEST_F(RealText, BadInputsAreNamedAndLeaveNothingBehind) {
  datatool::encode(encode_options(scratch_ / "ds"));
  EXPECT_THAT(usage_error([&] { datatool::encode(encode_options(scratch_ / "ds")); }),
              AllOf(HasSubstr("already exists"), HasSubstr("never overwrites")));
  auto missing = encode_options(scratch_ / "out1");
  missing.corpus.inputs.push_back(scratch_ / "nope");
  EXPECT_THAT(usage_error([&] { datatool::encode(missing); }), AllOf(HasSubstr("nope"), HasSubstr("does not exist")));
  stdfs::create_directory(scratch_ / "empty");
  auto empty = encode_options(scratch_ / "out2");
  empty.corpus.inputs = {scratch_ / "empty"};
  EXPECT_THAT(usage_error([&] { datatool::encode(empty); }), HasSubstr("corpus is empty"));
  write_file(scratch_ / "empty/blank.txt", "");
  EXPECT_THAT(usage_error([&] { datatool::encode(empty); }), HasSubstr("non-empty document"));
  write_file(scratch_ / "latin1.txt", "caf\xe9 au lait\n");
  auto latin1 = encode_options(scratch_ / "out3");
  latin1.corpus.inputs.push_back(scratch_ / "latin1.txt");
  EXPECT_THAT(usage_error([&] { datatool::encode(latin1); }),
              AllOf(HasSubstr("latin1.txt is not UTF-8"), HasSubstr("byte 3"), HasSubstr("iconv")));
  EXPECT_THAT(usage_error([&] { datatool::encode(encode_options(scratch_ / "latin1.txt/ds")); }),
              HasSubstr("latin1.txt is not a directory"));
  EXPECT_THAT(usage_error([&] { datatool::encode(encode_options(scratch_ / "absent/ds")); }),
              HasSubstr("absent does not exist: create it first"));
  auto no_model = encode_options(scratch_ / "out4");
  no_model.tokenizer = scratch_ / "latin1.txt";
  EXPECT_THAT(usage_error([&] { datatool::encode(no_model); }), HasSubstr("not a SentencePiece model"));
  auto fraction = encode_options(scratch_ / "out5");
  fraction.validation_fraction = 0.7;
  EXPECT_THAT(usage_error([&] { datatool::encode(fraction); }), HasSubstr("--validation-fraction"));

  datatool::TrainTokenizerOptions t;
  t.corpus.inputs = {std::string(kPythonDocSources) + "/about.rst.txt"};
  t.output = scratch_ / "big.model";
  t.vocab = 50000;
  EXPECT_THAT(usage_error([&] { datatool::train_tokenizer(t); }),
              AllOf(HasSubstr("--vocab 50000 is too large"), HasSubstr("or less")));
  t.vocab = 100;
  EXPECT_THAT(usage_error([&] { datatool::train_tokenizer(t); }),
              AllOf(HasSubstr("--vocab 100 is too small"), HasSubstr("or more")));
  t.output = scratch_ / "tok.model";
  t.vocab = 1000;
  EXPECT_THAT(usage_error([&] { datatool::train_tokenizer(t); }), HasSubstr("already exists"));
  t.output = scratch_ / "latin1.txt/new.model";
  EXPECT_THAT(usage_error([&] { datatool::train_tokenizer(t); }), HasSubstr("latin1.txt is not a directory"));
  t.output = scratch_ / "new.model";
  t.corpus.inputs = {scratch_ / "empty"};
  EXPECT_THAT(usage_error([&] { datatool::train_tokenizer(t); }), HasSubstr("has no text"));

  // Nothing but what the successful calls made: no outputs, no temporary directories or files.
  std::vector<std::string> left;
  for (const auto& f : stdfs::directory_iterator(scratch_.path()))
    left.push_back(f.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"ds", "empty", "latin1.txt", "tok.model"}));
}

// A text longer than Tokenizer::encode takes at once (1 MiB) is encoded in parts cut after newlines, with the ids of
// the whole text at once (SentencePiece's own answer), in a fraction of the memory.
TEST_F(RealText, ALongTextEncodesInPartsToTheIdsOfTheWhole) {
  std::string text;
  for (int copy = 0; text.size() < (5u << 19); ++copy)
    for (const auto& f : stdfs::recursive_directory_iterator(corpus_.path()))
      if (f.is_regular_file()) text += read_file(f.path().string()) + "\n";
  sentencepiece::SentencePieceProcessor whole;
  ASSERT_TRUE(whole.Load(scratch_ / "tok.model").ok());
  std::vector<int> expected;
  ASSERT_TRUE(whole.Encode(text, &expected).ok());
  const Tokenizer tokenizer(scratch_ / "tok.model");
  ASSERT_TRUE(tokenizer.encodes_in_parts()) << "the text would be encoded whole: nothing tested";
  const std::vector<std::int32_t> got = tokenizer.encode(text);
  EXPECT_EQ(std::vector<std::int32_t>(expected.begin(), expected.end()), got);
}

// A line longer than a part (minified code, a JSON dump) is cut inside as well: encoded whole, SentencePiece's memory
// grows by ~130-175 bytes per byte of it (an 8 MiB line without a newline or a space: 1.07 GB).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
constexpr bool kAddressSanitizer = __has_feature(address_sanitizer);
#else
constexpr bool kAddressSanitizer = false;
#endif
// The ids still decode to the text, whether the line has whitespace to cut after or only characters of 1 to 4 bytes.
TEST_F(RealText, ALineLongerThanAPartIsCutAndStillDecodesToItsText) {
  const Tokenizer tokenizer(scratch_ / "tok.model");
  ASSERT_TRUE(tokenizer.encodes_in_parts());
  const std::string characters[] = {"x", "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "{\"k\":", "7"};
  // Under AddressSanitizer every allocation unwinds the stack (a 2.5 MiB text takes 80 s) and freed memory waits in a
  // quarantine, so peak memory says nothing there: a shorter dense line, still cut, and its bytes checked only.
  const std::size_t over_a_part = (1u << 20) + (64u << 10);
  const std::size_t dense_bytes = kAddressSanitizer ? over_a_part : (3u << 20);
  std::string dense, spaced;
  for (std::size_t i = 0; dense.size() < dense_bytes; ++i)
    dense += characters[(i * 7 + i / 5) % 6];
  for (std::size_t i = 0; spaced.size() < over_a_part; ++i)
    spaced += characters[i % 6] + std::string(i % 97 == 0 ? " " : "");
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(spaced)), spaced);

  // The dense line in a child process, whose peak resident memory (VmHWM, reset to the current size first) is its own.
  auto peak_kib = [] {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
    return -1L;
  };
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(report[0]);
    std::ofstream("/proc/self/clear_refs") << "5";  // peak := current
    const long before = peak_kib();
    const std::vector<std::int32_t> ids = tokenizer.encode(dense);
    const long grown_kib = peak_kib() - before;
    const bool lossless = tokenizer.decode(ids) == dense;
    const std::string line = std::to_string(grown_kib) + " " + (lossless ? "lossless" : "LOSSY") + "\n";
    (void)!::write(report[1], line.data(), line.size());
    ::_exit(0);
  }
  ::close(report[1]);
  char buffer[64] = {};
  const ssize_t n = ::read(report[0], buffer, sizeof buffer - 1);
  ::close(report[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_GT(n, 0) << "the child reported nothing (status " << status << ")";
  long grown_kib = 0;
  char verdict[16] = {};
  ASSERT_EQ(std::sscanf(buffer, "%ld %15s", &grown_kib, verdict), 2) << buffer;
  EXPECT_STREQ(verdict, "lossless");
  // Measured (2026-11-30): this 3 MiB line grew the peak by 341,712 KiB encoded whole; cut into 1 MiB parts, by
  // about 1 MB (one part needs ~175 MB at most, which the encodes before this one left in the heap).
  if (!kAddressSanitizer) {
    EXPECT_LT(grown_kib, 250 * 1024) << "peak memory grew by " << grown_kib << " KiB encoding a 3 MiB line";
  }
}

// A SentencePiece model made elsewhere with SentencePiece's defaults (NFKC, whitespace collapsed, no byte fallback)
// would write a dataset that does not decode to its corpus: encode refuses it, naming the fix.
TEST_F(RealText, ALossyTokenizerIsRefused) {
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      {{"input", std::string(kPythonDocSources) + "/tutorial/classes.rst.txt"}, {"vocab_size", "500"}}, nullptr,
      &model);
  ASSERT_TRUE(status.ok()) << status.ToString();
  write_file(scratch_ / "lossy.model", model);
  auto e = encode_options(scratch_ / "lossy-ds");
  e.tokenizer = scratch_ / "lossy.model";
  EXPECT_THAT(usage_error([&] { datatool::encode(e); }),
              AllOf(HasSubstr("does not give back the text it encodes"), HasSubstr("tenax-data train-tokenizer")));
  EXPECT_FALSE(stdfs::exists(scratch_ / "lossy-ds"));
}

// Lines longer than SentencePiece takes (16384 bytes: one article per line, minified code) are trained on in pieces,
// not dropped: a corpus of nothing but such lines trains, and the pieces count in what the tokenizer learns.
TEST(TrainTokenizer, LinesLongerThanSentencePieceTakesAreTrainedOnInPieces) {
  ScratchDir dir("longlines");
  std::string text;
  const std::string words[] = {"alpha ", "beta ", "gamma ", "delta ", "epsilon ", "zeta "};
  for (int line = 0; line < 60; ++line) {
    std::string long_line;
    for (int w = 0; long_line.size() < 40000; ++w)
      long_line += words[(w * 7 + line) % 6];
    text += long_line + "\n";
  }
  stdfs::create_directories(dir / "corpus");
  write_file(dir / "corpus/long.txt", text);
  datatool::TrainTokenizerOptions t;
  t.corpus.inputs = {dir / "corpus"};
  t.output = dir / "long.model";
  t.vocab = 300;
  const datatool::TrainTokenizerResult r = datatool::train_tokenizer(t);
  EXPECT_EQ(r.sentences, 60u);
  EXPECT_EQ(r.split_lines, 60u);
  // Trained on the words: each encodes to few pieces, not to its bytes one by one.
  const Tokenizer tokenizer(dir / "long.model");
  EXPECT_LE(tokenizer.encode("alpha beta gamma delta ").size(), 8u);
}

// Runs tenax-data with `args` (already quoted for the shell); returns its exit code and its stdout and stderr.
int run_tool(const std::string& args, std::string* output) {
  FILE* p = ::popen((std::string(TENAX_DATA_BINARY) + " " + args + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    output->append(buf, n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Starts `tenax-data encode` of one large document (seconds of work) into `out` and returns its pid once its
// temporary directory exists, as the kernel reports it (watched before the program starts); -1 if it never appears.
pid_t start_encode_until_it_writes(const stdfs::path& corpus, const stdfs::path& dir, const std::string& out) {
  if (!stdfs::exists(dir / "big")) {
    std::string text;
    while (text.size() < (6u << 20))
      for (const auto& f : stdfs::recursive_directory_iterator(corpus))
        if (f.is_regular_file()) text += read_file(f.path().string());
    stdfs::create_directories(dir / "big");
    write_file(dir / "big/all.txt", text);
  }
  const int watch = ::inotify_init1(IN_CLOEXEC);
  if (watch < 0 || ::inotify_add_watch(watch, dir.c_str(), IN_CREATE | IN_MOVED_TO) < 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(TENAX_DATA_BINARY, TENAX_DATA_BINARY, "encode", "--input", (dir / "big").c_str(), "--tokenizer",
            (dir / "tok.model").c_str(), "--output", out.c_str(), "--validation-fraction", "0", nullptr);
    ::_exit(127);
  }
  const std::string temp_prefix = stdfs::path(out).filename().string() + ".tmp";
  bool created = false;
  alignas(inotify_event) char events[4096];
  pollfd readable{watch, POLLIN, 0};
  while (!created && ::poll(&readable, 1, 60000) == 1) {
    const ssize_t n = ::read(watch, events, sizeof events);
    for (ssize_t at = 0; n > 0 && at < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(events + at);
      created = created || (e->len > 0 && std::string_view(e->name).starts_with(temp_prefix));
      at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
  }
  ::close(watch);
  return created ? pid : -1;
}

std::vector<std::string> entries_starting(const stdfs::path& dir, const std::string& prefix) {
  std::vector<std::string> found;
  for (const auto& f : stdfs::directory_iterator(dir))
    if (f.path().filename().string().starts_with(prefix)) found.push_back(f.path().filename().string());
  std::sort(found.begin(), found.end());
  return found;
}

// Links inside input directories are not followed (a link must not pull files from elsewhere into the corpus), but
// they are not passed over in silence: a directory of nothing but links (a model-hub cache) was reported as "empty".
TEST_F(RealText, LinksInsideInputDirectoriesAreCountedAndNamedWhenNothingElseIsThere) {
  const std::string page = corpus_ / "tutorial/classes.rst.txt";
  stdfs::create_directories(scratch_ / "links");
  stdfs::create_symlink(page, scratch_ / "links/a.txt");
  stdfs::create_symlink(corpus_.path() + "/howto", scratch_ / "links/b.txt");
  auto e = encode_options(scratch_ / "from-links");
  e.corpus.inputs = {scratch_ / "links"};
  EXPECT_THAT(usage_error([&] { datatool::encode(e); }),
              AllOf(HasSubstr("hold no files ending with '.txt' but 2 symbolic link(s), which are not followed"),
                    HasSubstr("name the files they point to with --input")));
  write_file(scratch_ / "links/c.txt", read_file(page) + read_file(corpus_ / "tutorial/errors.rst.txt"));
  e.validation_fraction = -0.0;  // as `--validation-fraction -0` parses: recorded as 0, not -0
  EXPECT_EQ(datatool::encode(e).skipped_links, 2u);
  EXPECT_FALSE(std::signbit(data::read_index(scratch_ / "from-links").source.validation_fraction));
  std::string output;
  EXPECT_EQ(run_tool("encode --input " + (scratch_ / "links") + " --extension .txt --tokenizer " +
                         (scratch_ / "tok.model") + " --validation-fraction 0 --output " + (scratch_ / "cli"),
                     &output),
            0)
      << output;
  EXPECT_THAT(output, HasSubstr("note: 2 symbolic link(s) inside the input directories were not followed"));
}

// Ctrl-C during encode: nothing left behind, neither the output nor its temporary directory. The signal is sent once
// the temporary directory exists, while the one large document is being encoded. (Without the handler the process
// also ends by SIGINT, but leaves the temporary directory: the listing below is the check.)
TEST_F(RealText, AnInterruptedEncodeLeavesNothingBehind) {
  const pid_t pid = start_encode_until_it_writes(corpus_.path(), scratch_.path(), scratch_ / "interrupted");
  ASSERT_GT(pid, 0) << "encode never created its temporary directory";
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  // Ended by the signal (re-raised after the clean-up, so that a shell script stops there too).
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_EQ(entries_starting(scratch_.path(), "interrupted"), std::vector<std::string>{});
}

// kill -9 (the OOM killer, a job past its limit) leaves the temporary directory: nothing can remove it then. The next
// encode of the same output on this host removes it and says so, and leaves alone what is not an abandoned copy of
// its own: a living process's folder, another host's, and names of another form.
TEST_F(RealText, AnEncodeKilledOutrightLeavesAFolderTheNextEncodeOfItsOutputRemoves) {
  const std::string out = scratch_ / "killed";
  const pid_t pid = start_encode_until_it_writes(corpus_.path(), scratch_.path(), out);
  ASSERT_GT(pid, 0) << "encode never created its temporary directory";
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  const std::vector<std::string> abandoned = entries_starting(scratch_.path(), "killed");
  ASSERT_EQ(abandoned.size(), 1u) << "SIGKILL leaves the temporary directory";
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const std::string alive = "killed.tmp-" + std::string(host) + "-" + std::to_string(::getpid()) + "-0";
  const std::string elsewhere = "killed.tmp-another-host-" + std::to_string(pid) + "-0";
  const std::string older_form = "killed.tmp-" + std::to_string(pid) + "-0";
  // A writer in another pid namespace (a container): its pid means nothing here, its lock on the folder does.
  const std::string locked = "killed.tmp-" + std::string(host) + "-" + std::to_string(pid) + "-7";
  for (const std::string& name : {alive, elsewhere, older_form, locked})
    stdfs::create_directories(scratch_ / name);
  const int held = ::open((scratch_ / locked).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);

  std::string output;
  ASSERT_EQ(
      run_tool("encode --input " + corpus_.path() + " --tokenizer " + (scratch_ / "tok.model") + " --output " + out,
               &output),
      0)
      << output;
  EXPECT_NE(output.find("tenax-data: removed " + (scratch_ / abandoned[0]) + " (pid " + std::to_string(pid) +
                        "), left by an encode of the same output that was killed"),
            std::string::npos)
      << output;
  ::close(held);
  std::vector<std::string> expected{"killed", alive, elsewhere, older_form, locked};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(entries_starting(scratch_.path(), "killed"), expected);
}

// decode reads tokens by the index's offsets: a shard swapped for another of the same length (here the first train
// shard copied over the second) would print another text. Its header is checked first.
TEST_F(RealText, DecodeRefusesAShardWhoseHeaderIsNotTheIndexs) {
  const std::string ds = scratch_ / "ds";
  datatool::encode(encode_options(ds));
  std::string out;
  ASSERT_EQ(run_tool("decode " + ds + " --offset 50000 --count 20", &out), 0) << out;  // the second shard's start
  ASSERT_EQ(stdfs::file_size(ds + "/train-00000.tok"), stdfs::file_size(ds + "/train-00001.tok"));
  stdfs::copy_file(ds + "/train-00000.tok", ds + "/train-00001.tok", stdfs::copy_options::overwrite_existing);
  out.clear();
  EXPECT_EQ(run_tool("decode " + ds + " --offset 50000 --count 20", &out), 1) << out;
  EXPECT_THAT(out, AllOf(HasSubstr("token shard " + ds + "/train-00001.tok: its header says payload checksum"),
                         HasSubstr("check it with `tenax-data verify DIR`")));
  out.clear();
  EXPECT_EQ(run_tool("decode " + ds + " --offset 0 --count 20", &out), 0) << out;  // the first shard is its own
}

TEST_F(RealText, CommandLineExitCodesAndMessages) {
  std::string out;
  EXPECT_EQ(run_tool("--version", &out), 0);
  EXPECT_THAT(out, HasSubstr("shard format 1"));
  out.clear();
  EXPECT_EQ(run_tool("encode --frobnicate", &out), 64);
  EXPECT_THAT(out, AllOf(HasSubstr("usage error"), HasSubstr("frobnicate"), HasSubstr("--help")));
  out.clear();
  EXPECT_EQ(run_tool("frobnicate", &out), 64);
  EXPECT_THAT(out, HasSubstr("unknown command"));
  out.clear();
  EXPECT_EQ(
      run_tool("train-tokenizer --input " + corpus_.path() + " --vocab 12 --output " + (scratch_ / "x.model"), &out),
      64);
  EXPECT_THAT(out, HasSubstr("--vocab"));
  out.clear();
  const std::string ds = scratch_ / "ds";
  EXPECT_EQ(run_tool("encode --input " + corpus_.path() + " --extension .txt --tokenizer " + (scratch_ / "tok.model") +
                         " --output " + ds + " --threads 2",
                     &out),
            0)
      << out;
  out.clear();
  EXPECT_EQ(run_tool("verify " + ds, &out), 0) << out;
  out.clear();
  EXPECT_EQ(run_tool("info " + ds, &out), 0);
  EXPECT_THAT(out, HasSubstr("vocab size     2000"));
  out.clear();
  EXPECT_EQ(run_tool("decode " + ds + " --count 40", &out), 0);
  EXPECT_FALSE(out.empty());
  out.clear();
  EXPECT_EQ(run_tool("decode " + ds + " --offset 999999999 --count 5", &out), 64);
  EXPECT_THAT(out, HasSubstr("beyond"));
  out.clear();
  EXPECT_EQ(run_tool("decode " + ds + " --ids ''", &out), 64);
  EXPECT_THAT(out, HasSubstr("--ids is empty"));
  out.clear();
  // Words no option takes (what `--input corpus/*.txt` leaves after the first match) are refused, not dropped.
  EXPECT_EQ(run_tool("encode --input " + corpus_.path() + " " + corpus_.path() + "/tutorial --tokenizer " +
                         (scratch_ / "tok.model") + " --output " + (scratch_ / "ds-wild"),
                     &out),
            64);
  EXPECT_THAT(out, AllOf(HasSubstr("unexpected argument '" + corpus_.path() + "/tutorial'"),
                         HasSubstr("repeat --input for each file or directory")));
  EXPECT_FALSE(stdfs::exists(scratch_ / "ds-wild"));
  out.clear();
  EXPECT_EQ(run_tool("verify " + ds + " " + (scratch_ / "other") + " " + ds, &out), 64);
  EXPECT_THAT(out, AllOf(HasSubstr("unexpected arguments"), HasSubstr("takes one dataset directory")));
  out.clear();
  const std::string encode_again = "encode --input " + corpus_.path() + " --extension .txt --tokenizer " +
                                   (scratch_ / "tok.model") + " --output " + (scratch_ / "ds-again");
  EXPECT_EQ(run_tool(encode_again + " --shard-tokens 2", &out), 64);
  EXPECT_THAT(out, HasSubstr("expected an integer in [4096,"));
  out.clear();
  EXPECT_EQ(run_tool(encode_again + " --label \"$(printf '\\377')\"", &out), 64) << out;
  EXPECT_THAT(out, HasSubstr("--label is not UTF-8 text"));
  // A file given again, inside its directory too, is one document: the dataset is the one made without it.
  out.clear();
  const std::string one_file = corpus_.path() + "/tutorial/classes.rst.txt";
  ASSERT_TRUE(stdfs::exists(one_file));
  EXPECT_EQ(run_tool(encode_again + " --input " + one_file + " --input " + one_file, &out), 0) << out;
  EXPECT_EQ(read_file(scratch_ / "ds-again/index.json"), read_file(ds + "/index.json"));
  flip_byte(ds + "/train-00000.tok", 64 + 10);
  out.clear();
  EXPECT_EQ(run_tool("verify " + ds, &out), 1);
  EXPECT_THAT(out, AllOf(HasSubstr("train-00000.tok: payload checksum mismatch"), HasSubstr("NOT a valid dataset")));
  out.clear();
  EXPECT_EQ(run_tool("verify " + (scratch_ / "nothing-here"), &out), 1);
  EXPECT_THAT(out, HasSubstr("index.json"));
}

}  // namespace
}  // namespace tenax::test
