#!/usr/bin/env bash
# A real one-node Kubernetes on loopback, built here from registry packages only, runs the Job
# that `bolide k8s` writes, and checks that the merge of its pods' documents is exact.
#
#   bench/k8s-local.sh            # all five cases; prints `k8s-local: PASS ...` or `FAIL ...` last
#
# What it brings up (on 127.0.0.1, and the node address 10.88.88.1/32 added to lo):
#   - etcd (Debian's etcd-server), then kube-apiserver, kube-controller-manager (the job,
#     serviceaccount, garbage-collector, ttl-after-finished and node-lifecycle controllers),
#     kube-scheduler, a real
#     kubelet on containerd and runc (Debian), and kubectl: Kubernetes $K8S_VERSION from the Go
#     module proxy's k8s.io/kubernetes, built once into one binary (bench/k8s/cluster) and cached;
#   - two images made here with no registry (buildah from scratch, imported with ctr): bolide with
#     the libraries it links and busybox's shell, and a pause image (bench/k8s/pause.c);
#   - `bolide serve` on the host; the pods use the host network, so loopback stays the only target.
# Cases:
#   1. `bolide k8s --segments 4 ... --wait -- run bench/k8s/scenario.yml`: the merged counts equal
#      the server's (sessions, methods);
#   2. the same with one pod deleted mid-run: the merge must say that segment was interrupted, and
#      its counts, the pod's last words included, still equal the server's;
#   3. 20 pods: the skew of their starts from the shared start; the Job kept (--keep), then
#      deleted by its TTL;
#   4. as 2 with --retries 1: the index runs again, late; every document printed, together,
#      equals the server's counts, and the merge keeps the re-run and says so;
#   5. an image the node does not have: --wait stops the Job after a minute, naming the pod and
#      why, and exits 3.
#
# Environment: BOLIDE (a bolide binary; default: this checkout's release build, built if needed),
# BOLIDE_K8S_CACHE (where the cluster binary is kept; default ~/.cache/bolide-k8s), K8S_VERSION
# (default v1.35.4), KEEP=1 (leave the cluster running and say where), CASES ("1 2 3 4 5").
# Needs root (the kubelet and containerd), Go, gcc and apt (installs etcd-server, containerd, runc,
# buildah, busybox-static, containernetworking-plugins when missing).
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
K8S_VERSION=${K8S_VERSION:-v1.35.4}
CACHE=${BOLIDE_K8S_CACHE:-$HOME/.cache/bolide-k8s}
CASES=${CASES:-1 2 3 4 5}
WORK=$(mktemp -d /tmp/bk8s.XXXXXX)
LOGS=$CACHE/last-run
rm -rf "$LOGS"
mkdir -p "$LOGS" "$CACHE"
PIDS=()
# The node's address: the kubelet refuses a loopback one (127.0.0.0/8), so the loopback interface
# gets a private address of its own that only this machine routes (the apiserver reaches the
# kubelet there for the pods' logs).
NODE_IP=10.88.88.1
NODE_ADDED=0
SUMMARY=()
FAILED=0

say() { printf '[k8s-local %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
fail() {
    say "FAIL: $*"
    echo "k8s-local: FAIL $* (logs under $LOGS)"
    exit 1
}
cleanup() {
    if [ "${KEEP:-0}" = 1 ]; then
        say "cluster left running (KEEP=1): KUBECONFIG=$WORK/kubeconfig $WORK/bin/kubectl get pods -A"
        return
    fi
    [ -n "${job:-}" ] && kill "$job" 2>/dev/null # a case's bolide k8s --wait, when interrupted
    [ -x "$WORK/bin/kubectl" ] && "$WORK/bin/kubectl" --request-timeout=10s delete jobs --all --wait=false >/dev/null 2>&1
    # The pods' containers, then the processes, then the shims (they outlive containerd), then the
    # kubelet's mounts.
    [ -S "$WORK/containerd/containerd.sock" ] && for t in $(ctr --address "$WORK/containerd/containerd.sock" -n k8s.io task ls -q 2>/dev/null); do
        ctr --address "$WORK/containerd/containerd.sock" -n k8s.io task kill -s SIGKILL "$t" >/dev/null 2>&1
    done
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill "${PIDS[$i]}" 2>/dev/null; done
    sleep 2
    pkill -9 -f "containerd-shim-runc-v2 .*-address $WORK/containerd/containerd.sock" 2>/dev/null
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill -9 "${PIDS[$i]}" 2>/dev/null; done
    grep " $WORK" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null
    [ "$NODE_ADDED" = 1 ] && ip addr del "$NODE_IP/32" dev lo 2>/dev/null
    rm -rf "$WORK" 2>/dev/null || say "some of $WORK could not be removed"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits (at most $2 seconds) until the command "$3..." succeeds.
until_ok() {
    local what=$1 limit=$2
    shift 2
    local t0=$SECONDS
    until "$@" >/dev/null 2>&1; do
        ((SECONDS - t0 < limit)) || fail "$what: not ready after ${limit}s"
        sleep 1
    done
}

start() { # name, command...: runs it in the background, its output in $LOGS/name.log
    local name=$1
    shift
    "$@" >"$LOGS/$name.log" 2>&1 &
    PIDS+=($!)
    disown $! # killed at the end without a word from bash
    say "started $name (pid $!)"
}

[ "$(id -u)" = 0 ] || fail "needs root: the kubelet and containerd manage cgroups and mounts"
for port in 23791 23801 16443 10248 10257 10259 31880; do
    if (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null; then fail "port $port on 127.0.0.1 is taken"; fi
done

# --- 1. Packages and binaries --------------------------------------------------------------------
missing=()
for p in etcd:etcd-server containerd:containerd runc:runc buildah:buildah busybox:busybox-static; do
    command -v "${p%%:*}" >/dev/null || missing+=("${p#*:}")
done
[ -x /usr/lib/cni/loopback ] || missing+=(containernetworking-plugins)
if [ ${#missing[@]} -gt 0 ]; then
    say "apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >"$LOGS/apt.log" 2>&1 ||
        fail "apt-get install ${missing[*]} (see $LOGS/apt.log)"
fi

KUBE=$CACHE/kube-$K8S_VERSION
if [ ! -x "$KUBE" ]; then
    say "building Kubernetes $K8S_VERSION (apiserver, controller-manager, scheduler, kubelet, kubectl) into $KUBE: ~25 min on 2 cores"
    mod=$WORK/cluster-module
    cp -r "$HERE/k8s/cluster" "$mod"
    if [ "$K8S_VERSION" != v1.35.4 ]; then
        staging=v0.${K8S_VERSION#v1.}
        sed -i "s/k8s.io\/kubernetes v1.35.4/k8s.io\/kubernetes $K8S_VERSION/; s/ v0.35.4\$/ $staging/" "$mod/go.mod"
        (cd "$mod" && go mod tidy) >"$LOGS/go-mod.log" 2>&1 || fail "go mod tidy for $K8S_VERSION (see $LOGS/go-mod.log)"
    fi
    t0=$SECONDS
    minor=${K8S_VERSION#v1.}
    minor=${minor%%.*}
    stamp=""
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        stamp="$stamp -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    done
    (cd "$mod" && nice -n 10 go build -trimpath -ldflags="-s -w$stamp" -o "$KUBE.tmp" .) >"$LOGS/go-build.log" 2>&1 ||
        fail "building Kubernetes (see $LOGS/go-build.log)"
    mv "$KUBE.tmp" "$KUBE"
    echo "$((SECONDS - t0))" >"$KUBE.build-seconds"
    say "built in $((SECONDS - t0)) s"
fi
BUILD_S=$(cat "$KUBE.build-seconds" 2>/dev/null || echo "?")
mkdir -p "$WORK/bin"
for part in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
    printf '#!/bin/sh\nexec %s %s "$@"\n' "$KUBE" "$part" >"$WORK/bin/$part"
    chmod +x "$WORK/bin/$part"
done
KUBECTL=$WORK/bin/kubectl
export KUBECONFIG=$WORK/kubeconfig

BOLIDE=${BOLIDE:-}
if [ -z "$BOLIDE" ]; then
    say "building bolide (release)"
    (cd "$ROOT" && cargo build --release -q -p bolide) >"$LOGS/cargo.log" 2>&1 || fail "cargo build (see $LOGS/cargo.log)"
    BOLIDE=$ROOT/target/release/bolide
fi
[ -x "$BOLIDE" ] || fail "BOLIDE=$BOLIDE is not an executable"

# --- 2. Images, made here -------------------------------------------------------------------------
say "images: bolide and pause (buildah from scratch, no registry)"
B=(buildah --root "$WORK/buildah/root" --runroot "$WORK/buildah/run" --storage-driver vfs)
img=$WORK/rootfs-bolide
mkdir -p "$img/bin" "$img/usr/local/bin" "$img/tmp"
chmod 1777 "$img/tmp"
cp "$(command -v busybox)" "$img/bin/busybox"
for tool in sh cat echo sleep; do ln -s busybox "$img/bin/$tool"; done
cp "$BOLIDE" "$img/usr/local/bin/bolide"
strip "$img/usr/local/bin/bolide" 2>/dev/null
# What the binary links (nothing when it is static).
ldd "$BOLIDE" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
    mkdir -p "$img$(dirname "$lib")"
    cp -L "$lib" "$img$lib"
done
pause=$WORK/rootfs-pause
mkdir -p "$pause"
gcc -static -O2 -o "$pause/pause" "$HERE/k8s/pause.c" || fail "gcc -static bench/k8s/pause.c"
make_image() { # rootfs, name, entrypoint
    local c
    c=$("${B[@]}" from scratch) || return 1
    "${B[@]}" copy "$c" "$1" / >/dev/null &&
        "${B[@]}" config --env PATH=/usr/local/bin:/bin --entrypoint "$3" "$c" &&
        "${B[@]}" commit -q "$c" "$2" >/dev/null &&
        "${B[@]}" push -q "$2" "oci-archive:$WORK/$(basename "$1").tar:$2"
}
make_image "$img" docker.io/local/bolide:k8s-local '["/usr/local/bin/bolide"]' >"$LOGS/buildah.log" 2>&1 ||
    fail "buildah: the bolide image (see $LOGS/buildah.log)"
make_image "$pause" docker.io/local/pause:k8s-local '["/pause"]' >>"$LOGS/buildah.log" 2>&1 ||
    fail "buildah: the pause image (see $LOGS/buildah.log)"
IMAGE=docker.io/local/bolide:k8s-local

# --- 3. The cluster -------------------------------------------------------------------------------
if ! ip -4 addr show dev lo | grep -q " $NODE_IP/"; then
    ip addr add "$NODE_IP/32" dev lo || fail "ip addr add $NODE_IP/32 dev lo (the node's address)"
    NODE_ADDED=1
fi
say "certificates and tokens"
pki=$WORK/pki
mkdir -p "$pki"
openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$TOKEN,admin,admin,system:masters" >"$pki/tokens.csv"
cat >"$KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: { server: "https://127.0.0.1:16443", insecure-skip-tls-verify: true }
users:
- name: admin
  user: { token: "$TOKEN" }
contexts:
- name: local
  context: { cluster: local, user: admin, namespace: default }
current-context: local
EOF
chmod 600 "$KUBECONFIG"

start etcd etcd --name local --data-dir "$WORK/etcd" \
    --listen-client-urls http://127.0.0.1:23791 --advertise-client-urls http://127.0.0.1:23791 \
    --listen-peer-urls http://127.0.0.1:23801 --initial-advertise-peer-urls http://127.0.0.1:23801 \
    --initial-cluster local=http://127.0.0.1:23801
until_ok etcd 30 curl -fsS http://127.0.0.1:23791/health

t_up=$SECONDS
start kube-apiserver "$WORK/bin/kube-apiserver" --etcd-servers=http://127.0.0.1:23791 \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=16443 \
    --cert-dir="$pki/apiserver" --token-auth-file="$pki/tokens.csv" --authorization-mode=AlwaysAllow \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc --api-audiences=https://kubernetes.default.svc \
    --service-cluster-ip-range=10.96.0.0/24 --kubelet-preferred-address-types=InternalIP \
    --enable-priority-and-fairness=false --storage-backend=etcd3
until_ok "kube-apiserver /readyz" 120 "$KUBECTL" get --raw /readyz

start kube-controller-manager "$WORK/bin/kube-controller-manager" --kubeconfig="$KUBECONFIG" \
    --controllers=job-controller,serviceaccount-controller,garbage-collector-controller,ttl-after-finished-controller,node-lifecycle-controller --leader-elect=false \
    --bind-address=127.0.0.1 --use-service-account-credentials=false
start kube-scheduler "$WORK/bin/kube-scheduler" --kubeconfig="$KUBECONFIG" --leader-elect=false \
    --bind-address=127.0.0.1

mkdir -p "$WORK/containerd" "$WORK/cni"
cat >"$WORK/containerd/config.toml" <<EOF
version = 2
root = "$WORK/containerd/root"
state = "$WORK/containerd/state"
[grpc]
  address = "$WORK/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/local/pause:k8s-local"
  # This machine's root lacks CAP_SYS_RESOURCE: no process may lower its OOM score, which the
  # kubelet asks for its pods' sandboxes (-998); kept at the runtime's own instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$WORK/cni"
EOF
# A network for pods off the host network (none here): the runtime reports ready with one.
cat >"$WORK/cni/10-local.conflist" <<EOF
{ "cniVersion": "0.4.0", "name": "local", "plugins": [
  { "type": "bridge", "bridge": "bk8s0", "isGateway": true, "ipMasq": false,
    "ipam": { "type": "host-local", "ranges": [[{ "subnet": "10.244.0.0/24" }]] } },
  { "type": "loopback" } ] }
EOF
start containerd containerd --config "$WORK/containerd/config.toml"
SOCK=$WORK/containerd/containerd.sock
until_ok containerd 30 ctr --address "$SOCK" version
for tar in "$WORK/rootfs-bolide.tar" "$WORK/rootfs-pause.tar"; do
    ctr --address "$SOCK" -n k8s.io images import "$tar" >>"$LOGS/ctr.log" 2>&1 || fail "ctr import $tar (see $LOGS/ctr.log)"
done
ctr --address "$SOCK" -n k8s.io images ls -q >>"$LOGS/ctr.log"

mkdir -p "$WORK/kubelet"
cat >"$WORK/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$SOCK
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication: { anonymous: { enabled: true }, webhook: { enabled: false } }
authorization: { mode: AlwaysAllow }
failSwapOn: false
podLogsDir: $WORK/pod-logs
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: { memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%" }
maxPods: 110
EOF
start kubelet "$WORK/bin/kubelet" --config="$WORK/kubelet/config.yaml" --kubeconfig="$KUBECONFIG" \
    --root-dir="$WORK/kubelet/root" --cert-dir="$WORK/kubelet/pki" --node-ip=$NODE_IP \
    --hostname-override=bolide-local
node_ready() { [ "$("$KUBECTL" get node bolide-local -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
untainted() { [ -z "$("$KUBECTL" get node bolide-local -o jsonpath='{.spec.taints}')" ]; }
until_ok "the node Ready" 120 node_ready
# The node-lifecycle controller lifts the not-ready taint the kubelet registers with.
until_ok "the node's not-ready taint lifted" 120 untainted
until_ok "the default ServiceAccount" 60 "$KUBECTL" get serviceaccount default
UP_S=$((SECONDS - t_up))
say "cluster up in ${UP_S}s: $("$KUBECTL" version -o json 2>/dev/null | python3 -c 'import json,sys; v=json.load(sys.stdin); print("server", v["serverVersion"]["gitVersion"])')"

# --- 4. The server under test, on the host --------------------------------------------------------
PORT=31880
start serve "$BOLIDE" serve --port $PORT
until_ok "bolide serve" 30 curl -fsS "http://127.0.0.1:$PORT/stats"
stats() { curl -fsS "http://127.0.0.1:$PORT/stats"; }

figures() { python3 "$HERE/k8s/figures.py" "$@"; }

k8s_job() { # name, segments, start-in, extra bolide k8s flags...
    local name=$1 n=$2 start_in=$3
    shift 3
    "$BOLIDE" k8s --segments "$n" --name "$name" --image "$IMAGE" --image-pull-policy Never --host-network \
        --start-in "$start_in" --wait --kubectl "$KUBECTL" --json "$WORK/$name.json" --logs "$WORK/$name.log" "$@" \
        -- run "$HERE/k8s/scenario.yml" --target "http://127.0.0.1:$PORT"
}

# --- 5. The cases ---------------------------------------------------------------------------------
# Deletes the pod of index 2 (segment 3/4) of Job $1 once its load has run 6 s (it starts 15 s
# after the Job is created).
delete_mid_run() {
    local t0=$SECONDS sel="job-name=$1,batch.kubernetes.io/job-completion-index=2"
    until "$KUBECTL" get pod -l "$sel" -o jsonpath='{.items[0].status.phase}' 2>/dev/null | grep -q Running; do
        ((SECONDS - t0 < 60)) || break
        sleep 1
    done
    local rest=$((15 - (SECONDS - t0) + 6))
    ((rest > 0)) && sleep $rest
    "$KUBECTL" delete pod -l "$sel" --wait=false >>"$LOGS/$1.kubectl" 2>&1
    say "deleted the pod of index 2 (segment 3/4) of Job $1"
}

for case in $CASES; do
    stats >"$WORK/before-$case.json"
    case $case in
    1)
        say "case 1: 4 pods, one segment each"
        k8s_job whole 4 15s >"$LOGS/case-1.out" 2>&1
        code=$?
        stats >"$WORK/after-1.json"
        line=$(figures check "4 pods" "$WORK/whole.json" "$WORK/before-1.json" "$WORK/after-1.json") || FAILED=1
        [ $code = 0 ] || { FAILED=1; line="$line; bolide k8s --wait exited $code"; }
        ;;
    2)
        say "case 2: 4 pods, the pod of segment 3 deleted mid-run"
        k8s_job deleted 4 15s >"$LOGS/case-2.out" 2>&1 &
        job=$!
        delete_mid_run deleted
        wait $job
        code=$?
        stats >"$WORK/after-2.json"
        # The pod's last words (its partial document) make the counts whole; the merge says which
        # segment was interrupted, and the run is not the plan (exit 3).
        line=$(figures check "a pod deleted" "$WORK/deleted.json" "$WORK/before-2.json" "$WORK/after-2.json") || FAILED=1
        figures deleted "$WORK/deleted.json" || { FAILED=1; line="$line; the merge did not report segment 3 interrupted"; }
        [ $code = 3 ] || { FAILED=1; line="$line; bolide k8s --wait exited $code, not 3"; }
        ;;
    3)
        say "case 3: 20 pods, the skew of their starts; the Job kept, then deleted by its TTL"
        k8s_job many 20 45s --keep --ttl 20s >"$LOGS/case-3.out" 2>&1
        code=$?
        stats >"$WORK/after-3.json"
        line=$(figures check "20 pods" "$WORK/many.json" "$WORK/before-3.json" "$WORK/after-3.json") || FAILED=1
        "$KUBECTL" get job many -o json >"$WORK/many-job.json" 2>>"$LOGS/case-3.out"
        "$KUBECTL" get pods -l job-name=many -o json >"$WORK/many-pods.json" 2>>"$LOGS/case-3.out"
        shared=$(grep -o 'their load from [^;]*' "$LOGS/case-3.out" | awk '{print $4}')
        skew=$(figures skew "$WORK/many.json" "$shared" "$WORK/many-job.json" "$WORK/many-pods.json") ||
            { FAILED=1; skew="the start skew could not be read: $skew"; }
        # --ttl 20s: the ttl-after-finished controller deletes the kept Job, the garbage
        # collector its pods and the ConfigMap (--wait made the Job its owner).
        t0=$SECONDS
        left() { "$KUBECTL" get job/many configmap/many-scenario --ignore-not-found -o name 2>/dev/null; }
        while [ -n "$(left)" ] && ((SECONDS - t0 < 120)); do sleep 1; done
        if [ -n "$(left)" ]; then
            FAILED=1
            ttl="still there 120 s after the Job's end (--ttl 20s): $(left | tr '\n' ' ')"
        else
            ttl="the kept Job and its ConfigMap deleted by its TTL $((SECONDS - t0)) s after --wait returned"
        fi
        [ $code = 0 ] || { FAILED=1; line="$line; bolide k8s --wait exited $code"; }
        line="$line; $skew; $ttl"
        ;;
    4)
        say "case 4: as 2 with --retries 1: the index runs again"
        k8s_job rerun 4 15s --retries 1 >"$LOGS/case-4.out" 2>&1 &
        job=$!
        delete_mid_run rerun
        wait $job
        code=$?
        stats >"$WORK/after-4.json"
        line=$(figures rerun "$WORK/rerun.log" "$WORK/rerun.json" "$WORK/before-4.json" "$WORK/after-4.json") || FAILED=1
        [ $code = 3 ] || { FAILED=1; line="$line; bolide k8s --wait exited $code, not 3"; }
        ;;
    5)
        say "case 5: an image the node does not have (--image-pull-policy Never)"
        "$BOLIDE" k8s --segments 2 --name noimage --image docker.io/local/absent:1 --image-pull-policy Never \
            --host-network --start-in 10s --wait --kubectl "$KUBECTL" --json "$WORK/noimage.json" --logs "$WORK/noimage.log" \
            -- run "$HERE/k8s/scenario.yml" --target "http://127.0.0.1:$PORT" >"$LOGS/case-5.out" 2>&1
        code=$?
        said=$(grep -o 'pod [^ ]* cannot start its container ([A-Za-z]*)' "$LOGS/case-5.out" | head -1)
        line="an absent image: bolide k8s --wait exited $code: ${said:-no pod named}"
        [ $code = 3 ] && [ -n "$said" ] || FAILED=1
        ;;
    *) fail "no case $case (CASES takes 1 to 5)" ;;
    esac
    say "$line"
    SUMMARY+=("$line")
done

say "Kubernetes $K8S_VERSION (built in ${BUILD_S}s, cluster up in ${UP_S}s)"
for l in "${SUMMARY[@]}"; do say "$l"; done
if [ $FAILED = 0 ]; then
    echo "k8s-local: PASS Kubernetes $K8S_VERSION, real kubelet; $(IFS=';'; echo "${SUMMARY[*]}")"
else
    echo "k8s-local: FAIL Kubernetes $K8S_VERSION; $(IFS=';'; echo "${SUMMARY[*]}") (logs under $LOGS)"
    exit 1
fi
