#!/usr/bin/env bash
# Installs WordNet 3.0 for nltk (METEOR needs it) without the NLTK downloader, which needs the internet.
#
# WordNet is not on PyPI; Debian ships it as `wordnet-base` + `wordnet-sense-index`. nltk's reader wants
# those files in <nltk_data>/corpora/wordnet/ as real files (it refuses symlinks) plus a `lexnames` file,
# which Debian does not ship (it is only described in lexnames(5WN)), so it is written here.
#
# Usage: scripts/install_wordnet.sh [NLTK_DATA_DIR]     (default: /usr/share/nltk_data, on nltk's path
#        for every interpreter and venv). Idempotent; needs root for apt-get.
set -euo pipefail

DATA_DIR="${1:-/usr/share/nltk_data}"
TARGET="$DATA_DIR/corpora/wordnet"
SRC=/usr/share/wordnet
FILES="cntlist.rev index.sense index.adj index.adv index.noun index.verb data.adj data.adv data.noun data.verb
adj.exc adv.exc noun.exc verb.exc"

if [ ! -f "$SRC/data.noun" ] || [ ! -f "$SRC/index.sense" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends wordnet-base wordnet-sense-index >/dev/null
fi

mkdir -p "$TARGET"
for f in $FILES; do
  cp --dereference --remove-destination "$SRC/$f" "$TARGET/$f"
done

# lexnames(5WN): file number, lexicographer file name, syntactic category (1 noun, 2 verb, 3 adj, 4 adv).
LEXNAMES="adj.all:3 adj.pert:3 adv.all:4 noun.Tops:1 noun.act:1 noun.animal:1 noun.artifact:1
noun.attribute:1 noun.body:1 noun.cognition:1 noun.communication:1 noun.event:1 noun.feeling:1 noun.food:1
noun.group:1 noun.location:1 noun.motive:1 noun.object:1 noun.person:1 noun.phenomenon:1 noun.plant:1
noun.possession:1 noun.process:1 noun.quantity:1 noun.relation:1 noun.shape:1 noun.state:1 noun.substance:1
noun.time:1 verb.body:2 verb.change:2 verb.cognition:2 verb.communication:2 verb.competition:2
verb.consumption:2 verb.contact:2 verb.creation:2 verb.emotion:2 verb.motion:2 verb.perception:2
verb.possession:2 verb.social:2 verb.stative:2 verb.weather:2 adj.ppl:3"
i=0
: > "$TARGET/lexnames"
for entry in $LEXNAMES; do
  printf '%02d\t%s\t%s\n' "$i" "${entry%%:*}" "${entry##*:}" >> "$TARGET/lexnames"
  i=$((i + 1))
done
[ "$i" -eq 45 ] || { echo "install_wordnet: expected 45 lexnames, wrote $i" >&2; exit 1; }

echo "WordNet 3.0 installed for nltk in $TARGET"
