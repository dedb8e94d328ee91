#!/usr/bin/env bash
# Start or stop the loopback servers the remote-store tests read from:
#   nginx      serves fixtures/ over HTTP (range requests)       -> DAMACY_TEST_HTTP_URL
#   moto       an S3 server with fixtures/ uploaded to a bucket   -> DAMACY_TEST_S3_URL
# `start` installs what is missing (Debian's nginx, moto[server] in .venv), writes
# .services/env for the tests to source, and is idempotent; `stop` ends both servers.
# Only 127.0.0.1 is ever used.
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

start_nginx() {
  install_nginx || { log "nginx could not be installed"; return 1; }
  local nginx_bin; nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
  http_port="$(free_port "$http_port")" || { log "no free port for nginx"; return 1; }
  mkdir -p "$state/nginx/tmp"
  cat >"$state/nginx/nginx.conf" <<CONF
worker_processes 1;
pid $state/nginx/nginx.pid;
error_log $state/nginx/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $state/nginx/tmp/body;
  proxy_temp_path $state/nginx/tmp/proxy;
  fastcgi_temp_path $state/nginx/tmp/fastcgi;
  uwsgi_temp_path $state/nginx/tmp/uwsgi;
  scgi_temp_path $state/nginx/tmp/scgi;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$http_port;
    root $root/fixtures;
    location / { }
  }
}
CONF
  "$nginx_bin" -p "$state/nginx" -c "$state/nginx/nginx.conf" || return 1
  wait_port 127.0.0.1 "$http_port" 10
}

start_moto() {
  [ -x "$venv/bin/moto_server" ] || "$venv/bin/python" -m pip install --quiet "moto[server]>=5,<6"
  s3_port="$(free_port "$s3_port")" || { log "no free port for moto"; return 1; }
  mkdir -p "$state/moto"
  nohup "$venv/bin/moto_server" -H 127.0.0.1 -p "$s3_port" >"$state/moto/server.log" 2>&1 &
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
    echo "export DAMACY_TEST_HTTP_SKIP='nginx could not be started (see .services/nginx/error.log)'" >>"$state/env"
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

stop_quiet() {
  if [ -f "$state/nginx/nginx.pid" ]; then kill "$(cat "$state/nginx/nginx.pid")" 2>/dev/null || true; rm -f "$state/nginx/nginx.pid"; fi
  if [ -f "$state/moto/pid" ]; then kill "$(cat "$state/moto/pid")" 2>/dev/null || true; rm -f "$state/moto/pid"; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop_quiet; log "stopped" ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
