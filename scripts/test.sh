#!/usr/bin/env bash
# Install what is needed (first run only), then run the test suite. Arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
# The report test opens report.html in Debian's headless Chromium; install it where apt-get can.
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
  as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo -n)
  apt_get() { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -qq "$@" >/dev/null 2>&1; }
  apt_get install chromium || { apt_get update && apt_get install chromium; } ||
    echo "test.sh: could not install chromium (apt-get install -y chromium); the report test will fail" >&2
fi
cd "$root"
exec "$root/.venv/bin/python" -m pytest "$@"
