#!/usr/bin/env bash
# Starts and stops a single-node Ceph RADOS Gateway (an S3 server) on
# loopback, from Debian's packages, for the test suite.
#
#   .ci/s3.sh start <dir>   install what is missing, start mon, OSD (memstore)
#                           and radosgw with all state under <dir>, create the
#                           user and the bucket `tributary`, write <dir>/env
#   .ci/s3.sh stop <dir>    stop the daemons started in <dir>; safe to call
#                           twice, or after a start that failed half way
#
# <dir>/env holds `export` lines for the AWS variables and TRIBUTARY_TEST_S3;
# `source` it. Facts and pitfalls: shared/docs/object-stores.md.
set -Eeuo pipefail

ACCESS_KEY=tributary
SECRET_KEY=tributary-secret
BUCKET=tributary
WAIT=60 # seconds: the bound on every wait

usage() {
    echo "usage: $0 start|stop <dir>" >&2
    exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
dir=$(realpath -m -- "$2")
conf=$dir/ceph.conf

log() { echo "s3.sh: $*" >&2; }

# The pids of this dir's daemons: those in its pid files, and any process
# whose command line names this dir's ceph.conf (a daemon may not have
# written its pid file yet when a start fails).
daemon_pids() {
    local f pid p
    {
        for f in "$dir"/run/*.pid; do
            [ -f "$f" ] || continue
            pid=$(cat "$f" 2>/dev/null || true)
            if [[ $pid =~ ^[0-9]+$ ]]; then echo "$pid"; fi
        done
        for p in /proc/[0-9]*; do
            if grep -qzxF -- "$conf" "$p/cmdline" 2>/dev/null; then
                echo "${p#/proc/}"
            fi
        done
        true
    } | sort -un | while read -r pid; do
        # Only ceph daemons started with this dir's config, whatever the pid
        # file says (the pid may have been reused).
        if grep -qzxF -- "$conf" "/proc/$pid/cmdline" 2>/dev/null &&
            grep -qxE 'ceph-mon|ceph-osd|radosgw' "/proc/$pid/comm" 2>/dev/null; then
            echo "$pid"
        fi
    done
    return 0
}

alive() { # pids...: prints those still running
    local pid
    for pid in "$@"; do
        if kill -0 "$pid" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null; then
            echo "$pid"
        fi
    done
    return 0
}

# Stops those of the daemons $2... whose command name is $1: TERM, at most
# 30 s, then KILL, at most 10 s more.
stop_some() {
    local name=$1 pids="" pid left i
    shift
    for pid in "$@"; do
        if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]; then pids+=" $pid"; fi
    done
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    for ((i = 0; i < 10 * 30; i++)); do
        # shellcheck disable=SC2086
        left=$(alive $pids)
        [ -n "$left" ] || return 0
        sleep 0.1
    done
    log "still running after 30 s, killing: ${left//$'\n'/ }"
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null || true
    for ((i = 0; i < 10 * 10; i++)); do
        # shellcheck disable=SC2086
        left=$(alive $left)
        [ -n "$left" ] || return 0
        sleep 0.1
    done
    log "could not stop: ${left//$'\n'/ }"
    return 1
}

# Gateway first, then the OSD while the monitor can still acknowledge its
# shutdown (else it waits 5 s for the ack), then the monitor.
stop() {
    [ -d "$dir" ] || return 0
    local pids
    pids=$(daemon_pids)
    if [ -n "$pids" ]; then
        # shellcheck disable=SC2086
        stop_some radosgw $pids
        # shellcheck disable=SC2086
        stop_some ceph-osd $pids
        # shellcheck disable=SC2086
        stop_some ceph-mon $pids
    fi
    rm -f "$dir"/run/*.pid
}

# On any failure during start: show what the logs say, stop what was
# started, exit non-zero.
fail() {
    local rc=$? f
    trap - ERR
    set +e
    log "start FAILED (exit $rc, line ${1:-?}); log tails follow"
    for f in "$dir"/log/setup.log "$dir"/log/*.log; do
        [ -f "$f" ] || continue
        case $f in */log/setup.log) [ "${shown:-}" ] && continue; shown=1 ;; esac
        echo "----- $f" >&2
        tail -n 25 "$f" >&2
    done
    stop
    exit 1
}

# Runs a command with its output in the setup log, bounded in time.
run() {
    echo "+ [$(date +%T.%3N)] $*" >>"$dir/log/setup.log"
    timeout "$WAIT" "$@" >>"$dir/log/setup.log" 2>&1
}

# Waits until a command succeeds, at most $WAIT seconds.
wait_for() { # what, command...
    local what=$1 deadline
    shift
    echo "+ [$(date +%T.%3N)] waiting for $what: $*" >>"$dir/log/setup.log"
    deadline=$((SECONDS + WAIT))
    # Only the last try's output is kept, and logged if it is the last.
    until timeout 10 "$@" >"$dir/log/wait.out" 2>&1; do
        if ((SECONDS >= deadline)); then
            cat "$dir/log/wait.out" >>"$dir/log/setup.log"
            log "timed out after $WAIT s waiting for $what"
            return 1
        fi
        sleep 0.2
    done
    echo "+ [$(date +%T.%3N)] $what: ready" >>"$dir/log/setup.log"
}

elapsed() { # start time (date +%s.%N): prints seconds since, to 0.1 s
    awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
}

free_ports() { # n: prints n distinct free loopback TCP ports
    python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

install_missing() {
    local need=0 c
    for c in ceph ceph-authtool monmaptool ceph-mon ceph-osd radosgw radosgw-admin; do
        command -v "$c" >/dev/null || need=1
    done
    if ((need)); then
        log "installing ceph-mon ceph-osd radosgw"
        {
            timeout 900 apt-get update &&
                DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y --no-install-recommends ceph-mon ceph-osd radosgw
        } >"$dir/log/apt.log" 2>&1 || {
            tail -n 30 "$dir/log/apt.log" >&2
            return 1
        }
    fi
    if ! python3 -c 'import importlib.util as u, sys; sys.exit(u.find_spec("boto3") is None)'; then
        log "installing boto3"
        timeout 900 python3 -m pip install --quiet --disable-pip-version-check boto3 2>&1 | grep -v "Running pip as the 'root' user" >&2 || true
        python3 -c 'import boto3'
    fi
}

start() {
    local started mon_port rgw_port fsid osd_uuid osd_id
    started=$(date +%s.%N)
    stop
    # Wipe the dir's state, but keep the dir itself (it may be a mktemp -d).
    mkdir -p "$dir"
    if [ "$dir" = / ] || { [ -n "$(ls -A "$dir")" ] && [ ! -f "$dir/.s3.sh" ]; }; then
        log "refusing to wipe $dir: not empty and not a dir this script made"
        exit 1
    fi
    find "$dir" -mindepth 1 -delete
    touch "$dir/.s3.sh"
    mkdir -p "$dir"/{log,run,mon,osd,crash}
    trap 'fail $LINENO' ERR

    install_missing
    log "packages ready after $(elapsed "$started") s"

    read -r mon_port rgw_port < <(free_ports 2)
    fsid=$(cat /proc/sys/kernel/random/uuid)
    cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$mon_port]
public addr = 127.0.0.1
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $dir/keyring
run dir = $dir/run
crash dir = $dir/crash
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
log to stderr = false
err to stderr = true
pid file = $dir/run/\$name.pid
mon data = $dir/mon/\$id
osd data = $dir/osd/\$id
osd objectstore = memstore
memstore device bytes = 2147483648
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
# A full-ish disk must not stop the monitor (its default stops it at 5 % free).
mon data avail warn = 1
mon data avail crit = 0
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
mon cluster log file = $dir/log/cluster.log
# Each map change (radosgw makes about ten while it creates its pools) waits
# this long for others to batch with; the default, 1 s, makes up half the start.
paxos propose interval = 0.05

[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$rgw_port tcp_nodelay=1
rgw data = $dir/rgw
EOF

    # One keyring for every entity; the mon imports it all at mkfs.
    local k=$dir/keyring
    run ceph-authtool --create-keyring "$k" --gen-key -n mon. --cap mon 'allow *'
    run ceph-authtool "$k" --gen-key -n client.admin \
        --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *'
    run ceph-authtool "$k" --gen-key -n client.rgw \
        --cap mon 'allow rw' --cap osd 'allow rwx' --cap mgr 'allow rw'
    run ceph-authtool "$k" --gen-key -n osd.0 \
        --cap mon 'allow profile osd' --cap mgr 'allow profile osd' --cap osd 'allow *'

    # Monitor. A port other than 6789 makes a v2 address, so say v2 outright.
    run monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap"
    run ceph-mon -c "$conf" -i a --mkfs --monmap "$dir/monmap" --keyring "$k"
    run ceph-mon -c "$conf" -i a
    wait_for "the monitor" ceph -c "$conf" --connect-timeout 5 -s

    # One OSD on memstore.
    osd_uuid=$(cat /proc/sys/kernel/random/uuid)
    osd_id=$(timeout "$WAIT" ceph -c "$conf" osd new "$osd_uuid" 2>>"$dir/log/setup.log")
    [ "$osd_id" = 0 ] || {
        log "ceph osd new gave id '$osd_id', expected 0"
        false
    }
    mkdir -p "$dir/osd/0"
    run ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid"
    run ceph-osd -c "$conf" -i 0
    # shellcheck disable=SC2016
    wait_for "the OSD to be up" bash -c 'ceph -c "$1" --connect-timeout 5 osd stat | grep -q "1 up"' _ "$conf"

    # The gateway; it creates its pools before it listens.
    run radosgw -c "$conf" -n client.rgw
    wait_for "radosgw on port $rgw_port" python3 -c '
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=5)
except urllib.error.HTTPError:
    pass  # any HTTP answer will do
except OSError as e:
    sys.exit(f"not yet: {e}")' "http://127.0.0.1:$rgw_port/"

    run radosgw-admin -c "$conf" user create --uid=tributary --display-name=tributary \
        --access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY"

    local endpoint=http://127.0.0.1:$rgw_port
    run python3 - "$endpoint" "$ACCESS_KEY" "$SECRET_KEY" "$BUCKET" <<'EOF'
import sys, boto3
from botocore.config import Config
endpoint, key, secret, bucket = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=key,
                  aws_secret_access_key=secret, region_name="us-east-1",
                  config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
s3.create_bucket(Bucket=bucket)
# The first object written makes radosgw create its data pool: do it now,
# not in the first test.
s3.put_object(Bucket=bucket, Key="s3.sh-warm-up", Body=b"x")
s3.delete_object(Bucket=bucket, Key="s3.sh-warm-up")
s3.head_bucket(Bucket=bucket)
EOF

    cat >"$dir/env" <<EOF
export AWS_ACCESS_KEY_ID=$ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export AWS_REGION=us-east-1
export AWS_DEFAULT_REGION=us-east-1
export AWS_ENDPOINT=$endpoint
export AWS_ENDPOINT_URL=$endpoint
export AWS_ALLOW_HTTP=true
export AWS_VIRTUAL_HOSTED_STYLE_REQUEST=false
export TRIBUTARY_TEST_S3=s3://$BUCKET
EOF
    trap - ERR
    log "Ceph RGW up at $endpoint (bucket $BUCKET) in $(elapsed "$started") s; env: $dir/env"
}

case $cmd in
start) start ;;
stop) stop ;;
*) usage ;;
esac
