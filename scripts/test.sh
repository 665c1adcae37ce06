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
# Two lanes at once. The Ray lane, in this process: the tests that start Ray and may look at the
# host's processes or at Ray's own record of "the" cluster (searches, studies, killed workers; never
# two at once). The other lane beside it, at a lower priority so that it takes the CPU a search
# leaves idle (about a third) rather than slowing the Ray lane, the longer one: every test that
# starts no Ray, then the Ray tests marked `own_ray` (their Ray is their own, and they look for no
# process they did not start; tests/conftest.py gives every Ray a test starts the start-up limits of
# a busy machine). Its output follows the Ray lane's. Ctrl-C (or a kill) stops both lanes.
other_log="$(mktemp)"
other_lane=""
stop_other_lane() {
  if [ -n "$other_lane" ]; then
    # SIGTERM: pytest takes it as Ctrl-C (tests/conftest.py), and its fixtures stop the Ray nodes they
    # started in sessions of their own; whatever of the lane is left after two minutes is killed
    kill -- "-$other_lane" 2>/dev/null || true
    for _ in $(seq 240); do kill -0 -- "-$other_lane" 2>/dev/null || break; sleep 0.5; done
    kill -KILL -- "-$other_lane" 2>/dev/null || true
  fi
  rm -f "$other_log"
}
trap stop_other_lane EXIT
trap 'exit 130' INT TERM
# setsid: the lane is a process group of its own, stopped whole (either pytest run); -w: its status
setsid -w nice -n 10 bash -c '
  status=0
  "$0" -m pytest -m "not ray" -p no:cacheprovider || status=$?
  "$0" -m pytest -m "own_ray and not onprem and not autoscaling" -p no:cacheprovider || status=$?
  exit "$status"' "$python" >"$other_log" 2>&1 &
other_lane=$!
ray_status=0
"$python" -m pytest -m "ray and not own_ray and not onprem and not autoscaling" || ray_status=$?
other_status=0
wait "$other_lane" || other_status=$?
other_lane=""
echo "== beside them: the tests that start no Ray (-m 'not ray'), then those with a Ray of their own (-m own_ray) =="
cat "$other_log"
rm -f "$other_log"
[ "$ray_status" -eq 0 ] && [ "$other_status" -eq 0 ] || exit 1
exec "$python" -m pytest -m "onprem or autoscaling"
