#!/usr/bin/env bash
# scripts/prepare-corpus.sh end to end on the real corpus (python3.11-doc): a cold build verifies; a second run with
# the same inputs and options is a cache hit that touches nothing; a damaged dataset is rebuilt; other options
# rebuild; a directory that is not a dataset (an index.json among other files included), or a dataset another tool
# made, is refused and left alone.
#   prepare_corpus_test.sh SCRIPT TENAX_DATA
set -euo pipefail
script=$1
tool=$2
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tenax-data-prepare-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
out=$scratch/pydoc

# Cold: builds and verifies.
bash "$script" "$out" --vocab 1000 --tool "$tool" >"$scratch/cold.log" 2>&1 || { cat "$scratch/cold.log"; fail "cold run"; }
grep -q "ready in" "$scratch/cold.log" || fail "cold run did not build: $(cat "$scratch/cold.log")"
"$tool" verify "$out" >/dev/null || fail "the built dataset does not verify"
"$tool" info "$out" | grep -q "vocab size     1000" || fail "vocabulary option not applied"
stamp=$(stat -c %Y.%i "$out/index.json")

# Cached: nothing rebuilt.
bash "$script" "$out" --vocab 1000 --tool "$tool" >"$scratch/warm.log" 2>&1 || fail "cached run"
grep -q "up to date (cached" "$scratch/warm.log" || fail "second run was not a cache hit: $(cat "$scratch/warm.log")"
[[ $(stat -c %Y.%i "$out/index.json") == "$stamp" ]] || fail "the cached run rewrote the dataset"

# Reached through a link: a cache hit all the same.
ln -s "$out" "$scratch/link"
bash "$script" "$scratch/link" --vocab 1000 --tool "$tool" >"$scratch/link.log" 2>&1 || fail "run through a link"
grep -q "up to date (cached" "$scratch/link.log" || fail "a linked dataset was not a cache hit: $(cat "$scratch/link.log")"

# Damaged: rebuilt, and valid again.
python3 -c "
import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[1000] ^= 1; open(p, 'wb').write(b)" \
  "$out/train-00000.tok"
bash "$script" "$out" --vocab 1000 --tool "$tool" >"$scratch/damaged.log" 2>&1 || fail "run after damage"
grep -q "outdated or damaged; rebuilding" "$scratch/damaged.log" || fail "damage not noticed: $(cat "$scratch/damaged.log")"
"$tool" verify "$out" >/dev/null || fail "the rebuilt dataset does not verify"

# Not a dataset: refused, untouched.
mkdir "$scratch/mine"
echo precious >"$scratch/mine/notes.txt"
if bash "$script" "$scratch/mine" --tool "$tool" >"$scratch/refused.log" 2>&1; then fail "replaced a foreign directory"; fi
grep -q "is not a tenax dataset" "$scratch/refused.log" || fail "wrong refusal: $(cat "$scratch/refused.log")"
[[ $(cat "$scratch/mine/notes.txt") == precious ]] || fail "the foreign directory was changed"
# A directory with an index.json among other files is not a dataset either.
mkdir "$scratch/web"
echo '{"name": "app"}' >"$scratch/web/index.json"
echo precious >"$scratch/web/important.txt"
if bash "$script" "$scratch/web" --tool "$tool" >"$scratch/web.log" 2>&1; then fail "replaced a directory with an index.json"; fi
grep -q "is not a tenax dataset (it holds files a dataset does not)" "$scratch/web.log" ||
  fail "wrong refusal: $(cat "$scratch/web.log")"
[[ $(cat "$scratch/web/important.txt") == precious && -f "$scratch/web/index.json" ]] || fail "the directory was changed"
# A dataset someone else made (its own label) is not this script's to replace.
mkdir "$scratch/text"
printf 'Some text of my own.\nAnd a second line of it.\n' >"$scratch/text/a.txt"
"$tool" encode --input "$scratch/text" --tokenizer "$out/tokenizer.model" --output "$scratch/own" \
  --validation-fraction 0 --label "my corpus" >/dev/null
if bash "$script" "$scratch/own" --tool "$tool" >"$scratch/own.log" 2>&1; then fail "replaced another dataset"; fi
grep -q 'holds a tenax dataset this script did not make (label: "my corpus")' "$scratch/own.log" ||
  fail "wrong refusal: $(cat "$scratch/own.log")"
"$tool" verify "$scratch/own" --label "my corpus" >/dev/null || fail "the other dataset was changed"
# No temporary directories left next to the outputs.
leftovers=$(find "$scratch" -maxdepth 1 -name '.prepare-corpus.*')
[[ -z "$leftovers" ]] || fail "left behind: $leftovers"
echo "prepare-corpus: cold build, cache hit, rebuild after damage and refusal all as expected"
