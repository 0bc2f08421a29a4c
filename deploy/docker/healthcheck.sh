#!/bin/bash
# The images' HEALTHCHECK: healthy while GET /health answers 200 (the model is loaded; it stays
# 200 during a drain, docs/deploy.md "Probes"). Plain bash (/dev/tcp), so the runtime image
# needs no HTTP client. Port: $1, default 8000 (the entrypoint's).
set -euo pipefail
exec 3<>"/dev/tcp/127.0.0.1/${1:-8000}"
printf 'GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3
read -r -t 5 _ status _ <&3
[ "$status" = 200 ]
