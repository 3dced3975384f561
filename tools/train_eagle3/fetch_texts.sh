#!/usr/bin/env bash
# Fetches the public text that widens the EAGLE-3 head's training prompts beyond prompts.py's
# templates (tools/train_eagle3/texts.py), from Debian packages, into .device_model/texts/
# (git-ignored; carried to the GPU machine, which has no package registry):
#   fortunes, fortunes-min  BSD fortune(6) cookie files: quotations, sayings, jokes, verse
#                           (licence: BSD, /usr/share/doc/fortunes/copyright)
#   wamerican               SCOWL's American English word list (licence: permissive, SCOWL
#                           copyright in /usr/share/doc/wamerican/copyright)
# Their copyright files travel with the text.
#   bash tools/train_eagle3/fetch_texts.sh [DEST]
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-.device_model/texts}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download fortunes fortunes-min wamerican >/dev/null 2>&1) ||
  { apt-get update -qq && (cd "$work" && apt-get download fortunes fortunes-min wamerican >/dev/null); }
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
rm -rf "$DEST" && mkdir -p "$DEST/fortunes" "$DEST/copyright"
# The cookie files themselves (no .dat indexes, no .u8 duplicates).
find "$work/root/usr/share/games/fortunes" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' -exec cp {} "$DEST/fortunes/" \;
cp "$work/root/usr/share/dict/american-english" "$DEST/words"
cp "$work/root/usr/share/doc/fortunes/copyright" "$DEST/copyright/fortunes"
cp "$work/root/usr/share/doc/wamerican/copyright" "$DEST/copyright/wamerican"
echo "$DEST: $(ls "$DEST/fortunes" | wc -l) fortune files, $(wc -l < "$DEST/words") words ($(du -sh "$DEST" | cut -f1))"
