#!/usr/bin/env bash
# Make a Docker engine answer on this host, installing Debian's docker.io when
# needed. Idempotent: does nothing when `docker info` already works.
# Also installs debootstrap (needed by images/build.sh for the base image) and the
# FUSE development files the lossy disk layer's host tests build pyfuse3 against.
set -euo pipefail

log() { printf 'setup-host: %s\n' "$*" >&2; }
# Other processes (parallel sessions, CI steps) may hold the dpkg lock: wait for it.
APT=(apt-get -q -y -o DPkg::Lock::Timeout=600)

need_pkgs=()
command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
# The FUSE layer's own tests run on the host: fuse3 and what pyfuse3 builds against.
command -v fusermount3 >/dev/null 2>&1 || need_pkgs+=(fuse3)
[ -f /usr/include/fuse3/fuse.h ] || need_pkgs+=(libfuse3-dev)
command -v pkg-config >/dev/null 2>&1 || need_pkgs+=(pkg-config)
command -v gcc >/dev/null 2>&1 || need_pkgs+=(gcc)
# The HTML report's tests render it in headless Chromium.
command -v chromium >/dev/null 2>&1 || need_pkgs+=(chromium fonts-dejavu-core)

if docker info >/dev/null 2>&1 && [ ${#need_pkgs[@]} -eq 0 ]; then
    log "docker engine answers; nothing to do"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    log "no Docker engine answers and we are not root."
    log "fix: start dockerd (e.g. 'sudo systemctl start docker') or run this script as root."
    exit 1
fi

if [ ${#need_pkgs[@]} -gt 0 ]; then
    log "installing ${need_pkgs[*]}"
    DEBIAN_FRONTEND=noninteractive "${APT[@]}" update >/dev/null
    DEBIAN_FRONTEND=noninteractive "${APT[@]}" install --no-install-recommends \
        "${need_pkgs[@]}" iptables ca-certificates >/dev/null
fi

if docker info >/dev/null 2>&1; then
    log "docker engine answers"
    exit 0
fi

if pgrep -x dockerd >/dev/null 2>&1; then
    log "dockerd is running but does not answer yet; waiting"
else
    log "starting dockerd in the background (log: /var/log/dockerd.log)"
    # setsid: the daemon must outlive this script and the shell that ran it.
    setsid nohup dockerd >/var/log/dockerd.log 2>&1 </dev/null &
fi

for _ in $(seq 1 60); do
    if docker info >/dev/null 2>&1; then
        log "docker engine answers"
        exit 0
    fi
    sleep 1
done
log "dockerd did not answer within 60 s; last lines of /var/log/dockerd.log:"
tail -n 20 /var/log/dockerd.log >&2 || true
exit 1
