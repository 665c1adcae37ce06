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
# Two lanes at once: the tests that start Ray (searches, studies, corpus preparations; never two at
# once, as some find their workers among the host's processes) in this process, and every other test
# beside them, at a lower priority so that it takes the CPU a search leaves idle (about a third)
# rather than slowing the Ray lane, the longer one; its output follows the Ray lane's. Ctrl-C (or a
# kill) stops both lanes.
other_log="$(mktemp)"
other_lane=""
stop_other_lane() {
  [ -z "$other_lane" ] || kill "$other_lane" 2>/dev/null || true
  rm -f "$other_log"
}
trap stop_other_lane EXIT
trap 'exit 130' INT TERM
nice -n 10 "$python" -m pytest -m "not ray" -p no:cacheprovider >"$other_log" 2>&1 &
other_lane=$!
ray_status=0
"$python" -m pytest -m "ray and not onprem and not autoscaling" || ray_status=$?
other_status=0
wait "$other_lane" || other_status=$?
other_lane=""
echo "== the tests that start no Ray (pytest -m 'not ray'), run beside those that do =="
cat "$other_log"
[ "$ray_status" -eq 0 ] && [ "$other_status" -eq 0 ] || exit 1
exec "$python" -m pytest -m "onprem or autoscaling"
