#include "corpus.hpp"

#include <sys/stat.h>

#include <set>
#include <utility>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "core/file_system.hpp"
#include "tenax/error.hpp"

namespace tenax::datatool {
namespace {

namespace stdfs = std::filesystem;

bool wanted(const std::string& name, const std::string& extension) {
  return extension.empty() || (name.size() >= extension.size() &&
                               name.compare(name.size() - extension.size(), extension.size(), extension) == 0);
}

}  // namespace

std::size_t invalid_utf8_at(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c == 0) return i;
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    std::uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;  // a continuation byte, an overlong lead (c0, c1) or beyond U+10FFFF (f5..ff)
    }
    if (n - i < len) return i;
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return i;  // overlong, out of range, or a surrogate
    i += len;
  }
  return std::string_view::npos;
}

Corpus collect_documents(const CorpusOptions& options) {
  if (options.inputs.empty())
    throw UsageError("no inputs: name the text files or directories of the corpus (--input PATH, repeatable)");
  std::vector<Document> docs;
  std::uint64_t skipped_links = 0;
  for (const std::string& input : options.inputs) {
    std::error_code ec;
    const stdfs::file_status st = stdfs::status(input, ec);
    if (ec || !stdfs::exists(st))
      throw UsageError("input " + input + " does not exist" + (ec ? " (" + ec.message() + ")" : std::string()) +
                       ": name an existing text file or directory");
    if (stdfs::is_regular_file(st)) {
      docs.push_back(
          {input, stdfs::path(input).filename().string(), static_cast<std::uint64_t>(stdfs::file_size(input))});
      continue;
    }
    if (!stdfs::is_directory(st)) throw UsageError("input " + input + " is neither a regular file nor a directory");
    std::vector<Document> found;
    stdfs::recursive_directory_iterator it(input, stdfs::directory_options::none, ec);
    for (; !ec && it != stdfs::recursive_directory_iterator(); it.increment(ec)) {
      const stdfs::directory_entry& e = *it;
      std::error_code ec2;
      if (!wanted(e.path().filename().string(), options.extension)) continue;
      if (e.is_symlink(ec2)) {
        ++skipped_links;
        continue;
      }
      if (!e.is_regular_file(ec2)) continue;
      const std::string path = e.path().string();
      found.push_back({path, stdfs::relative(e.path(), input).generic_string(), e.file_size(ec2)});
      if (ec2) throw UsageError("cannot read the size of " + path + ": " + ec2.message());
    }
    if (ec)
      throw UsageError("cannot list input directory " + input + ": " + ec.message() +
                       ": make it readable or leave it out");
    std::sort(found.begin(), found.end(), [](const Document& a, const Document& b) { return a.name < b.name; });
    docs.insert(docs.end(), found.begin(), found.end());
  }
  // The same file named twice (twice on the command line, or as a file and inside a directory given too) is one
  // document: twice, it would be trained on twice and could land in both splits.
  std::set<std::pair<dev_t, ino_t>> seen;
  std::vector<Document> unique;
  for (Document& d : docs) {
    struct stat st {};
    if (::stat(d.path.c_str(), &st) == 0 && !seen.insert({st.st_dev, st.st_ino}).second) continue;
    unique.push_back(std::move(d));
  }
  if (unique.empty())
    throw UsageError(
        "the inputs hold no files" +
        (options.extension.empty() ? std::string() : " ending with '" + options.extension + "'") +
        (skipped_links == 0
             ? std::string(": the corpus is empty; name directories that contain text files")
             : " but " + std::to_string(skipped_links) +
                   " symbolic link(s), which are not followed inside input directories (a model-hub cache holds "
                   "links): name the files they point to with --input, or copy them into a directory"));
  return {std::move(unique), skipped_links};
}

std::string read_document(const Document& doc) {
  if (doc.bytes > kMaxDocumentBytes)
    throw UsageError("input " + doc.path + " has " + std::to_string(doc.bytes) + " bytes, more than a document may (" +
                     std::to_string(kMaxDocumentBytes) + "): split it into smaller files");
  std::string text;
  try {
    text = fs::read_file(doc.path);
  } catch (const IoError& e) {
    throw UsageError(std::string("cannot read input: ") + e.what());
  }
  if (text.size() > kMaxDocumentBytes)
    throw UsageError("input " + doc.path + " grew beyond " + std::to_string(kMaxDocumentBytes) + " bytes while read");
  if (const std::size_t bad = invalid_utf8_at(text); bad != std::string_view::npos)
    throw UsageError("input " + doc.path + " is not UTF-8 text: byte " + std::to_string(bad) + " (0x" +
                     "0123456789abcdef"[static_cast<unsigned char>(text[bad]) >> 4] +
                     "0123456789abcdef"[static_cast<unsigned char>(text[bad]) & 15] +
                     (text[bad] == 0 ? ", NUL: a binary file?" : "") +
                     ") is not part of a valid UTF-8 character; convert it (iconv -t UTF-8) or leave it out "
                     "(--extension selects files by name)");
  return text;
}

}  // namespace tenax::datatool
