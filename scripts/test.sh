#!/usr/bin/env bash
# Install what is needed (first run only), then run the test suite. Arguments go to pytest.
# Without arguments the on-prem cluster test follows in a step of its own: it brings a Ray
# cluster up over SSH on 127.0.0.1 and `ray down` stops every Ray process on the host.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
# Debian packages the tests use: headless Chromium opens report.html; sshd and rsync carry the
# on-prem cluster test. Installed where apt-get can.
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
if [ "${#missing[@]}" -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo -n)
  apt_get() { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -qq "$@" >/dev/null 2>&1; }
  apt_get install "${missing[@]}" || { apt_get update && apt_get install "${missing[@]}"; } ||
    echo "test.sh: could not install ${missing[*]} (apt-get install -y ${missing[*]}); tests needing them will fail" >&2
fi
cd "$root"
python="$root/.venv/bin/python"
if [ "$#" -gt 0 ]; then
  exec "$python" -m pytest "$@"
fi
# Two lanes at once: the slow tests (Ray, searches; never two at once) in this process, and the fast
# tier (no Ray) beside them, in the CPU a search leaves idle; its output follows the slow lane's.
# Ctrl-C (or a kill) stops both lanes.
fast_log="$(mktemp)"
fast_lane=""
stop_fast_lane() {
  [ -z "$fast_lane" ] || kill "$fast_lane" 2>/dev/null || true
  rm -f "$fast_log"
}
trap stop_fast_lane EXIT
trap 'exit 130' INT TERM
"$python" -m pytest -m "not slow" -p no:cacheprovider >"$fast_log" 2>&1 &
fast_lane=$!
slow_status=0
"$python" -m pytest -m "slow and not onprem and not autoscaling" || slow_status=$?
fast_status=0
wait "$fast_lane" || fast_status=$?
fast_lane=""
echo "== the fast tier (pytest -m 'not slow'), run beside the slow tests =="
cat "$fast_log"
[ "$slow_status" -eq 0 ] && [ "$fast_status" -eq 0 ] || exit 1
exec "$python" -m pytest -m "onprem or autoscaling"
