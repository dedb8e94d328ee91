#!/usr/bin/env bash
# Start or stop the loopback servers the remote-store tests read from:
#   nginx      serves fixtures/ over HTTP (range requests)       -> DAMACY_TEST_HTTP_URL
#   moto       an S3 server with fixtures/ uploaded to a bucket   -> DAMACY_TEST_S3_URL
# `start` installs what is missing (Debian's nginx, moto[server] in .venv), writes
# .services/env for the tests to source, and is idempotent; `stop` ends both servers.
# Only 127.0.0.1 is ever used. Both servers run as the invoking user (root or not) and keep
# their pid, log and temp files under .services/, so the checkout may sit anywhere, in a folder
# no other user can enter too.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
state="$root/.services"
venv="$root/.venv"
http_port="${DAMACY_TEST_HTTP_PORT:-18231}"
s3_port="${DAMACY_TEST_S3_PORT:-18261}"
bucket="damacy-fixtures"

log() { echo "services: $*" >&2; }

port_in_use() {  # port
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

free_port() {  # first port from $1 that nothing listens on (30 tries)
  local p
  for ((p = $1; p < $1 + 30; p++)); do
    if ! port_in_use "$p"; then echo "$p"; return 0; fi
  done
  return 1
}

wait_port() {  # host port seconds
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}

install_nginx() {
  command -v nginx >/dev/null && return 0
  [ -x /usr/sbin/nginx ] && return 0
  log "installing nginx (Debian)"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx >/dev/null
  else
    sudo -n apt-get update -qq >/dev/null && sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx >/dev/null
  fi
}

# Both servers run as the user who runs this script and read the checkout with that user's
# rights, so a clone under a folder only its owner can enter (a mode-700 home) is served too.
# nginx as root would hand requests to workers running as nobody/www-data: as root the config
# names root itself as the workers' user; as anyone else there is no `user` line (nginx cannot
# switch users then, and its workers stay the invoking user). Every path nginx writes (pid, logs,
# temp files) is relative to its prefix, .services/nginx/, and the config names no absolute path,
# so a clone path with spaces or other odd characters needs no quoting there.
start_nginx() {
  install_nginx || { log "nginx could not be installed"; return 1; }
  local nginx_bin; nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
  http_port="$(free_port "$http_port")" || { log "no free port for nginx"; return 1; }
  local prefix="$state/nginx"
  mkdir -p "$prefix/tmp"
  local user_line="# not root: the worker runs as $(id -un), as the master does"
  if [ "$(id -u)" = 0 ]; then user_line="user $(id -un) $(id -gn);"; fi
  # Relative paths below are relative to the prefix ($state/nginx); fixtures/ is two levels up.
  cat >"$prefix/nginx.conf" <<CONF
$user_line
worker_processes 1;
pid nginx.pid;
error_log error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path tmp/body;
  proxy_temp_path tmp/proxy;
  fastcgi_temp_path tmp/fastcgi;
  uwsgi_temp_path tmp/uwsgi;
  scgi_temp_path tmp/scgi;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$http_port;
    root ../../fixtures;
    location / { }
    # A prefix that refuses every request, for the tests of storage error kinds.
    location /forbidden/ { return 403; }
  }
}
CONF
  # -e (nginx >= 1.19.5) keeps even the log written before the config is read out of /var/log.
  local early_log=()
  case "$("$nginx_bin" -h 2>&1)" in *"-e filename"*) early_log=(-e "$prefix/error.log") ;; esac
  "$nginx_bin" -p "$prefix/" -c "$prefix/nginx.conf" ${early_log[@]+"${early_log[@]}"} || return 1
  wait_port 127.0.0.1 "$http_port" 10 || return 1
  # A worker that cannot read the checkout answers 403: say so now, not as a test failure later.
  local probes=("$root"/fixtures/v3/*/zarr.json)
  if [ -f "${probes[0]}" ] && command -v curl >/dev/null; then
    local probe="${probes[0]#"$root/fixtures/"}" code
    code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http_port/$probe" || true)"
    [ "$code" = 200 ] || { log "nginx answers $code for fixtures/$probe"; return 1; }
  fi
}

# moto runs as the invoking user from its own folder, with its temp files under .services/moto/.
start_moto() {
  if [ ! -x "$venv/bin/python" ]; then
    log "creating $venv"
    "${PYTHON:-python3}" -m venv "$venv" || return 1
  fi
  if ! "$venv/bin/python" -c 'import moto.server, boto3' 2>/dev/null; then
    log "installing moto[server] in $venv"
    "$venv/bin/python" -m pip install --quiet "moto[server]>=5,<6" || return 1
  fi
  s3_port="$(free_port "$s3_port")" || { log "no free port for moto"; return 1; }
  mkdir -p "$state/moto/tmp"
  (cd "$state/moto" && TMPDIR="$state/moto/tmp" exec nohup "$venv/bin/python" -m moto.server \
    -H 127.0.0.1 -p "$s3_port" >"$state/moto/server.log" 2>&1 </dev/null) &
  echo $! >"$state/moto/pid"
  wait_port 127.0.0.1 "$s3_port" 30 || return 1
  kill -0 "$(cat "$state/moto/pid")" 2>/dev/null || return 1
  AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing "$venv/bin/python" - "$root/fixtures" "$s3_port" "$bucket" <<'PY'
import os, sys
import boto3
root, port, bucket = sys.argv[1], sys.argv[2], sys.argv[3]
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1")
s3.create_bucket(Bucket=bucket)
n = 0
for sub in ("v2", "v3"):
    for dirpath, _, files in os.walk(os.path.join(root, sub)):
        for f in files:
            path = os.path.join(dirpath, f)
            s3.upload_file(path, bucket, os.path.relpath(path, root))
            n += 1
print(f"services: uploaded {n} objects to s3://{bucket}", file=sys.stderr)
PY
}

start() {
  mkdir -p "$state"
  stop_quiet
  : >"$state/env"
  if start_nginx; then
    echo "export DAMACY_TEST_HTTP_URL=http://127.0.0.1:$http_port" >>"$state/env"
    log "nginx on 127.0.0.1:$http_port"
  else
    echo "export DAMACY_TEST_HTTP_SKIP='nginx could not be started or could not read fixtures/ (see .services/nginx/error.log)'" >>"$state/env"
  fi
  if start_moto; then
    cat >>"$state/env" <<ENV
export DAMACY_TEST_S3_URL=s3://$bucket
export DAMACY_TEST_S3_ENDPOINT=http://127.0.0.1:$s3_port
ENV
    log "moto S3 on 127.0.0.1:$s3_port"
  else
    echo "export DAMACY_TEST_S3_SKIP='moto_server could not be started (see .services/moto/server.log)'" >>"$state/env"
  fi
}

# End the process in pid file $1 if it is still the server named $2 (a stale pid file after a
# reboot may name someone else's process now): TERM, then up to 10 s for it and its children
# (nginx's worker) to exit, then KILL for whatever is left.
stop_pid() {  # pidfile name
  [ -f "$1" ] || return 0
  local pid; pid="$(cat "$1" 2>/dev/null || true)"
  case "$pid" in ''|*[!0-9]*) rm -f "$1"; return 0 ;; esac
  running "$pid" || { rm -f "$1"; return 0; }
  if [ -r "/proc/$pid/cmdline" ]; then
    local cmd; cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)"
    case "$cmd" in
      *"$2"*) ;;
      *) log "pid $pid in $1 is not $2 any more; left alone"; rm -f "$1"; return 0 ;;
    esac
  fi
  local kids; kids="$(pgrep -P "$pid" 2>/dev/null || true)"
  kill "$pid" 2>/dev/null || true
  local i p alive=1
  for ((i = 0; i < 100 && alive; i++)); do
    alive=""
    for p in $pid $kids; do running "$p" && alive=1; done
    [ -n "$alive" ] && sleep 0.1
  done
  if [ -n "$alive" ]; then
    log "$2 (pid $pid) did not stop on TERM; killing it"
    for p in $pid $kids; do kill -9 "$p" 2>/dev/null || true; done
  fi
  rm -f "$1"  # nginx removes its own on exit; moto's is ours
}

running() {  # pid: alive and not a zombie waiting for a parent that does not reap it
  kill -0 "$1" 2>/dev/null || return 1
  [ -r "/proc/$1/stat" ] || return 0
  local stat; stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [ "${stat%% *}" != Z ]
}

stop_quiet() {
  stop_pid "$state/nginx/nginx.pid" nginx
  stop_pid "$state/moto/pid" moto
}

case "${1:-}" in
  start) start ;;
  stop) stop_quiet; log "stopped" ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
