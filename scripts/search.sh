#!/usr/bin/env bash
# Install what is needed (first run only), then run a search. Arguments go to platform.search;
# with none, the default search: docsplit_long.yaml.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root"
if [ "$#" -eq 0 ]; then set -- docsplit_long.yaml; fi
exec "$root/.venv/bin/python" -m platform.search "$@"
