#!/usr/bin/env bash
# The figures of README.md, made again from the quick start's own replay
# and `calcmets plot`, exactly as the README shows them:
#
#   scripts/readme-figures.sh            # writes docs/figures/quickstart-*.svg
#   scripts/readme-figures.sh --check DIR
#
# --check compares the figures in docs/figures with those `calcmets plot`
# drew into DIR (scripts/examples.sh passes the quick start's results/plots):
# the same titles, axis labels, units and legends, word for word. The data
# are a real replay's and differ a little from run to run; what the code
# draws around them may not drift from what the README shows.
set -euo pipefail
cd "$(dirname "$0")/.."
# The README's figures, and the chart of the quick start each is.
figures=(
  "quickstart-timeline.svg:load-100-timeline.svg"
  "quickstart-cdf-wait.svg:cdf-wait.svg"
)

# The words of an SVG: every text element that is not a number (tick
# labels are the data's).
words() {
  python3 - "$1" <<'EOF'
import re, sys
texts = re.findall(r"<text[^>]*>([^<]*)</text>", open(sys.argv[1]).read())
for t in sorted(set(texts)):
    t = t.strip()
    if re.search(r"[A-Za-z]{2}", t) and not re.fullmatch(r"[-+0-9.e ]+", t):
        # A legend's job count and the averaging interval are the data's.
        print(re.sub(r"[0-9][0-9.]*", "N", t))
EOF
}

if [ "${1:-}" = --check ]; then
  dir=${2:?usage: scripts/readme-figures.sh --check DIR}
  status=0
  for f in "${figures[@]}"; do
    kept=docs/figures/${f%%:*} drawn=$dir/${f#*:}
    if ! diff <(words "$kept") <(words "$drawn") > /dev/null; then
      echo "readme-figures: $kept no longer says what calcmets plot draws ($drawn):" >&2
      diff <(words "$kept") <(words "$drawn") >&2 || true
      echo "readme-figures: make them again with scripts/readme-figures.sh" >&2
      status=1
    fi
  done
  exit $status
fi

cargo build --release -q
host=$(rustc -vV | sed -n 's/^host: //p')
export PATH=$PWD/target/$host/release:$PATH
tmp=$(mktemp -d -t readme-figures-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# The quick start, as README.md runs it.
runworkload --config configs/demo.toml --workload configs/workloads/kth-sp2-200.swf \
  --speedup 10000 --cores-per-proc 2 --load 100:150:50 --out "$tmp/results" -q > /dev/null
calcmets plot --out "$tmp/results/plots" "$tmp/results" > /dev/null
mkdir -p docs/figures
for f in "${figures[@]}"; do
  cp "$tmp/results/plots/${f#*:}" "docs/figures/${f%%:*}"
  echo "docs/figures/${f%%:*}"
done
