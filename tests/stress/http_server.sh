#!/usr/bin/env bash
# serve's HTTP server under ThreadSanitizer, then under AddressSanitizer + UBSan: tests/stress/bare_http_server.cpp
# (the server with trivial hooks and 2 answering threads) built each way, driven by tests/stress/mixed_http_clients.py
# for SECONDS, then stopped with SIGTERM while clients still come (the drain, then what is still arriving refused).
# Fails when a client got a wrong answer, the server did not stop cleanly, or a sanitizer reported anything.
#   tests/stress/http_server.sh [SECONDS (default 20)] [OUT (default build-asan/http_stress)]
# Run by `./bertrain.sh asan`; needs g++ and python3 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-20}
out=${2:-build-asan/http_stress}
mkdir -p "$out"
sources=(tests/stress/bare_http_server.cpp tools/serve/http_server.cpp tools/serve/http_request_reader.cpp
         core/error.cpp)
failed=0
for sanitizer in thread address,undefined; do
  name=${sanitizer%%,*}
  binary=$out/bare_http_server_$name
  g++ -std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize="$sanitizer" -fno-sanitize-recover=undefined -I. -pthread \
      "${sources[@]}" -o "$binary"
  log=$out/server_$name.log
  "$binary" 0 2 2> "$log" &
  pid=$!
  for _ in $(seq 100); do grep -q '^ready' "$log" && break; sleep 0.1; done
  port=$(sed -n 's/^ready \([0-9]*\)$/\1/p' "$log")
  if [ -z "$port" ]; then
    echo "http_server.sh: $name: the server did not start:" >&2
    cat "$log" >&2
    kill "$pid" 2> /dev/null || true
    failed=1
    continue
  fi
  echo "http_server.sh: $name: clients for $seconds s against port $port"
  python3 tests/stress/mixed_http_clients.py "$port" "$seconds" || failed=1
  python3 tests/stress/mixed_http_clients.py "$port" 3 > /dev/null 2>&1 &  # still coming when the server stops
  clients=$!
  sleep 1
  kill -TERM "$pid"
  status=0
  wait "$pid" || status=$?
  wait "$clients" || true
  if [ "$status" -ne 0 ] || ! grep -q '^stopped' "$log" ||
     grep -qE 'ThreadSanitizer|AddressSanitizer|LeakSanitizer|runtime error' "$log"; then
    echo "http_server.sh: $name: exit $status; the server's log ($log):" >&2
    cat "$log" >&2
    failed=1
  else
    echo "http_server.sh: $name: clean ($(grep '^stopped' "$log"))"
  fi
done
exit "$failed"
