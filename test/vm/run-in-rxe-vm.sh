#!/usr/bin/env bash
# Runs one command inside a throw-away QEMU guest that has a Soft-RoCE device
# (rdma_rxe), so arpma's verbs provider can be tested on real rdma-core on a
# machine whose kernel has no RDMA.
#
#   test/vm/run-in-rxe-vm.sh [--timeout SECS] [--ip A] [--nic udp:LOCAL_PORT:PEER_PORT]
#                            [--disk IMAGE] [--pidfile FILE] [--siw] [--no-install] [-v]
#                            -- COMMAND [ARGS...]
#
#   --timeout SECS  kill the guest after SECS seconds (default 600), exit 124
#   --ip A          the guest's IPv4 address in 192.168.77.0/24 (default .1); its IPv6 one
#                   is fd61:7270:6d61::<last octet>
#   --nic ...       a virtio NIC (eth0) linked to another guest instead of the dummy netdev:
#                   QEMU datagrams between 127.0.0.1:LOCAL_PORT and 127.0.0.1:PEER_PORT
#                   (test/vm/run-two-nodes.sh). UDP, not QEMU's TCP socket link: on that,
#                   Nagle and delayed ACKs held back every second small frame for ~40 ms.
#   --disk IMAGE    a raw image as the guest's virtio disk /dev/vda (written back to IMAGE as
#                   the guest writes and flushes: what a guest killed at once leaves there)
#   --pidfile FILE  write QEMU's process id to FILE once it runs (test/vm/power-cut.sh kills it)
#   --siw           Soft-iWARP (siw0) on the netdev instead of Soft-RoCE (rxe0). Debian builds
#                   its kernels without CONFIG_RDMA_SIW, so siw.ko is built once, out of tree,
#                   from Debian's linux-source package of the guest kernel's version against
#                   its linux-headers package (both installed with apt-get; ~1 minute)
#   --no-install    never call apt-get for missing packages
#   -v              stream the guest's console (kernel, init) to stderr
#
# The guest boots a Debian amd64 kernel (downloaded once with apt-get) with a
# busybox initramfs. It sees the host's / read-only (virtio-9p under a tmpfs
# overlay: writes elsewhere are discarded) and this repository read-write at
# its own path. The netdev rxevm0 (dummy) has RXE_VM_IP and RXE_VM_IP6 (a ULA
# IPv6 address) and carries rxe0. COMMAND runs as root in the current directory
# with stdin=/dev/null and the host's environment plus RXE_VM_IP, RXE_VM_IP6,
# RXE_VM_DEV (rxe0, or siw0) and RXE_VM_GID_INDEX (index of rxe0's IPv4 RoCEv2 GID; 0 on
# siw0, whose one GID is its MAC); its stdout and stderr stream to ours.
#
# Exit status: COMMAND's; 124 on timeout; 125 when the guest could not be
# run (the message says why, e.g. which package to install).
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/arpma-rxe-vm (kernel, modules, initramfs).
# Only TCG (software emulation) is used: ~5 s from start to COMMAND.
set -euo pipefail

NAME=run-in-rxe-vm
REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
CACHE=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/arpma-rxe-vm
GUEST_IP=192.168.77.1
NIC=
DISK=
PIDFILE=
TIMEOUT=600
INSTALL=1
VERBOSE=0
RDMA=rxe

log() { printf '%s: %s\n' "$NAME" "$*" >&2; }
die() { log "error: $*"; exit 125; }
usage() { sed -n '2,40{s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --timeout) TIMEOUT=${2:-}; shift 2 || die "--timeout needs a value" ;;
    --no-install) INSTALL=0; shift ;;
    --ip) GUEST_IP=${2:-}; shift 2 || die "--ip needs a value" ;;
    --nic) NIC=${2:-}; shift 2 || die "--nic needs a value" ;;
    --disk) DISK=${2:-}; shift 2 || die "--disk needs a value" ;;
    --pidfile) PIDFILE=${2:-}; shift 2 || die "--pidfile needs a value" ;;
    --siw) RDMA=siw; shift ;;
    -v | --verbose) VERBOSE=1; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    -*) log "unknown option: $1"; usage >&2; exit 125 ;;
    *) break ;;
  esac
done
[[ $# -gt 0 ]] || { usage >&2; exit 125; }
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "bad --timeout: $TIMEOUT"
[[ $GUEST_IP =~ ^192\.168\.77\.([1-9][0-9]?|1[0-9][0-9]|2[0-4][0-9]|25[0-4])$ ]] ||
  die "bad --ip: $GUEST_IP (an address of 192.168.77.0/24)"
GUEST_IP6=fd61:7270:6d61::${GUEST_IP##*.}
[[ -z $NIC || $NIC =~ ^udp:[1-9][0-9]{0,4}:[1-9][0-9]{0,4}$ ]] || die "bad --nic: $NIC"

# ------------------------------------------------------------------ packages
# What the runner itself needs, and what for (shown when it is missing).
declare -A PKG_WHY=(
  [qemu-system-x86]="qemu-system-x86_64, the emulator"
  [busybox-static]="a static /bin/busybox for the initramfs"
  [iproute2]="'rdma', which creates rxe0"
  [kmod]="depmod/modprobe, to pick the guest's kernel modules"
  [cpio]="cpio, to pack the initramfs"
  [xz-utils]="xz, to unpack the kernel image"
  [ibverbs-providers]="librxe, rdma-core's user-space driver for rxe0"
)

missing_packages() {
  local installed
  installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${!PKG_WHY[@]}" 2>/dev/null |
    awk '$NF == "installed" { print $1 }') || true
  local p
  for p in "${!PKG_WHY[@]}"; do
    grep -qx -- "$p" <<<"$installed" || echo "$p"
  done
}

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"
  else return 1
  fi
}

apt_install() {
  log "installing $*"
  as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "$@" >&2 ||
    { as_root apt-get update -q >&2 &&
      as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "$@" >&2; }
}

ensure_packages() {
  command -v dpkg-query >/dev/null || die "needs a Debian system (dpkg-query not found)"
  local missing p
  mapfile -t missing < <(missing_packages)
  if [[ ${#missing[@]} -gt 0 && $INSTALL -eq 1 ]]; then
    apt_install "${missing[@]}" || log "apt-get could not install ${missing[*]}"
    mapfile -t missing < <(missing_packages)
  fi
  if [[ ${#missing[@]} -eq 0 ]]; then
    command -v qemu-system-x86_64 >/dev/null ||
      die "qemu-system-x86_64 not found: install the package qemu-system-x86"
    return 0
  fi
  for p in "${missing[@]}"; do log "missing package $p (provides ${PKG_WHY[$p]})"; done
  die "install them: apt-get install ${missing[*]} (or scripts/install-deps.sh)"
}

# -------------------------------------------------------------------- kernel
# Guest modules; modprobe adds their dependencies. crc32_generic: rdma_rxe
# needs the "crc32" shash, which nothing would autoload. veth, sch_netem: the veth pair and `tc qdisc
# ... netem delay` for bench/conn_rtt.sh (the host's kernel has no netem). libcrc32c: what siw.ko
# (--siw) needs besides ib_core.
MODULES_FS=(virtio_pci 9pnet_virtio 9p overlay virtio_console virtio_net virtio_blk)
MODULES_RDMA=(dummy crc32_generic rdma_rxe rdma_ucm ib_uverbs veth sch_netem libcrc32c)

# Fills $CACHE/kernel once: modules/*.ko, modules.builtin, kver, and the
# kernel as an uncompressed ELF vmlinux (QEMU boots it through the PVH entry
# point; decompressing the bzImage inside the guest costs ~5 s under TCG).
prepare_kernel() {
  local kdir=$CACHE/kernel
  # ready names the modules it was filled with: a changed list fills it again.
  [[ -f $kdir/ready && $(<"$kdir/ready") == "${MODULES_FS[*]} ${MODULES_RDMA[*]}" ]] && return 0
  local pkg
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
    awk '/Depends: linux-image-[0-9]/ { print $2; exit }') || true
  if [[ -z $pkg && $INSTALL -eq 1 ]] && as_root apt-get update -q >&2; then
    pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
      awk '/Depends: linux-image-[0-9]/ { print $2; exit }') || true
  fi
  [[ -n $pkg ]] || die "cannot find the kernel package: apt knows no linux-image-amd64" \
    "(it needs Debian's main archive in the apt sources, then apt-get update)"
  log "preparing the guest kernel from $pkg in $kdir (once)"
  local tmp
  tmp=$(mktemp -d "$CACHE/.kernel.XXXXXX")
  if ! (cd "$tmp" && apt-get download -q "$pkg" >&2); then
    rm -rf "$tmp"
    die "cannot download the kernel package $pkg (apt-get download $pkg failed;" \
      "check the network and the apt sources, then apt-get update)"
  fi
  mkdir "$tmp/root" "$tmp/out" "$tmp/out/modules"
  dpkg-deb -x "$tmp"/*.deb "$tmp/root"
  local kver
  kver=$(ls "$tmp/root/lib/modules")
  [[ -f $tmp/root/boot/vmlinuz-$kver ]] || { rm -rf "$tmp"; die "$pkg has no /boot/vmlinuz-$kver"; }
  depmod -b "$tmp/root" "$kver"
  local m path
  for m in "${MODULES_FS[@]}" "${MODULES_RDMA[@]}"; do
    modprobe -d "$tmp/root" -S "$kver" -C /dev/null --show-depends "$m" >"$tmp/deps" 2>&1 ||
      { rm -rf "$tmp"; die "$pkg has no module $m (the -cloud kernels lack rdma_rxe and 9p)"; }
    while read -r _ path _; do
      m=${path##*/}
      m=${m%%.ko*}.ko
      case $path in
        *.ko.xz) xz -dc "$path" >"$tmp/out/modules/$m" ;;
        *.ko) cp "$path" "$tmp/out/modules/$m" ;;
        *) continue ;;
      esac
    done < <(grep '^insmod ' "$tmp/deps")
  done
  cp "$tmp/root/lib/modules/$kver/modules.builtin" "$tmp/out/"
  echo "$kver" >"$tmp/out/kver"
  echo "$pkg" >"$tmp/out/pkg"
  dpkg-deb -f "$tmp"/*.deb Version >"$tmp/out/version"
  # the bzImage's payload is one xz stream (the data after it makes xz complain)
  local off
  off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$tmp/root/boot/vmlinuz-$kver" | head -n1 | cut -d: -f1) || true
  if [[ -z $off ]] || ! grep -q '^CONFIG_PVH=y' "$tmp/root/boot/config-$kver"; then
    rm -rf "$tmp"
    die "$pkg: no xz payload or no CONFIG_PVH, cannot boot it"
  fi
  tail -c +"$((off + 1))" "$tmp/root/boot/vmlinuz-$kver" | xz -dc >"$tmp/out/vmlinux" 2>/dev/null || true
  [[ $(head -c4 "$tmp/out/vmlinux" | od -An -tx1 | tr -d ' ') == 7f454c46 ]] ||
    { rm -rf "$tmp"; die "$pkg: could not extract vmlinux"; }
  echo "${MODULES_FS[*]} ${MODULES_RDMA[*]}" >"$tmp/out/ready"
  rm -rf "$kdir"
  mv "$tmp/out" "$kdir"
  rm -rf "$tmp"
}

# Adds $CACHE/kernel/modules/siw.ko once (--siw): drivers/infiniband/sw/siw of Debian's
# linux-source-<major.minor> at the kernel package's version, built against linux-headers-<kver>.
# The sources are that package's own, so the module matches the guest kernel it is loaded into.
prepare_siw() {
  local kdir=$CACHE/kernel
  [[ -f $kdir/modules/siw.ko ]] && return 0
  local kver version series tmp
  kver=$(<"$kdir/kver")
  version=$(<"$kdir/version")
  series=${kver%%-*}        # 6.1.0
  series=${series%.*}       # 6.1
  log "building siw.ko for $kver from linux-source-$series $version (once)"
  if [[ ! -d /usr/src/linux-headers-$kver ]] &&
    { [[ $INSTALL -eq 0 ]] || ! apt_install "linux-headers-$kver"; }; then
    die "--siw needs linux-headers-$kver (apt-get install linux-headers-$kver)"
  fi
  tmp=$(mktemp -d "$CACHE/.siw.XXXXXX")
  if ! (cd "$tmp" && apt-get download -q "linux-source-$series=$version" >&2); then
    rm -rf "$tmp"
    die "cannot download linux-source-$series=$version (apt-get download failed)"
  fi
  # only the driver's directory out of the ~140 MB tarball
  dpkg-deb --fsys-tarfile "$tmp"/linux-source-*.deb |
    tar -xO "./usr/src/linux-source-$series.tar.xz" |
    tar -xJ -C "$tmp" --strip-components=5 --wildcards "*/drivers/infiniband/sw/siw/*" ||
    { rm -rf "$tmp"; die "linux-source-$series=$version: no drivers/infiniband/sw/siw"; }
  if ! make -s -C "/usr/src/linux-headers-$kver" M="$tmp" CONFIG_RDMA_SIW=m modules >&2 ||
    [[ ! -f $tmp/siw.ko ]]; then
    rm -rf "$tmp"
    die "building siw.ko against linux-headers-$kver failed (output above)"
  fi
  cp "$tmp/siw.ko" "$kdir/modules/siw.ko.tmp"
  mv "$kdir/modules/siw.ko.tmp" "$kdir/modules/siw.ko"
  rm -rf "$tmp"
}

# ---------------------------------------------------------------- initramfs
# PID 1 in the guest. The control share /ctl (the host's run dir) holds
# 'repo' (path to share read-write), cmd.sh, and receives 'started' and 'rc'.
guest_init() {
  cat <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo /bin/modprobe >/proc/sys/kernel/modprobe
say() { echo "init: $*"; }
finish() { echo "$1" >/ctl/rc; sync; poweroff -f; }
fail() { say "FATAL: $*"; echo "run-in-rxe-vm (guest): $*" >"$err"; finish 125; }
out=/dev/null err=/dev/console
# one modprobe per group (process starts are slow under TCG); RDMA in the background
modprobe -a @MODULES_FS@ || say "modprobe fs failed"
modprobe -a @MODULES_RDMA@ &
rdma_modules=$!
O=trans=virtio,version=9p2000.L,msize=512000
mkdir -p /lower /rw /ctl /newroot
mount -t 9p -o $O,cache=none ctl /ctl || { say "cannot mount the control share"; poweroff -f; }
for p in /sys/class/virtio-ports/*; do
  read -r n <"$p/name"
  case $n in arpma.stdout) out=/dev/${p##*/} ;; arpma.stderr) err=/dev/${p##*/} ;; esac
done
mount -t 9p -o $O,cache=loose,ro hostroot /lower || fail "mount hostroot"
mount -t tmpfs -o mode=0755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
  fail "mount overlay"
R=/newroot
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts $R/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm
ln -sf /proc/self/fd $R/dev/fd
ln -sf /proc/self/fd/0 $R/dev/stdin
ln -sf /proc/self/fd/1 $R/dev/stdout
ln -sf /proc/self/fd/2 $R/dev/stderr
mount -t tmpfs -o mode=0755 tmpfs $R/run
mkdir -p $R/run/arpma-vm
mount --bind /ctl $R/run/arpma-vm
read -r repo </ctl/repo
mkdir -p "$R$repo"
mount -t 9p -o $O,cache=mmap repo "$R$repo" || fail "mount the repository at $repo"
wait $rdma_modules || say "modprobe rdma failed"
ip link set lo up
# The addresses, whether a NIC links this guest to another, and rxe or siw (/ctl/net, from the host).
read -r ip ip6 nic rdma </ctl/net || fail "no /ctl/net"
if [ "$nic" = nic ]; then
  netdev=eth0
  [ -e /sys/class/net/eth0 ] || fail "no eth0 (virtio_net)"
else
  netdev=rxevm0
  ip link add rxevm0 type dummy || fail "ip link add rxevm0 type dummy"
fi
ip addr add $ip/24 dev $netdev && ip link set $netdev up || fail "$netdev setup"
# A ULA IPv6 address too, usable at once (nodad): iproute2's ip by its path, as busybox's chroot
# would run its own ip applet, which has no nodad.
chroot $R /bin/ip -6 addr add $ip6/64 dev $netdev nodad >"$err" 2>&1 || fail "$netdev IPv6 address"
if [ "$rdma" = siw ]; then
  modprobe siw || fail "modprobe siw"
  chroot $R rdma link add siw0 type siw netdev $netdev >"$err" 2>&1 || fail "rdma link add siw0"
  dev=siw0 gid=0
else
  dev=rxe0
  chroot $R rdma link add rxe0 type rxe netdev $netdev >"$err" 2>&1 || fail "rdma link add rxe0"
  gid=
  for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
      read -r v <"$g" 2>/dev/null || continue
      case $v in 0000:0000:0000:0000:0000:ffff:*) gid=${g##*/}; break 2 ;; esac
    done
    usleep 100000
  done
  [ -n "$gid" ] || fail "rxe0 has no IPv4 GID"
fi
ulimit -l unlimited
: >/ctl/started
env -i RXE_VM_IP=$ip RXE_VM_IP6=$ip6 RXE_VM_DEV=$dev RXE_VM_GID_INDEX=$gid \
  chroot $R /bin/bash /run/arpma-vm/cmd.sh </dev/null >"$out" 2>"$err"
finish $?
EOF
}

prepare_initrd() {
  local kdir=$CACHE/kernel
  local key
  key=$( (cat "${BASH_SOURCE[0]}" /bin/busybox "$kdir/kver" && ls "$kdir/modules") | sha256sum | cut -c1-16)
  INITRD=$kdir/initrd-$key.cpio
  [[ -f $INITRD ]] && return 0
  local tmp kver
  tmp=$(mktemp -d "$CACHE/.initrd.XXXXXX")
  kver=$(<"$kdir/kver")
  mkdir -p "$tmp"/{bin,proc,sys,dev} "$tmp/lib/modules/$kver"
  cp /bin/busybox "$tmp/bin/"
  guest_init | sed -e "s/@MODULES_FS@/${MODULES_FS[*]}/" \
    -e "s/@MODULES_RDMA@/${MODULES_RDMA[*]}/" >"$tmp/init"
  chmod 755 "$tmp/init"
  cp "$kdir"/modules/*.ko "$kdir/modules.builtin" "$tmp/lib/modules/$kver/"
  touch "$tmp/lib/modules/$kver/"{modules.order,modules.builtin.modinfo}
  depmod -b "$tmp" "$kver"
  # uncompressed: decompressing would cost more than reading under TCG
  (cd "$tmp" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) >"$INITRD.tmp"
  rm -f "$kdir"/initrd-*.cpio
  mv "$INITRD.tmp" "$INITRD"
  rm -rf "$tmp"
}

# ---------------------------------------------------------------------- main
ensure_packages
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
prepare_kernel
[[ $RDMA == rxe ]] || prepare_siw
prepare_initrd
exec 9>&-

RUN=$(mktemp -d "${TMPDIR:-/tmp}/arpma-rxe-vm.XXXXXX")
QEMU_PID=
READERS=()
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  if [[ -n $QEMU_PID ]]; then
    kill -KILL "$QEMU_PID" 2>/dev/null || true
    wait "$QEMU_PID" 2>/dev/null || true
  fi
  local p
  for p in "${READERS[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$RUN"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM HUP

echo "$REPO" >"$RUN/repo"
link=dummy
[[ -z $NIC ]] || link=nic
echo "$GUEST_IP $GUEST_IP6 $link $RDMA" >"$RUN/net"
NET_ARGS=()
if [[ -n $NIC ]]; then
  ports=${NIC#udp:}
  NET_ARGS=(-netdev "dgram,id=link,local.type=inet,local.host=127.0.0.1,local.port=${ports%%:*},remote.type=inet,remote.host=127.0.0.1,remote.port=${ports#*:}"
    -device "virtio-net-pci,netdev=link,mac=52:54:00:77:00:$(printf %02x "${GUEST_IP##*.}")")
fi
DISK_ARGS=()
if [[ -n $DISK ]]; then
  [[ -f $DISK ]] || die "--disk $DISK: no such file"
  drive="file=${DISK//,/,,},if=none,id=disk,format=raw,cache=writeback"
  DISK_ARGS=(-drive "$drive" -device "virtio-blk-pci,drive=disk")
fi
{
  (unset -v PWD OLDPWD SHLVL RXE_VM_IP RXE_VM_IP6 RXE_VM_DEV RXE_VM_GID_INDEX; export -p)
  printf 'cd -- %q || exit 125\n' "$PWD"
  printf 'exec'
  printf ' %q' "$@"
  printf '\n'
} >"$RUN/cmd.sh"

mkfifo "$RUN/stdout" "$RUN/stderr"
# keep draining when our own stdout goes away, so the guest never blocks
{ cat || cat >/dev/null; } <"$RUN/stdout" &
READERS+=($!)
{ cat >&2 || cat >/dev/null; } <"$RUN/stderr" &
READERS+=($!)
: >"$RUN/console"

NCPU=$(nproc)
APPEND="console=ttyS0 loglevel=4 panic=-1 mitigations=off acpi=noirq cryptomgr.notests"
APPEND+=" tsc=reliable init_on_alloc=0 i8042.noaux i8042.nokbd i8042.nopnp"
T0=$EPOCHREALTIME
qemu-system-x86_64 -nodefaults -no-user-config -display none -no-reboot \
  -machine pc -accel tcg,thread=multi -cpu max -smp $((NCPU > 4 ? 4 : NCPU)) -m 2G \
  -kernel "$CACHE/kernel/vmlinux" -initrd "$INITRD" -append "$APPEND" \
  -chardev "file,id=con,path=$RUN/console" -serial chardev:con \
  -device virtio-serial-pci,id=vser \
  -chardev "file,id=out,path=$RUN/stdout" \
  -device virtserialport,bus=vser.0,nr=1,chardev=out,name=arpma.stdout \
  -chardev "file,id=err,path=$RUN/stderr" \
  -device virtserialport,bus=vser.0,nr=2,chardev=err,name=arpma.stderr \
  -fsdev "local,id=root,path=/,security_model=none,readonly=on,multidevs=remap" \
  -device virtio-9p-pci,fsdev=root,mount_tag=hostroot \
  -fsdev "local,id=ctl,path=$RUN,security_model=none" \
  -device virtio-9p-pci,fsdev=ctl,mount_tag=ctl \
  -fsdev "local,id=repo,path=${REPO//,/,,},security_model=none,multidevs=remap" \
  -device virtio-9p-pci,fsdev=repo,mount_tag=repo \
  "${NET_ARGS[@]}" "${DISK_ARGS[@]}" \
  </dev/null >"$RUN/qemu.log" 2>&1 &
QEMU_PID=$!
[[ -z $PIDFILE ]] || echo "$QEMU_PID" >"$PIDFILE"
if [[ $VERBOSE -eq 1 ]]; then
  tail -n +1 -s 0.2 --pid="$QEMU_PID" -f "$RUN/console" >&2 &
  READERS+=($!)
fi

deadline=$((SECONDS + TIMEOUT))
T_START=
while kill -0 "$QEMU_PID" 2>/dev/null; do
  [[ -n $T_START || ! -e $RUN/started ]] || T_START=$EPOCHREALTIME
  if [[ $SECONDS -ge $deadline ]]; then
    log "timeout after ${TIMEOUT} s, killing the guest; last console lines:"
    tail -n 20 "$RUN/console" >&2
    exit 124
  fi
  sleep 0.1
done
wait "$QEMU_PID" || true
QEMU_PID=
T_END=$EPOCHREALTIME
# the readers see EOF once QEMU has closed the fifos
for p in "${READERS[@]}"; do
  for _ in {1..20}; do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
done

if [[ ! -s $RUN/rc ]]; then
  log "error: the guest reported no exit status; console and QEMU log:"
  tail -n 30 "$RUN/console" >&2
  cat "$RUN/qemu.log" >&2
  exit 125
fi
rc=$(<"$RUN/rc")
if [[ -n $T_START ]]; then
  log "$(awk -v a="$T0" -v s="$T_START" -v e="$T_END" -v rc="$rc" 'BEGIN {
    printf "boot to command %.1f s, command + poweroff %.1f s, total %.1f s, exit status %d",
           s - a, e - s, e - a, rc }')"
fi
exit "$rc"
