#!/usr/bin/env bash
# Prepares the real-text token dataset tenax's language-model training uses: the reST sources of the Python 3.11
# documentation (Debian package python3.11-doc, ~11 MB of English prose and code in 497 files; nothing is downloaded),
# a SentencePiece BPE tokenizer trained on them, and train/validation token shards (docs/data-format.md).
#
#   scripts/prepare-corpus.sh OUT_DIR [--vocab N] [--validation-fraction F] [--shard-tokens N] [--tool PATH]
#
# OUT_DIR becomes the dataset directory (index.json, tokenizer.model, *.tok). Cached: when OUT_DIR already holds a
# complete dataset whose checksums verify and whose label records the same inputs (every source file's SHA-256), the
# same options and the same tenax-data version, nothing is done. Otherwise the dataset is built next to OUT_DIR and
# moved into place; an OUT_DIR that is neither empty nor a tenax dataset is refused, never replaced.
# tenax-data is taken from --tool, else PATH, else build/ or build-dev/ of this checkout.
# Exit codes: 0 ready (built or cached), 64 bad arguments or missing package, 1 a step failed.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sources=/usr/share/doc/python3.11/html/_sources
usage() {
  echo "usage: scripts/prepare-corpus.sh OUT_DIR [--vocab N] [--validation-fraction F] [--shard-tokens N] [--tool PATH]" >&2
  exit 64
}

out=
vocab=8192
fraction=0.01
shard_tokens=67108864
tool=
while (($#)); do
  case "$1" in
    --vocab) vocab=${2:?--vocab needs a value}; shift 2 ;;
    --validation-fraction) fraction=${2:?--validation-fraction needs a value}; shift 2 ;;
    --shard-tokens) shard_tokens=${2:?--shard-tokens needs a value}; shift 2 ;;
    --tool) tool=${2:?--tool needs a path}; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "prepare-corpus: unknown option $1" >&2; usage ;;
    *) [[ -z "$out" ]] || { echo "prepare-corpus: one OUT_DIR only (got $out and $1)" >&2; usage; }; out=$1; shift ;;
  esac
done
[[ -n "$out" ]] || { echo "prepare-corpus: OUT_DIR is missing" >&2; usage; }
out=${out%/}

if [[ ! -d "$sources/library" ]]; then
  echo "prepare-corpus: $sources is missing: install python3.11-doc (scripts/install-deps.sh does)" >&2
  exit 64
fi
if [[ -z "$tool" ]]; then
  tool=$(command -v tenax-data || true)
  for candidate in "$root/build/data/src/tenax-data" "$root/build-dev/data/src/tenax-data"; do
    [[ -n "$tool" ]] && break
    [[ -x "$candidate" ]] && tool=$candidate
  done
fi
if [[ -z "$tool" || ! -x "$tool" ]]; then
  echo "prepare-corpus: tenax-data not found: build it (scripts/build.sh) or pass --tool PATH" >&2
  exit 64
fi

# The cache key: the tool's version (format versions included), the options, and the content of every input file.
inputs_digest=$(cd "$sources" && find . -name '*.txt' -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum |
  sha256sum | cut -c1-64)
label="prepare-corpus python3.11-doc sha256=$inputs_digest vocab=$vocab validation=$fraction shard=$shard_tokens; $("$tool" --version)"

# Whether every entry of directory $1 is a file a dataset directory holds (docs/data-format.md): replacing it then
# loses nothing but a dataset.
only_dataset_files() {
  local entry
  for entry in "$1"/* "$1"/.[!.]* "$1"/..?*; do
    [[ -e "$entry" || -L "$entry" ]] || continue
    [[ -f "$entry" && ! -L "$entry" ]] || return 1
    case "${entry##*/}" in
      index.json | tokenizer.model | train-[0-9]*.tok | validation-[0-9]*.tok) ;;
      *) return 1 ;;
    esac
  done
}

if [[ -e "$out" || -L "$out" ]]; then
  # A dataset reached through a link is used as it is; only replacing it is refused below (the link, not its target,
  # would be moved).
  if [[ -d "$out" && -f "$out/index.json" ]] && only_dataset_files "$out" &&
    "$tool" verify "$out" --label "$label" >/dev/null 2>&1; then
    echo "prepare-corpus: $out is up to date (cached; verified)"
    exit 0
  fi
  if [[ -L "$out" || ! -d "$out" ]]; then
    echo "prepare-corpus: $out exists and is not a directory (or is a link); refusing to replace it: choose another" \
      "OUT_DIR" >&2
    exit 64
  elif [[ -z "$(ls -A "$out")" ]]; then
    :
  elif [[ -f "$out/index.json" ]] && only_dataset_files "$out"; then
    # Only a dataset this script made is rebuilt: its label says so (or its index is too damaged to say anything).
    made_by=$("$tool" info "$out" 2>/dev/null | sed -n 's/^label  *//p' || true)
    if "$tool" info "$out" >/dev/null 2>&1 && [[ "$made_by" != "prepare-corpus "* ]]; then
      echo "prepare-corpus: $out holds a tenax dataset this script did not make (label: \"$made_by\"); refusing to" \
        "replace it: choose another OUT_DIR" >&2
      exit 64
    fi
    echo "prepare-corpus: $out is outdated or damaged; rebuilding it" >&2
  else
    echo "prepare-corpus: $out exists and is not a tenax dataset (it holds files a dataset does not); refusing to" \
      "replace it: choose another OUT_DIR" >&2
    exit 64
  fi
fi

parent=$(dirname "$out")
mkdir -p "$parent"
work=$(mktemp -d "$parent/.prepare-corpus.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$(date +%s.%N)
"$tool" train-tokenizer --input "$sources" --extension .txt --vocab "$vocab" --output "$work/tokenizer.model"
"$tool" encode --input "$sources" --extension .txt --tokenizer "$work/tokenizer.model" --output "$work/dataset" \
  --validation-fraction "$fraction" --shard-tokens "$shard_tokens" --label "$label"
"$tool" verify "$work/dataset" --label "$label"

# Into place: an empty or outdated OUT_DIR is moved aside first (rename), then the new dataset renamed in.
if [[ -e "$out" ]]; then
  mv -T "$out" "$work/old"
fi
mv -T "$work/dataset" "$out"
end=$(date +%s.%N)
echo "prepare-corpus: $out ready in $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s"
"$tool" info "$out"
