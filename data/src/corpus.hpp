// The text inputs of train-tokenizer and encode: every input file is one document.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"

namespace tenax::datatool {

struct Document {
  std::string path;  // as opened
  std::string name;  // relative to its input directory (the file name for a file input): keys the validation split
  std::uint64_t bytes = 0;
};

// A document larger than this is refused (encode holds one document's text and tokens in memory at a time).
inline constexpr std::uint64_t kMaxDocumentBytes = 1ull << 30;

// The documents of the inputs in a fixed order: inputs in the order given, each directory's files sorted by relative
// path (bytewise). Symbolic links inside directories are skipped (so that a link cannot pull files from elsewhere into
// the corpus) and counted; a named input may be one. Empty files are kept (and skipped when read). Throws UsageError
// for a missing input, an unreadable directory, or no files at all (naming the skipped links, when there were some).
struct Corpus {
  std::vector<Document> documents;
  std::uint64_t skipped_links = 0;  // inside input directories, with a name the extension filter would take
};
Corpus collect_documents(const CorpusOptions& options);

// The document's text. Throws UsageError when it is not UTF-8 text (naming the byte offset) or too large, IoError when
// reading fails.
std::string read_document(const Document& doc);

// The offset of the first byte that is not part of well-formed UTF-8 (or is NUL), or npos.
std::size_t invalid_utf8_at(std::string_view text);

}  // namespace tenax::datatool
