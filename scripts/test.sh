#!/usr/bin/env bash
# Install what is needed (first run only), then run the test suite. Arguments go to pytest.
# Without arguments, three groups: the cluster step (it brings a Ray cluster up over SSH on
# 127.0.0.1, and `ray down` stops every Ray process on the host), then the tests that start Ray, one
# at a time, while every other test runs beside both at a lower priority.
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
# The tests that start no Ray (pytest -m 'not ray') run in the background throughout, at a lower
# priority, taking the CPU the Ray tests leave idle (about a third) rather than slowing them. In the
# foreground, one at a time: first the cluster step (autoscaling and on-prem: it brings a Ray
# cluster up over SSH on 127.0.0.1, and `ray down` stops every Ray process on the host, so it runs
# while no other Ray does), then the tests that start Ray (searches, studies, corpus preparations;
# never two at once, as some find their workers among the host's processes). The background lane's
# output follows theirs. Ctrl-C (or a kill) stops everything.
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
cluster_status=0
"$python" -m pytest -m "onprem or autoscaling" || cluster_status=$?
ray_status=0
"$python" -m pytest -m "ray and not onprem and not autoscaling" || ray_status=$?
other_status=0
wait "$other_lane" || other_status=$?
other_lane=""
echo "== the tests that start no Ray (pytest -m 'not ray'), run beside the others =="
cat "$other_log"
[ "$cluster_status" -eq 0 ] && [ "$ray_status" -eq 0 ] && [ "$other_status" -eq 0 ] || exit 1
